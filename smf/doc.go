// Package smf holds no Go code: the directory is what a Triton zone and a
// Linux host need to run cns, and its tests check it.
//
//   - cns.xml and method/cns: the SMF service (cns.service: systemd's unit)
//   - sapi_manifests/cns: the SAPI manifest and config-agent template that
//     render /opt/triton/cns/etc/config.json from SAPI metadata
//   - boot: the zone's setup.sh (first boot) and configure.sh (every boot)
//   - build-release.sh: the release tarball a zone image is built from
package smf

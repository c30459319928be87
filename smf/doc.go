// Package smf holds no Go code: the directory is what a Triton zone and a
// Linux host need to run cns, and its tests check it.
//
//   - cns.xml and method/cns: the SMF service (cns.service: systemd's unit)
//   - sapi_manifests/cns: the SAPI manifest and config-agent template that
//     render /opt/triton/cns/etc/config.json from SAPI metadata;
//     sapi_manifests/registrar: registrar's, which registers the zone in
//     binder as cns.<datacenter>.<dns_domain>
//   - boot: what the image puts at /opt/smartdc/boot: setup.sh (first
//     boot), configure.sh (every boot), lib/util.sh (the steps of
//     sdc-scripts' lib/util.sh), lib/cns.sh (cns's own), sbin/postlogrotate.sh
//   - build-release.sh: the release tarball; build-image.sh: the zone image
//     built from it on the origin image with the agents
//   - man: cnsadm(1), generated from the CLI (go generate in the root)
package smf

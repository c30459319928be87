// Package smf is what runs cns as a service of a Triton zone (and of a
// Linux host). Its Go part is what cns serve needs from the zone: logs in
// bunyan's format (NewBunyanHandler), the zone's metadata read as the
// service's user may (Metadata: its admin addresses), SMF's exit
// statuses (ExitConfig), and the Go heap's limit from the memory the
// zone's cap or the host's cgroup gives cns (SetMemoryLimit). The rest of
// the directory is what the zone runs, and its tests check it:
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
//   - man: cnsadm(1), cns(8) and cns.json(5), generated from the CLI and the
//     key table (package smf/man says how)
package smf

#!/usr/bin/env bash
#
# build-release.sh OUTDIR: builds the release tarball a Triton zone image
# is made from (build-image.sh), OUTDIR/cns-pkg-VERSION.tar.gz, and prints
# its path. The layout is the one the reference's Makefile builds:
#
#   root/opt/triton/cns/bin/cns            the binary (GOOS=illumos GOARCH=amd64)
#   root/opt/triton/cns/bin/cnsadm         -> cns (cnsadm is `cns adm`, by argv[0])
#   root/opt/triton/cns/smf/manifests/cns.xml
#   root/opt/triton/cns/smf/method/cns
#   root/opt/triton/cns/etc/               config-agent writes config.json here
#   root/opt/triton/cns/sapi_manifests/{cns,registrar}/{manifest.json,template}
#                                          config-agent's manifests in the image
#   root/opt/smartdc/boot/                 what every core zone has there (the
#                                          reference copies sdc-scripts and its
#                                          boot/ into it): setup.sh, configure.sh,
#                                          lib/{util,cns}.sh, sbin/postlogrotate.sh,
#                                          etc/root.bashrc, etc/security/*_attr.d/mdata
#   root/opt/local/bin/cnsadm              -> /opt/triton/cns/bin/cnsadm, in root's
#                                          PATH where the reference put its cnsadm
#   root/opt/local/man/man1/cnsadm.1       where `man cnsadm` looks (root's MANPATH)
#   root/opt/local/man/man5/cns.json.5     the configuration file's page
#   root/opt/local/man/man8/cns.8          cns's page
#   site/                                  empty, as the image build expects
#
# Scripts and the binary are mode 0755, everything else 0644, directories
# 0755, all owned by root (0:0); file times are the commit's, so the same
# commit builds the same tarball. Environment:
#   VERSION        the version `cns version` prints (default: git describe)
#   GOOS, GOARCH   the target (default illumos/amd64; the tests build for
#                  the host to run the binary inside)
# Needs go, git and GNU tar.
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
top=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
goos=${GOOS:-illumos}
goarch=${GOARCH:-amd64}
commit=$(git -C "$top" rev-parse --short HEAD)
version=${VERSION:-$(git -C "$top" describe --tags --always --dirty)}
mtime=$(git -C "$top" log -1 --format=%cI)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/root/opt/triton/cns
boot=$stage/root/opt/smartdc/boot
install -d -m 0755 "$root/bin" "$root/smf/manifests" "$root/smf/method" "$root/etc" \
	"$root/sapi_manifests/cns" "$root/sapi_manifests/registrar" \
	"$boot/lib" "$boot/sbin" "$boot/etc/security/prof_attr.d" "$boot/etc/security/exec_attr.d" \
	"$stage/root/opt/local/bin" "$stage/root/opt/local/man/man1" "$stage/root/opt/local/man/man5" \
	"$stage/root/opt/local/man/man8" "$stage/site"

(cd "$top" && CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath \
	-ldflags "-X main.version=$version -X main.commit=$commit" -o "$root/bin/cns" .)
chmod 0755 "$root/bin/cns"
ln -s cns "$root/bin/cnsadm"

install -m 0644 "$top/smf/cns.xml" "$root/smf/manifests/cns.xml"
install -m 0755 "$top/smf/method/cns" "$root/smf/method/cns"
for m in cns registrar; do
	install -m 0644 "$top/smf/sapi_manifests/$m/manifest.json" "$top/smf/sapi_manifests/$m/template" \
		"$root/sapi_manifests/$m/"
done
install -m 0755 "$top/smf/boot/setup.sh" "$top/smf/boot/configure.sh" "$boot/"
install -m 0644 "$top/smf/boot/lib/util.sh" "$top/smf/boot/lib/cns.sh" "$boot/lib/"
install -m 0755 "$top/smf/boot/sbin/postlogrotate.sh" "$boot/sbin/"
install -m 0644 "$top/smf/boot/etc/root.bashrc" "$boot/etc/"
install -m 0644 "$top/smf/boot/etc/security/prof_attr.d/mdata" "$boot/etc/security/prof_attr.d/"
install -m 0644 "$top/smf/boot/etc/security/exec_attr.d/mdata" "$boot/etc/security/exec_attr.d/"
# The man pages, generated from the CLI's help and the key table (smf/man says by
# what), each checked against its source by its package's test.
install -m 0644 "$top/smf/man/cnsadm.1" "$stage/root/opt/local/man/man1/cnsadm.1"
install -m 0644 "$top/smf/man/cns.json.5" "$stage/root/opt/local/man/man5/cns.json.5"
install -m 0644 "$top/smf/man/cns.8" "$stage/root/opt/local/man/man8/cns.8"
ln -s /opt/triton/cns/bin/cnsadm "$stage/root/opt/local/bin/cnsadm"

tarball=$out/cns-pkg-$version.tar.gz
tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime="$mtime" \
	-czf "$tarball" root site
echo "$tarball"

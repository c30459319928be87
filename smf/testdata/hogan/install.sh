#!/usr/bin/env bash
# install.sh: puts the template renderer config-agent uses into a cache
# directory outside the git tree and prints that directory (the last line
# of stdout). Used by the smf tests and by .ci/run (to prefetch).
#
# config-agent (sdc-config-agent) renders SAPI templates with hogan.js,
# pinned to joyent/hogan.js#c5cb8e8: npm's hogan.js 3.0.2 plus one change,
# "{{{foo}}} when foo is a plain JS object should return JSON" (the
# reference's template relies on it for forward_zones; cns's for its object
# keys). That commit is on GitHub, not in the npm registry, so this script
# takes hogan.js 3.0.2 from npm (checked against its published sha1) and
# makes that same change to lib/template.js's coerceToString. The fork's
# other difference from 3.0.2 (a third argument to lambdas) does not touch
# templates without lambdas.
#
#   <dir>/node_modules/hogan.js/   hogan.js 3.0.2 with the fork's change
#
# The directory is keyed by this script and render.js, so changing it installs afresh.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
HOGAN_VERSION=3.0.2
HOGAN_SHA1=4cd9e1abd4294146e7679e41d7898732b02c7bfd

key=$(cat "$0" "$here/render.js" | sha256sum | cut -c1-16)
root=${CNS_HOGAN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cns-hogan}
dir=$root/$key
if [ -f "$dir/.complete" ]; then
	echo "$dir"
	exit 0
fi

mkdir -p "$root"
tmp=$(mktemp -d "$root/.install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
npm pack --silent "hogan.js@$HOGAN_VERSION" >&2
tgz="hogan.js-$HOGAN_VERSION.tgz"
echo "$HOGAN_SHA1  $tgz" | sha1sum -c - >&2
mkdir -p node_modules/hogan.js
tar -xzf "$tgz" -C node_modules/hogan.js --strip-components=1
rm -f "$tgz"
template=node_modules/hogan.js/lib/template.js
grep -q '^  function coerceToString(val) {$' "$template"
sed -i '/^  function coerceToString(val) {$/a\
    if (typeof (val) === '"'"'object'"'"' \&\& val.toString === Object.prototype.toString)\
      return (JSON.stringify(val));' "$template"
# The change took: an object renders as JSON, an array as before.
got=$(NODE_PATH="$tmp/node_modules" node -e '
var h = require("hogan.js");
process.stdout.write(h.compile("{{{o}}} {{{a}}}").render({o: {k: [1]}, a: [1, 2]}));')
test "$got" = '{"k":[1]} 1,2'
cp "$here/render.js" .
touch .complete
trap - EXIT
# Another install may have finished first: keep one, drop the other.
mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
echo "$dir"

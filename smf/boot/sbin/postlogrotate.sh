#!/bin/bash
#
# postlogrotate.sh NAME: logadm runs it (its -a command, set by
# sdc_log_rotation_add in lib/util.sh) after it rotates log NAME into
# /var/log/sdc/upload/NAME_<zonename>_<date>T<H>:<M>:<S>.log. It folds
# that file into the hour's file, NAME_<zonename>_<date>T<H>:00:00.log,
# appending if the hour already has one (a restart or a reprovision may
# rotate more than once an hour): the data center's log archiver (hermes)
# takes only the hourly names. As sdc-scripts' sbin/postlogrotate.sh,
# which every other core zone runs; with SDC_LOG_ROLL_FORWARD=1 the file
# goes to the next hour's instead of this one's.

set -o errexit -o pipefail -o nounset
if [[ -n ${TRACE:-} ]]; then
	export PS4='[\D{%FT%TZ}] ${BASH_SOURCE}:${LINENO}: ${FUNCNAME[0]:+${FUNCNAME[0]}(): }'
	set -o xtrace
fi

fatal() {
	echo "$0: error: $*" >&2
	exit 1
}

# ZONE_ROOT: see lib/util.sh. Empty in the zone.
ZONE_ROOT=${ZONE_ROOT:-}
upload=$ZONE_ROOT/var/log/sdc/upload

name=${1:-}
[[ -n $name ]] || fatal 'usage: postlogrotate.sh NAME'

# The file logadm has just written: the newest of NAME's copies that is
# not an hour's file already (sdc-scripts takes the newest of all, which
# an hour's file appended to in the same clock tick can be). A copy
# rotated at the top of an hour already has its hour's name: nothing to do.
# shellcheck disable=SC2010,SC2012 # names are ours: NAME_<zonename>_<time>.log
last=$(ls -1t "$upload/${name}"_* 2>/dev/null | grep -v ':00:00\.log$' | head -1) || true
[[ -n $last ]] || exit 0

# .../NAME_<zonename>_2026-03-04T05:12:34.log: everything up to the hour.
stamp=${last##*_}          # 2026-03-04T05:12:34.log
prefix=${last%"$stamp"}    # .../NAME_<zonename>_
hour=${stamp%%:*}          # 2026-03-04T05
if [[ ${SDC_LOG_ROLL_FORWARD:-} == 1 ]]; then
	# GNU date (pkgsrc coreutils, in the origin image): the platform's
	# date cannot parse a time.
	date=$ZONE_ROOT/opt/local/bin/date
	hour=$("$date" -u -d "@$(($("$date" -u -d "${stamp%.log}" +%s) + 3600))" +%Y-%m-%dT%H) ||
		fatal "could not compute the hour after $stamp"
fi
target=$prefix$hour:00:00.log

cat "$last" >>"$target"
rm "$last"

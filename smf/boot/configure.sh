#!/bin/bash
#
# configure.sh: every boot of a cns zone after its first (the user-script
# runs /opt/smartdc/boot/configure.sh once setup.sh has finished). It
# re-applies what a reboot or a reprovision onto the same delegated
# dataset can undo: the dataset's mount point, user cns, and the db
# directory's owner and mode. The service starts after this (it depends
# on mdata:execute, which runs the user-script).

export PS4='[\D{%FT%TZ}] ${BASH_SOURCE}:${LINENO}: ${FUNCNAME[0]:+${FUNCNAME[0]}(): }'
set -o xtrace -o errexit -o pipefail -o nounset

# ZONE_ROOT: see lib/util.sh. Empty in the zone.
ZONE_ROOT=${ZONE_ROOT:-}
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
if [[ -n $ZONE_ROOT ]]; then
	PATH=$ZONE_ROOT/usr/sbin:$ZONE_ROOT/usr/bin:$PATH
fi

# shellcheck source=lib/util.sh
. "$ZONE_ROOT/opt/smartdc/boot/lib/util.sh"
# shellcheck source=lib/cns.sh
. "$ZONE_ROOT/opt/smartdc/boot/lib/cns.sh"

# Before the first setup has finished, setup.sh does all of this.
if [[ ! -f $ZONE_ROOT/var/svc/setup_complete ]]; then
	exit 0
fi
cns_mount_data
cns_user
cns_db_dir
exit 0

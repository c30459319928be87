#!/bin/bash
#
# configure.sh: every boot of a cns zone (the user-script runs
# /opt/smartdc/boot/configure.sh, a link to this file). Setup's steps that
# a reboot or a reprovision onto the same delegated dataset can undo: the
# dataset's mount point and the db directory's owner and mode. The SMF
# service starts after this (it depends on mdata:execute, which runs the
# user-script).

export PS4='[\D{%FT%TZ}] ${BASH_SOURCE}:${LINENO}: ${FUNCNAME[0]:+${FUNCNAME[0]}(): }'
set -o xtrace -o errexit -o pipefail -o nounset

export PATH=/usr/sbin:/usr/bin:/sbin:/bin

# shellcheck source=lib.sh
. /opt/triton/cns/boot/lib.sh

# Before setup has run (its first boot), setup.sh does all of this.
if [[ ! -f /var/svc/setup_complete ]]; then
	exit 0
fi
cns_mount_data
cns_user
cns_db_dir
exit 0

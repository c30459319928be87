#!/bin/bash
#
# setup.sh: the first boot of a cns zone. The zone's user-script runs
# /opt/smartdc/boot/setup.sh (a link to this file) once, until
# /var/svc/setup_complete exists, and configure.sh at every boot.
#
# The reference's boot/setup.sh, for one service instead of three (no
# redis, and cns-server and cns-updater are one process):
#   mount the delegated dataset at /data, create user (and group) cns,
#   point config-agent at the manifests in this image and render the
#   config, import and enable the SMF service, rotate its log.
# The sdc-scripts steps it ran through sdc_common_setup are in lib.sh.

export PS4='[\D{%FT%TZ}] ${BASH_SOURCE}:${LINENO}: ${FUNCNAME[0]:+${FUNCNAME[0]}(): }'
set -o xtrace -o errexit -o pipefail -o nounset

export PATH=/usr/sbin:/usr/bin:/sbin:/bin

# shellcheck source=lib.sh
. /opt/triton/cns/boot/lib.sh

cns_dcinfo
cns_mount_data
cns_user
cns_db_dir
cns_mdata_profile
# config.json exists before the service first starts.
cns_config_agent
cns_log_rotation
cns_service

# sdc_setup_complete
touch /var/svc/setup_complete
echo "setup done" >&2
exit 0

#!/bin/bash
#
# setup.sh: the first boot of a cns zone (and the first after each
# reprovision). The zone's user-script runs /opt/smartdc/boot/setup.sh
# until /var/svc/setup_complete exists, then configure.sh at every boot.
#
# The reference's boot/setup.sh, for one service instead of three (no
# redis; cns-server and cns-updater are one process): the delegated
# dataset at /data, the steps of every core zone (lib/util.sh:
# sdc_common_setup, with config-agent rendering config.json and
# registrar's config, registrar registering cns.<dc>.<dns_domain> in
# binder), user cns, the db directory, the service, its log rotation.

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

export CONFIG_AGENT_LOCAL_MANIFESTS_DIRS=$CNS_ROOT

cns_mount_data
sdc_common_setup
cns_user
cns_db_dir
cns_service

sdc_log_rotation_add amon-agent '/var/svc/log/*amon-agent*.log' 1g
sdc_log_rotation_add config-agent '/var/svc/log/*config-agent*.log' 1g
sdc_log_rotation_add registrar '/var/svc/log/*registrar*.log' 1g
sdc_log_rotation_add cns '/var/svc/log/*triton-application-cns*.log' 1g
sdc_log_rotation_setup_end

sdc_setup_complete
exit 0

# shellcheck shell=bash
# lib.sh: the zone set-up steps setup.sh and configure.sh share. Sourced,
# not run.
#
# Other Triton core zones get these steps from sdc-scripts' lib/util.sh
# (sdc_common_setup, sdc_log_rotation_add, sdc_setup_complete...), which
# their images copy into /opt/smartdc/boot/lib. The cns image does not
# carry sdc-scripts, so each function below does what the sdc-scripts
# function named in its comment does, for what a cns zone needs, and fails
# the same way: a message on stderr and exit 1. Like util.sh, every
# function works with or without errexit, nounset and pipefail.

# The paths are the zone's; the tests point them into a scratch directory
# and put stand-ins for the illumos commands first in PATH.
CNS_ROOT=${CNS_ROOT:-/opt/triton/cns}
CNS_DATA=${CNS_DATA:-/data}
CNS_DB_DIR=$CNS_DATA/cns
CNS_FMRI=svc:/triton/application/cns:default
CONFIG_AGENT=${CONFIG_AGENT:-/opt/smartdc/config-agent}

fatal() {
	printf '%s: ERROR: %s\n' "$(basename "$0")" "$*" >&2
	exit 1
}

# _sdc_mdata_get: a metadata value, which must be non-empty.
cns_mdata_get() {
	local value
	if ! value=$(mdata-get "$1"); then
		fatal "could not read \"$1\" from the metadata agent"
	fi
	[[ -n $value ]] || fatal "empty metadata value for \"$1\""
	printf '%s' "$value"
}

# The reference's setup.sh: the zone's delegated dataset
# (zones/<zonename>/data) is mounted at /data, so the db outlives a
# reprovision of the zone. A zone without one keeps /data on its root.
cns_mount_data() {
	local dataset mountpoint
	dataset=zones/$(zonename)/data
	mkdir -p "$CNS_DATA" || fatal "could not create $CNS_DATA"
	if zfs list "$dataset" >/dev/null 2>&1; then
		mountpoint=$(zfs get -H -o value mountpoint "$dataset")
		if [[ $mountpoint != "$CNS_DATA" ]]; then
			zfs set mountpoint="$CNS_DATA" "$dataset" ||
				fatal "could not mount $dataset at $CNS_DATA"
		fi
	fi
}

# The db directory: cns's alone (the db holds the zones and the API's
# view of every VM). The reference left /data and /data/redis mode 777.
cns_db_dir() {
	mkdir -p "$CNS_DB_DIR" || fatal "could not create $CNS_DB_DIR"
	chown cns:cns "$CNS_DB_DIR" || fatal "could not give $CNS_DB_DIR to cns"
	chmod 0700 "$CNS_DB_DIR" || fatal "could not set the mode of $CNS_DB_DIR"
}

# The reference's `useradd -d /opt/triton/cns -P 'Metadata Reader' cns`,
# with a group of its own (the SMF manifest runs cns as cns:cns) and no
# login shell. Idempotent: a reboot runs it again.
cns_user() {
	if ! getent group cns >/dev/null; then
		groupadd cns || fatal "could not create group cns"
	fi
	if ! getent passwd cns >/dev/null; then
		useradd -g cns -d "$CNS_ROOT" -s /usr/bin/false -P 'Metadata Reader' cns ||
			fatal "could not create user cns"
	fi
}

# _sdc_mdata_rbac_setup: the "Metadata Reader" profile lets user cns run
# mdata-get (cns reads sdc:nics for the API's admin addresses).
cns_mdata_profile() {
	mkdir -p /etc/security/prof_attr.d /etc/security/exec_attr.d ||
		fatal "could not create the rbac(5) shard directories"
	printf '%s\n' 'Metadata Reader:::Read access to zone metadata:' \
		>/etc/security/prof_attr.d/cns-mdata || fatal "could not write prof_attr.d/cns-mdata"
	printf '%s\n' 'Metadata Reader:solaris:cmd:::/usr/sbin/mdata-get:privs=file_dac_search' \
		'Metadata Reader:solaris:cmd:::/usr/sbin/mdata-list:privs=file_dac_search' \
		>/etc/security/exec_attr.d/cns-mdata || fatal "could not write exec_attr.d/cns-mdata"
	# svc:/system/rbac merges the shards into prof_attr and exec_attr when
	# it starts (sdc-scripts' _sdc_restart_smf_service).
	svcadm disable -s svc:/system/rbac:default || fatal "could not stop rbac(5)"
	svcadm enable -s svc:/system/rbac:default || fatal "could not start rbac(5)"
}

# setup_config_agent + write_initial_config: config-agent reads the
# manifests shipped in this image (sapi_manifests/cns under CNS_ROOT) as
# well as SAPI's, renders etc/config.json once now, synchronously, and
# then runs as a service that re-renders it (and runs the manifest's
# post_cmd: svcadm refresh) whenever the SAPI metadata changes.
cns_config_agent() {
	local node=$CONFIG_AGENT/build/node/bin/node
	local manifest=$CONFIG_AGENT/smf/manifests/config-agent.xml
	local sapi_url
	[[ -d $CONFIG_AGENT ]] || fatal "config-agent is not installed in $CONFIG_AGENT"
	sapi_url=$(cns_mdata_get sapi-url) || exit 1
	if ! sed -e "s#@@PREFIX@@#$CONFIG_AGENT#g" "$manifest" >"$manifest.new" ||
		! mv "$manifest.new" "$manifest"; then
		fatal "could not edit $manifest"
	fi
	mkdir -p "$CONFIG_AGENT/etc" || fatal "could not create $CONFIG_AGENT/etc"
	printf '{\n\t"logLevel": "info",\n\t"pollInterval": 60000,\n\t"sapi": {"url": "%s"},\n\t"localManifestDirs": ["%s"]\n}\n' \
		"$sapi_url" "$CNS_ROOT" >"$CONFIG_AGENT/etc/config.json" ||
		fatal "could not write config-agent's config"
	"$node" "$CONFIG_AGENT/agent.js" -s || fatal "config-agent could not render the configuration"
	svccfg import "$manifest" || fatal "could not import $manifest"
	svcadm enable svc:/smartdc/application/config-agent:default ||
		fatal "could not enable config-agent"
}

# sdc_log_rotation_add NAME PATTERN SIZE: hourly rotation, 168 copies,
# at most SIZE in all, named for upload as the other core zones' logs are.
cns_log_rotation_add() {
	logadm -w "$1" -C 168 -S "$3" -c -p 1h \
		-t "/var/log/sdc/upload/$1_\$nodename_%FT%H:%M:%S.log" "$2" ||
		fatal "could not add a logadm(1M) rule for $1"
}

# _sdc_log_rotation_setup, the sdc_log_rotation_add calls of the
# reference's setup.sh (its cns-server and cns-updater are one service
# here) and sdc_log_rotation_setup_end: logadm runs hourly from cron, and
# the catch-all smf_logs rule comes after the service's own rules.
cns_log_rotation() {
	local crontab
	mkdir -p /var/log/sdc/upload || fatal "could not create /var/log/sdc/upload"
	cns_log_rotation_add config-agent '/var/svc/log/*config-agent*.log' 1g
	cns_log_rotation_add cns '/var/svc/log/*triton-application-cns*.log' 1g
	logadm -r smf_logs >/dev/null 2>&1 || true
	logadm -w smf_logs -C 3 -c -s 1m '/var/svc/log/*.log' ||
		fatal "could not add the logadm(1M) rule for SMF logs"
	crontab=$( (crontab -l 2>/dev/null || true) | sed -e '/logadm/d')
	printf '%s\n0 * * * * /usr/sbin/logadm\n' "$crontab" | crontab ||
		fatal "could not install the root crontab"
	svcadm enable -s svc:/system/cron:default || fatal "could not enable cron"
}

# The service itself: the manifest in the image, imported and enabled.
cns_service() {
	svccfg import "$CNS_ROOT/smf/manifests/cns.xml" ||
		fatal "could not import $CNS_ROOT/smf/manifests/cns.xml"
	svcadm enable "$CNS_FMRI" || fatal "could not enable $CNS_FMRI"
}

# _sdc_create_dcinfo: the data center's name for the shell prompt.
cns_dcinfo() {
	local dc
	dc=$(cns_mdata_get sdc:datacenter_name) || exit 1
	printf 'SDC_DATACENTER_NAME="%s"\n' "$dc" >/.dcinfo || fatal "could not write /.dcinfo"
}

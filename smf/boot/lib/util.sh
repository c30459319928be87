# shellcheck shell=bash
#
# lib/util.sh: the set-up steps every Triton core zone runs, for the cns
# zone. Sourced by setup.sh and configure.sh, not run.
#
# Every other core zone's image carries sdc-scripts (joyent/sdc-scripts)
# at /opt/smartdc/boot, and its setup.sh runs sdc-scripts' lib/util.sh.
# The cns image carries this file instead: sdc-scripts is published to no
# package registry (only as a git repository), so a build that fetched it
# could not run where the release is built and tested. Each function below
# has the name, the order of steps and the effect of the sdc-scripts
# function of that name, so setup.sh reads as every core zone's does;
# where one differs, its comment says how and why. Like sdc-scripts, every
# function works under any of errexit, nounset and pipefail, and fails
# with a message on stderr and exit 1.
#
# ZONE_ROOT is the zone's root directory: empty in the zone. The tests
# run the scripts against a scratch tree, with stand-ins for the illumos
# commands first in PATH. Every file the steps touch or hand to a command
# is under it; what is written into logadm.conf, a crontab or a ZFS
# property is a path in the zone and is not.

ZONE_ROOT=${ZONE_ROOT:-}
BOOT_DIR=/opt/smartdc/boot
CONFIG_AGENT_DIR=/opt/smartdc/config-agent
REGISTRAR_DIR=/opt/smartdc/registrar

fatal() {
	printf '%s: ERROR: %s\n' "$(basename "$0")" "$*" >&2
	exit 1
}

warn() {
	printf '%s: WARNING: %s\n' "$(basename "$0")" "$*" >&2
}

# _sdc_mdata_get KEY: a metadata value, which must be non-empty. Run in a
# command substitution, its fatal only ends the subshell: callers check
# its status.
_sdc_mdata_get() {
	local key=${1:-} value
	[[ -n $key ]] || fatal "${FUNCNAME[0]} needs a metadata key"
	printf 'Loading metadata for key "%s".\n' "$key" >&2
	if ! value=$(mdata-get "$key"); then
		fatal "could not load \"$key\" from the metadata agent"
	fi
	[[ -n $value ]] || fatal "empty metadata value for key \"$key\""
	printf '%s' "$value"
}

_sdc_import_smf_manifest() {
	local manifest=${1:-}
	[[ -n $manifest ]] || fatal "${FUNCNAME[0]} needs a manifest"
	printf 'Importing smf(5) manifest "%s".\n' "$manifest" >&2
	svccfg import "$manifest" || fatal "could not import smf(5) manifest \"$manifest\""
}

# _sdc_wait_flag [wait]: svcadm's flag for "wait" (-s: until the service
# is online, or offline), none for nothing. Run in a command substitution.
_sdc_wait_flag() {
	case ${1:-} in
	wait) echo -s ;;
	'') ;;
	*) fatal "invalid wait flag: $1" ;;
	esac
}

# _sdc_enable_smf_service FMRI [wait]
_sdc_enable_smf_service() {
	local fmri=${1:-} flag
	[[ -n $fmri ]] || fatal "${FUNCNAME[0]} needs an FMRI"
	flag=$(_sdc_wait_flag "${2:-}") || exit 1
	printf 'Enabling smf(5) service "%s".\n' "$fmri" >&2
	svcadm enable ${flag:+"$flag"} "$fmri" || fatal "could not enable smf(5) service \"$fmri\""
}

# _sdc_restart_smf_service FMRI [wait]: disable, then enable.
_sdc_restart_smf_service() {
	local fmri=${1:-} flag
	[[ -n $fmri ]] || fatal "${FUNCNAME[0]} needs an FMRI"
	flag=$(_sdc_wait_flag "${2:-}") || exit 1
	printf 'Restarting smf(5) service "%s".\n' "$fmri" >&2
	svcadm disable ${flag:+"$flag"} "$fmri" || fatal "could not disable smf(5) service \"$fmri\" to restart it"
	svcadm enable ${flag:+"$flag"} "$fmri" || fatal "could not enable smf(5) service \"$fmri\" to restart it"
}

# The zone's role (sdcadm tags the cns zone smartdc_role=cns).
_sdc_load_variables() {
	ZONE_ROLE=$(_sdc_mdata_get sdc:tags.smartdc_role) || fatal 'could not get the zone role'
	export ZONE_ROLE
}

# /.dcinfo: the data center's name, for root's prompt.
_sdc_create_dcinfo() {
	local dc
	dc=$(_sdc_mdata_get sdc:datacenter_name) || fatal 'could not get the data center name'
	printf 'SDC_DATACENTER_NAME="%s"\n' "$dc" >"$ZONE_ROOT/.dcinfo" || fatal 'could not write /.dcinfo'
}

_sdc_install_bashrc() {
	local src=$ZONE_ROOT$BOOT_DIR/etc/root.bashrc
	[[ -f $src ]] || return 0
	rm -f "$ZONE_ROOT/root/.bashrc"
	cp "$src" "$ZONE_ROOT/root/.bashrc" || fatal 'could not install /root/.bashrc'
}

# amon-agent (in the image at /opt/amon-agent) installs itself once.
_sdc_setup_amon_agent() {
	[[ -f $ZONE_ROOT/var/svc/setup_complete ]] && return 0
	[[ -d $ZONE_ROOT/opt/amon-agent ]] || return 0
	(cd "$ZONE_ROOT/opt/amon-agent" && ./pkg/postinstall.sh) || fatal 'could not install amon-agent'
	rm -f "$ZONE_ROOT/var/svc/amon-agent.tgz"
}

# The directories rotated logs go to (the data center's log archiver
# takes them from /var/log/sdc/upload), and rsyslogd's log rotated with a
# SIGHUP to it.
_sdc_log_rotation_setup() {
	local dir
	for dir in /var/log/sdc /var/log/sdc/upload; do
		mkdir -p "$ZONE_ROOT$dir" || fatal "could not create log directory \"$dir\""
		chown root:sys "$ZONE_ROOT$dir" || fatal "could not set the owner of log directory \"$dir\""
	done
	logadm -r /var/adm/messages || fatal 'could not clear the logadm(1M) rule for /var/adm/messages'
	# shellcheck disable=SC2016 # logadm runs the command; the backquotes are for it
	logadm -w /var/adm/messages -C 4 -a 'kill -HUP `cat /var/run/rsyslogd.pid`' ||
		fatal 'could not add the logadm(1M) rule for /var/adm/messages'
}

# sdc_log_rotation_add NAME PATTERN [SIZE]: hourly rotation of one log
# into /var/log/sdc/upload, 168 copies (a week), at most SIZE in all.
# logadm names each copy NAME_<zonename>_<date>T<time>.log; postlogrotate.sh
# then folds it into the hour's NAME_<zonename>_<date>T<hour>:00:00.log,
# the names the log archiver (hermes) takes.
sdc_log_rotation_add() {
	local name=${1:-} pattern=${2:-} size=${3:-} flags=()
	[[ -n $name ]] || fatal "${FUNCNAME[0]} needs a name"
	[[ $name != *[_\ ]* ]] || fatal "${FUNCNAME[0]}: a name has no spaces or underscores: '$name'"
	[[ -z $size ]] || flags=(-S "$size")
	logadm -w "$name" "${flags[@]}" -C 168 -c -p 1h \
		-t "/var/log/sdc/upload/${name}_\$nodename_%FT%H:%M:%S.log" \
		-a "$BOOT_DIR/sbin/postlogrotate.sh $name" "$pattern" ||
		fatal "could not add the logadm(1M) rule for service log \"$name\""
}

# After the services' own rules: the catch-all rules last, so their short
# -C does not rotate the services' logs away first; logadm run hourly from
# root's crontab instead of the base image's daily entries.
sdc_log_rotation_setup_end() {
	local crontab
	logadm -r smf_logs || fatal 'could not clear the logadm(1M) rule for smf(5) logs'
	logadm -w smf_logs -C 3 -c -s 1m '/var/svc/log/*.log' ||
		fatal 'could not add the logadm(1M) rule for smf(5) logs'
	# Origin images rotate /var/log/*.log and /var/log/*.debug: keep the
	# first as a catch-all after the services' rules, drop the second.
	if grep -q '^/var/log/\*\.log' "$ZONE_ROOT/etc/logadm.conf"; then
		logadm -r '/var/log/*.log' || fatal 'could not clear the logadm(1M) rule for /var/log/*.log'
	fi
	logadm -w '/var/log/*.log' -C 2 -c -s 5m || fatal 'could not add the logadm(1M) rule for /var/log/*.log'
	if grep -q '^/var/log/\*\.debug' "$ZONE_ROOT/etc/logadm.conf"; then
		logadm -r '/var/log/*.debug' || fatal 'could not clear the logadm(1M) rule for /var/log/*.debug'
	fi

	crontab=$(crontab -l) || fatal 'could not read the root crontab'
	crontab=$(sed -e '/# Rotate system logs/d' -e '/ \/usr\/sbin\/logadm/d' <<<"$crontab") ||
		fatal 'could not remove the logadm(1M) entries from the root crontab'
	[[ $crontab != *logadm* ]] || fatal "not every logadm entry left the root crontab"
	printf '%s\n\n%s\n' "$crontab" '0 * * * * /usr/sbin/logadm -v >> /var/log/logadm.log 2>&1' | crontab ||
		fatal 'could not install the root crontab'
}

# _sdc_rbac_install_shard prof_attr|exec_attr SHARD: one rbac(5) shard
# from the image into /etc/security, merged by restarting svc:/system/rbac.
_sdc_rbac_install_shard() {
	local db=${1:-} shard=${2:-} dir
	[[ -n $db && -n $shard ]] || fatal "${FUNCNAME[0]} needs a database and a shard"
	case $db in
	exec_attr | prof_attr) dir=/etc/security/$db.d ;;
	*) fatal "unknown rbac(5) database: $db" ;;
	esac
	mkdir -p "$ZONE_ROOT$dir" || fatal "could not create \"$dir\""
	rm -f "$ZONE_ROOT$dir/$shard"
	cp "$ZONE_ROOT$BOOT_DIR$dir/$shard" "$ZONE_ROOT$dir/$shard" ||
		fatal "could not install rbac(5) shard \"$dir/$shard\""
	_sdc_restart_smf_service svc:/system/rbac:default wait
}

# The "Metadata Reader" profile (mdata-get with file_dac_search), which
# user cns has: cns runs mdata-get through pfexec for the zone's NICs.
# pfexecd and rbac are imported before they are enabled: the zone brand
# Triton's core zones use does not import them. sdc-scripts also carries
# copies of their manifests for platforms older than 2015 that lack them;
# the cns image needs a platform with triton-origin-x86_64-21.4.0 and
# does not.
_sdc_mdata_rbac_setup() {
	local manifests=$ZONE_ROOT/lib/svc/manifest/system
	_sdc_import_smf_manifest "$manifests/pfexecd.xml"
	_sdc_import_smf_manifest "$manifests/rbac.xml"
	_sdc_enable_smf_service svc:/system/pfexec:default wait
	_sdc_enable_smf_service svc:/system/rbac:default wait
	_sdc_rbac_install_shard prof_attr mdata
	_sdc_rbac_install_shard exec_attr mdata
}

# config-agent, pointed at SAPI and at the manifests shipped in the image
# (CONFIG_AGENT_LOCAL_MANIFESTS_DIRS, space-separated; config-agent reads
# each one's sapi_manifests/). sdc-scripts writes the same file with a
# small node program; this writes it from the shell.
setup_config_agent() {
	local manifest=$ZONE_ROOT$CONFIG_AGENT_DIR/smf/manifests/config-agent.xml
	local sapi_url dir dirs=''
	if [[ ! -d $ZONE_ROOT$CONFIG_AGENT_DIR ]]; then
		warn "config-agent is not installed in $CONFIG_AGENT_DIR: nothing renders the configuration"
		return 0
	fi
	printf 'Setting up config-agent.\n' >&2
	sapi_url=$(_sdc_mdata_get sapi-url) || fatal 'could not get the SAPI URL'
	rm -f "$manifest.new"
	sed -e "s#@@PREFIX@@#$CONFIG_AGENT_DIR#g" "$manifest" >"$manifest.new" ||
		fatal "could not substitute @@PREFIX@@ in \"$manifest\""
	mv "$manifest.new" "$manifest" || fatal "could not move \"$manifest.new\" into place"
	mkdir -p "$ZONE_ROOT$CONFIG_AGENT_DIR/etc" || fatal "could not create $CONFIG_AGENT_DIR/etc"
	for dir in ${CONFIG_AGENT_LOCAL_MANIFESTS_DIRS:-}; do
		dirs+=${dirs:+, }\"$dir\"
	done
	printf '{\n    "logLevel": "info",\n    "pollInterval": 120000,\n    "sapi": {\n        "url": "%s"\n    },\n    "localManifestDirs": [%s]\n}\n' \
		"$sapi_url" "$dirs" >"$ZONE_ROOT$CONFIG_AGENT_DIR/etc/config.json" ||
		fatal "could not write $CONFIG_AGENT_DIR/etc/config.json"
}

# config-agent renders every manifest once, now (cns's config.json and
# registrar's), then runs as a service that renders them again whenever
# SAPI's metadata changes.
write_initial_config() {
	[[ -d $ZONE_ROOT$CONFIG_AGENT_DIR ]] || return 0
	printf 'Writing the initial configuration files.\n' >&2
	"$ZONE_ROOT$CONFIG_AGENT_DIR/build/node/bin/node" "$ZONE_ROOT$CONFIG_AGENT_DIR/agent.js" -s ||
		fatal 'config-agent could not render the configuration files'
	_sdc_import_smf_manifest "$ZONE_ROOT$CONFIG_AGENT_DIR/smf/manifests/config-agent.xml"
	_sdc_enable_smf_service svc:/smartdc/application/config-agent:default
}

# registrar (in the image) registers the zone's admin address in binder
# under the name its config.json gives, which config-agent has just
# rendered: for cns, cns.<datacenter>.<dns_domain>. Not waited for: it
# depends on mdata:execute, which is running this script.
registrar_setup() {
	local manifest=$REGISTRAR_DIR/smf/manifests/registrar.xml
	[[ -d $ZONE_ROOT$REGISTRAR_DIR && -f $ZONE_ROOT$manifest ]] || return 0
	[[ -f $ZONE_ROOT$REGISTRAR_DIR/etc/config.json ]] || fatal "no registrar config for ${ZONE_ROLE:-this zone}"
	_sdc_import_smf_manifest "$ZONE_ROOT$manifest"
	_sdc_enable_smf_service svc:/manta/application/registrar:default
}

# cron, imported before it is enabled (the zone brand does not import
# it), so that logadm runs hourly.
_sdc_enable_cron() {
	_sdc_import_smf_manifest "$ZONE_ROOT/lib/svc/manifest/system/cron.xml"
	_sdc_enable_smf_service svc:/system/cron:default wait
}

# sdc_common_setup: what every core zone's setup.sh runs first. The
# config-agent and registrar steps run once, at the first boot of the
# zone's root (a reprovision is a first boot again). sdc-scripts also
# runs download_metadata there, which saves the SAPI metadata to
# /var/tmp/metadata.json for setup scripts that read it; cns's reads
# none, and config-agent fetches the metadata itself.
sdc_common_setup() {
	_sdc_load_variables
	printf 'Performing setup of "%s" zone...\n' "$ZONE_ROLE" >&2
	_sdc_create_dcinfo
	_sdc_install_bashrc
	_sdc_setup_amon_agent
	_sdc_log_rotation_setup
	_sdc_mdata_rbac_setup
	if [[ -f $ZONE_ROOT/var/svc/setup_complete ]]; then
		echo 'Skip config-agent/registrar setup: zone already set up' >&2
	else
		echo 'Set up config-agent/registrar' >&2
		setup_config_agent
		write_initial_config
		registrar_setup
	fi
	_sdc_enable_cron
}

# The last step of setup.sh: the user-script runs configure.sh instead
# from now on. The user-script logs this script to /var/svc/setup.log;
# the copy a moment later holds its end too.
sdc_setup_complete() {
	touch "$ZONE_ROOT/var/svc/setup_complete" || fatal 'could not create /var/svc/setup_complete'
	echo 'setup done' >&2
	(sleep 5 && cp "$ZONE_ROOT/var/svc/setup.log" "$ZONE_ROOT/var/svc/setup_init.log") >/dev/null 2>&1 &
}

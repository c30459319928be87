# shellcheck shell=bash
#
# lib/cns.sh: the cns zone's own set-up steps, shared by setup.sh (first
# boot) and configure.sh (every boot). Sourced after lib/util.sh, whose
# fatal and ZONE_ROOT it uses.

CNS_ROOT=/opt/triton/cns
CNS_DATA=/data
CNS_DB_DIR=$CNS_DATA/cns
CNS_FMRI=svc:/triton/application/cns:default

# The zone's delegated dataset (zones/<zonename>/data) mounted at /data,
# so the db outlives a reprovision of the zone, as in the reference. A
# zone without one keeps /data on its root.
cns_mount_data() {
	local dataset mountpoint
	dataset=zones/$(zonename)/data || fatal 'could not get the zone name'
	mkdir -p "$ZONE_ROOT$CNS_DATA" || fatal "could not create $CNS_DATA"
	if zfs list "$dataset" >/dev/null 2>&1; then
		mountpoint=$(zfs get -H -o value mountpoint "$dataset") ||
			fatal "could not read the mount point of $dataset"
		if [[ $mountpoint != "$CNS_DATA" ]]; then
			zfs set mountpoint="$CNS_DATA" "$dataset" ||
				fatal "could not mount $dataset at $CNS_DATA"
		fi
	fi
}

# User cns, as the reference creates it (`useradd -d /opt/triton/cns -P
# 'Metadata Reader' cns`: the profile lets it run mdata-get through
# pfexec), with a group of its own (the SMF method runs as cns:cns) and no
# login shell. A reprovision may give it another uid than the one that
# owns the db: cns_db_dir gives the db back.
cns_user() {
	if ! getent group cns >/dev/null; then
		groupadd cns || fatal 'could not create group cns'
	fi
	if ! getent passwd cns >/dev/null; then
		useradd -g cns -d "$CNS_ROOT" -s /usr/bin/false -P 'Metadata Reader' cns ||
			fatal 'could not create user cns'
	fi
}

# The db directory and everything in it belong to cns: the db file, its
# backups and the lock. The directory is cns's alone (0700); the
# reference left /data and /data/redis mode 777.
cns_db_dir() {
	mkdir -p "$ZONE_ROOT$CNS_DB_DIR" || fatal "could not create $CNS_DB_DIR"
	chown -R cns:cns "$ZONE_ROOT$CNS_DB_DIR" || fatal "could not give $CNS_DB_DIR to cns"
	chmod 0700 "$ZONE_ROOT$CNS_DB_DIR" || fatal "could not set the mode of $CNS_DB_DIR"
}

# The service, from the manifest in the image.
cns_service() {
	_sdc_import_smf_manifest "$ZONE_ROOT$CNS_ROOT/smf/manifests/cns.xml"
	_sdc_enable_smf_service "$CNS_FMRI"
}

package smf

// Exit statuses of an SMF method (smf_method(7)), which cns serve exits
// with so that svcadm shows the right state; the systemd unit treats them
// alike (Restart=on-failure, RestartPreventExitStatus=96).
const (
	// ExitError is any failure SMF answers with a restart.
	ExitError = 1
	// ExitConfig is SMF_EXIT_ERR_CONFIG: the configuration is wrong;
	// SMF puts the service in maintenance instead of restarting it.
	ExitConfig = 96
)

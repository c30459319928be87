package feeds

// SetMaxVMsPerCommit makes chunks of n VMs until the returned func runs.
func SetMaxVMsPerCommit(n int) (restore func()) {
	old := maxVMsPerCommit
	maxVMsPerCommit = n
	return func() { maxVMsPerCommit = old }
}

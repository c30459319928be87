package feeds

// SetMaxVMsPerCommit makes chunks of n VMs until the returned func runs.
func SetMaxVMsPerCommit(n int) (restore func()) {
	old := maxVMsPerCommit
	maxVMsPerCommit = n
	return func() { maxVMsPerCommit = old }
}

// SetMaxUnchangedPerSlice makes a reconcile's slices of n VMs until the
// returned func runs.
func SetMaxUnchangedPerSlice(n int) (restore func()) {
	old := maxUnchangedPerSlice
	maxUnchangedPerSlice = n
	return func() { maxUnchangedPerSlice = old }
}

// SetBetweenSlices runs f between two slices of a reconcile until the
// returned func runs.
func SetBetweenSlices(f func()) (restore func()) {
	old := betweenSlices
	betweenSlices = f
	return func() { betweenSlices = old }
}

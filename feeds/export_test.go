package feeds

// SetMaxVMsPerCommit makes chunks of n VMs until the returned func runs.
func SetMaxVMsPerCommit(n int) (restore func()) {
	old := maxVMsPerCommit
	maxVMsPerCommit = n
	return func() { maxVMsPerCommit = old }
}

// SetMaxVMsPerSlice makes slices of n VMs until the returned func runs.
func SetMaxVMsPerSlice(n int) (restore func()) {
	old := maxVMsPerSlice
	maxVMsPerSlice = n
	return func() { maxVMsPerSlice = old }
}

// SetBetweenSlices runs f between two slices of a batch until the
// returned func runs.
func SetBetweenSlices(f func()) (restore func()) {
	old := betweenSlices
	betweenSlices = f
	return func() { betweenSlices = old }
}

// SetBetweenListingSlices runs f between two slices of a listing until
// the returned func runs.
func SetBetweenListingSlices(f func()) (restore func()) {
	old := betweenListingSlices
	betweenListingSlices = f
	return func() { betweenListingSlices = old }
}

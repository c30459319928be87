package feeds

// SetSizes makes u commit a backlog in chunks of chunk VMs and compute
// slices of slice VMs (0 keeps the size as it is).
func (u *Updater) SetSizes(chunk, slice int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if chunk > 0 {
		u.sched.chunk = chunk
	}
	if slice > 0 {
		u.sched.slice = slice
	}
}

// SetBetweenSlices makes u run f between two slices of a batch; it is
// set before u runs.
func (u *Updater) SetBetweenSlices(f func()) { u.sched.hooks.betweenSlices = f }

// SetBetweenListingSlices makes u run f between two slices of a listing;
// it is set before the listing is put.
func (u *Updater) SetBetweenListingSlices(f func()) { u.sched.hooks.betweenListingSlices = f }

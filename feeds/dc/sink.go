package dc

// Sink is what a feed reports what it learns about the data center to;
// *feeds.Updater is the one cns runs. Both feeds (the inventory file and
// the SDC APIs) take a Sink, so they report the same way and neither
// imports the updater. SetInventory is a complete description (VMs
// missing from it are gone); the others are incremental. ReportFeed gives
// a feed's health under its name (nil: healthy).
//
// A listing takes time, and changes keep coming meanwhile: a feed calls
// BeginListing before it lists anything, hands the Listing it returns the
// VMs as it reads them, and then hands it to SetInventory with the rest
// of the inventory (Inventory.Listing). The sink then keeps what a change
// after BeginListing says of a VM over the listing's older copy (by the
// VMs' last_modified), and a VM a change removed stays removed: a page
// listed before a change never undoes it. A listing that failed is
// dropped: only SetInventory applies one.
type Sink interface {
	BeginListing() Listing
	SetInventory(inv *Inventory, cause string)
	SetVM(vm *VM, cause string)
	RemoveVM(uuid, cause string)
	SetUser(u User, cause string)
	SetServers(servers []Server, cause string)
	SetNetworks(nets []Network, pools []NetworkPool, cause string)
	ReportFeed(name string, err error)
}

// Listing is a complete listing of the VMs in the making (Sink.BeginListing).
// Add takes the VMs as the feed reads them, a page or a batch at a time,
// and keeps what the sink needs of each, not the VM: a listing of a
// million VMs is not held decoded (~2.8 KB a VM). Add does not keep vms.
type Listing interface {
	Add(vms []VM)
}

// VMList is a Listing that keeps the VMs whole: for an inventory read
// into memory, and sinks that hold every VM anyway.
type VMList []VM

// Add appends vms.
func (l *VMList) Add(vms []VM) { *l = append(*l, vms...) }

package dc

// Sink is what a feed reports what it learns about the data center to;
// *feeds.Updater is the one cns runs. Both feeds (the inventory file and
// the SDC APIs) take a Sink, so they report the same way and neither
// imports the updater. SetInventory is a complete description (VMs
// missing from it are gone); the others are incremental. ReportFeed gives
// a feed's health under its name (nil: healthy).
//
// A listing takes time, and changes keep coming meanwhile: a feed calls
// BeginListing before it lists anything and hands what it returns in the
// inventory (Inventory.Since). The sink then keeps what a change after
// that point says of a VM over the listing's older copy (by the VMs'
// last_modified), and a VM a change removed stays removed: a page listed
// before a change never undoes it.
type Sink interface {
	BeginListing() uint64
	SetInventory(inv *Inventory, cause string)
	SetVM(vm *VM, cause string)
	RemoveVM(uuid, cause string)
	SetUser(u User, cause string)
	SetServers(servers []Server, cause string)
	SetNetworks(nets []Network, pools []NetworkPool, cause string)
	ReportFeed(name string, err error)
}

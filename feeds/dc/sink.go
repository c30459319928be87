package dc

// Sink is what a feed reports what it learns about the data center to;
// *feeds.Updater is the one cns runs. Both feeds (the inventory file and
// the SDC APIs) take a Sink, so they report the same way and neither
// imports the updater. SetInventory is a complete description (VMs
// missing from it are gone); the others are incremental. ReportFeed gives
// a feed's health under its name (nil: healthy).
type Sink interface {
	SetInventory(inv *Inventory, cause string)
	SetVM(vm *VM, cause string)
	RemoveVM(uuid, cause string)
	SetUser(u User, cause string)
	SetServers(servers []Server, cause string)
	SetNetworks(nets []Network, pools []NetworkPool, cause string)
	ReportFeed(name string, err error)
}

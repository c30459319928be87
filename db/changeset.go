package db

import "github.com/miekg/dns"

// What a commit takes (a change set) and what it gives the serving side
// (Committed); commit.go applies one to the other.

// ChangeSet is one batch of changes from the updater, applied atomically.
type ChangeSet struct {
	// Zones, when set, replaces the stored zone configuration: zones that
	// left it are removed, apex changes (NS, SOA fields) get a new serial.
	Zones *ZoneConfig
	// VMs are the VMs whose records or facts changed.
	VMs []VMChange
	// Cause is a short human summary ("file feed: 3 VMs changed") stored in
	// the journal of every zone the change set touches.
	Cause string
	// Hysteresis replaces the self-removal hysteresis state of the
	// services it names (opaque, owned by feeds; nil deletes), in the
	// same transaction as the records its decisions produced.
	Hysteresis map[string][]byte
	// Guard, when not nil, replaces the updater's removal guard state
	// (opaque, owned by feeds), in the same transaction as the records
	// whose removals it held or let through.
	Guard []byte
	// Sources change the aggregator's stored copies of the zones it
	// follows, in the same transaction as the region records they
	// produced (see SourceUpdate).
	Sources []SourceUpdate
	// SerialFloors moves each named zone's serial above the given serial
	// (RFC 1982) when it is not already: a secondary holds that serial, so
	// a lower one would be ignored. Such a zone gets a new version even
	// without record changes (an empty journal entry).
	SerialFloors map[string]uint32
	// Stop, when closed, makes Commit give up before the transaction is
	// written (ErrStopped): nothing of the change set is stored. A
	// shutdown closes it rather than wait for a first load's chunk, which
	// the next start computes again.
	Stop <-chan struct{}
}

// VMChange replaces everything one VM contributes.
type VMChange struct {
	UUID string
	// Delete forgets the VM: its records and facts go.
	Delete bool
	// Meta is the updater's opaque description of the VM (facts, listing
	// reasons), returned by VM.
	Meta []byte
	// Records are all the records the VM contributes now.
	Records []Record
	// Client is how the VM is recognised when it queries cns (nil or no
	// addresses: it is not).
	Client *Client
	// Hash, when not zero, is kept with the VM (see VMHashes): the
	// updater's digest of what it computed, to skip unchanged VMs.
	Hash uint64
	// entry is the VM's stored entry encoded ahead (PrepareRecords) for
	// when every record's zone is configured, or nil. Meta is then nil:
	// the entry holds it.
	entry []byte
	// prepared holds Records, which is then nil, when PrepareRecords
	// found every one storable.
	prepared *preparedRecords
}

// Record is one record a VM contributes to a zone.
type Record struct {
	Zone string // lower case, no trailing dot
	RR   dns.RR
	// Pref orders competing singleton records (PTR, CNAME) at one name:
	// the lowest wins, then the shortest, then the lexically smallest.
	// It is below 128; a record with a higher one is skipped.
	Pref uint8
	// Stamp, when not zero, makes the record's type a singleton at its
	// name too: of the VMs' candidates the one with the lowest Pref, then
	// the highest Stamp, then as above is served, and a commit that
	// touches the name reports when the candidates differ. Feeds stamp
	// with a time (Unix milliseconds) so that the newest wins.
	Stamp uint64
	wire  *recordWire // the record encoded ahead (PrepareRecords), or nil
}

// Committed is what one commit changed, for the serving side.
type Committed struct {
	Zones []ZoneUpdate
	// Problems are records or zones the commit skipped or cut, each a
	// sentence for the log.
	Problems []string
	// Clients are the VMs whose Client changed.
	Clients []ClientUpdate
}

// ZoneUpdate is one zone's new version.
type ZoneUpdate struct {
	Zone    string // lower case, no trailing dot
	Wire    []byte // zone name in wire format
	Serial  uint32
	Removed bool // the zone is gone; the other fields are empty
	Apex    Apex
	// Names are the owner names whose records changed, with the records
	// they now have (empty: the name is gone).
	Names []NameUpdate
	// Entry is the journal entry of this version (nil for a new zone).
	Entry *JournalEntry
}

// NameUpdate is the new published state of one owner name.
type NameUpdate struct {
	Owner []byte // absolute wire name, lower case
	RRs   RRs
}

package db

// recordWire is a Record in the store's encoding, computed before the
// commit by PrepareRecords. groupRecords checks it in the order it checks
// a record it encodes itself, so the problems reported are the same.
type recordWire struct {
	owner    []byte // absolute wire name, lower case
	ownerErr error
	key      []byte // relative to the record's zone
	below    bool   // owner is below the zone (key is set)
	rr       []byte
	rrErr    error
}

// PrepareRecords encodes vc's records the way Commit stores them. Commit
// encodes the records that are not prepared itself; preparing them on the
// goroutine that computed them takes that work out of the write
// transaction, which one goroutine at a time runs.
func PrepareRecords(vc *VMChange) {
	var zone string
	var zoneWire []byte
	var zoneErr error
	var buf []byte
	for i := range vc.Records {
		r := &vc.Records[i]
		if i == 0 || r.Zone != zone {
			zone = r.Zone
			zoneWire, zoneErr = ZoneWire(zone)
		}
		if zoneErr != nil || r.RR == nil {
			continue // the commit finds out for itself
		}
		w := &recordWire{}
		if w.owner, w.ownerErr = wireName(r.RR.Header().Name); w.ownerErr == nil {
			w.key, w.below = relativeKey(w.owner, zoneWire)
		}
		w.rr, buf, w.rrErr = encodeRR(r.RR, buf)
		r.wire = w
	}
}

package db

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// JournalEntry is one version step of a zone: the records deleted and
// added to go from serial From to serial To, which is what an IXFR sends.
type JournalEntry struct {
	From, To uint32
	Time     time.Time
	// Cause says why the change happened (the change set's cause).
	Cause string
	// SOAFrom and SOATo are the zone's SOA records (owner-less encoding)
	// at From and To.
	SOAFrom, SOATo []byte
	Deleted, Added []JournalRR
}

// JournalRR is one record of a journal entry.
type JournalRR struct {
	Owner []byte // absolute wire name, lower case
	RR    []byte // owner-less record encoding, see RRs
}

// JournalLimits bound a zone's journal. Entries are dropped oldest first
// until every limit holds; an IXFR from a dropped serial falls back to AXFR.
type JournalLimits struct {
	MaxEntries int           // 0: no limit
	MaxBytes   int64         // 0: no limit
	MaxAge     time.Duration // 0: no limit
}

// DefaultJournalLimits keep about a day of steady churn, and never more
// than a few MiB per zone.
var DefaultJournalLimits = JournalLimits{MaxEntries: 2000, MaxBytes: 16 << 20, MaxAge: 7 * 24 * time.Hour}

func (j *JournalEntry) encode(zone []byte) []byte {
	size := 31 + len(j.Cause) + len(j.SOAFrom) + len(j.SOATo)
	for _, list := range [][]JournalRR{j.Deleted, j.Added} {
		for _, r := range list {
			size += 4 + len(r.Owner) - len(zone) + len(r.RR)
		}
	}
	e := &enc{b: make([]byte, 0, size)} // an initial load's entries are megabytes
	e.u8(1)
	e.u32(j.From)
	e.u32(j.To)
	e.i64(j.Time.UnixNano())
	e.str(j.Cause)
	e.bytes16(j.SOAFrom)
	e.bytes16(j.SOATo)
	for _, list := range [][]JournalRR{j.Deleted, j.Added} {
		e.u32(uint32(len(list)))
		for _, r := range list {
			e.bytes16(relativeWire(r.Owner, zone))
			e.bytes16(r.RR)
		}
	}
	return e.b
}

func decodeJournalEntry(b, zone []byte) (JournalEntry, error) {
	d := &dec{b: b}
	d.version(1, "journal entry")
	j := JournalEntry{
		From:    d.u32(),
		To:      d.u32(),
		Time:    time.Unix(0, d.i64()).UTC(),
		Cause:   d.str(),
		SOAFrom: d.bytes16(),
		SOATo:   d.bytes16(),
	}
	for _, list := range []*[]JournalRR{&j.Deleted, &j.Added} {
		n := int(d.u32())
		for i := 0; i < n && d.err == nil; i++ {
			rel := d.bytes16()
			rr := d.bytes16()
			owner := make([]byte, 0, len(rel)+len(zone))
			owner = append(append(owner, rel...), zone...)
			*list = append(*list, JournalRR{Owner: owner, RR: rr})
		}
	}
	return j, d.done("journal entry")
}

// journalHeader decodes only From, To and Time of an encoded entry.
func journalHeader(b []byte) (from, to uint32, t time.Time, ok bool) {
	d := &dec{b: b}
	d.version(1, "journal entry")
	from, to = d.u32(), d.u32()
	t = time.Unix(0, d.i64())
	return from, to, t, d.err == nil
}

// trimJournal drops the oldest entries of one zone's journal until the
// limits hold, updating the meta counters.
func trimJournal(jb *bolt.Bucket, m *zoneMeta, lim JournalLimits, now time.Time) error {
	c := jb.Cursor()
	for k, v := c.First(); k != nil; k, v = c.First() {
		over := (lim.MaxEntries > 0 && int(m.JEntries) > lim.MaxEntries) ||
			(lim.MaxBytes > 0 && int64(m.JBytes) > lim.MaxBytes)
		if !over && lim.MaxAge > 0 {
			if _, _, t, ok := journalHeader(v); ok && now.Sub(t) > lim.MaxAge {
				over = true
			}
		}
		if !over {
			return nil
		}
		m.JEntries--
		m.JBytes -= uint64(len(v))
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

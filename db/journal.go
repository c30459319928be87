package db

import (
	"bytes"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tritondatacenter/cns/db/field"
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
// Entries are also dropped, oldest first, once an IXFR from their serial
// would be bigger than the zone (trimUnusable): it is answered with the
// whole zone anyway.
type JournalLimits struct {
	MaxEntries int           // 0: no limit
	MaxBytes   int64         // 0: no limit
	MaxAge     time.Duration // 0: no limit
}

// DefaultJournalLimits keep about a day of steady churn, and never more
// than a few MiB per zone.
var DefaultJournalLimits = JournalLimits{MaxEntries: 2000, MaxBytes: 16 << 20, MaxAge: 7 * 24 * time.Hour}

// Journal entry encodings. Version 1 wrote each record's owner in full
// with 16-bit lengths. Version 2 (what encode writes) writes each owner
// as the number of trailing bytes it shares with the previous record's
// owner and the bytes before them: a name's records follow each other,
// and names in one zone share their endings (".inst.<owner uuid>"), so an
// initial load's entries take about half the bytes. Lengths and counts
// are uvarints. Both read; the header (version, From, To, Time) is the
// same in both.
const (
	journalV1 = 1
	journalV2 = 2
)

func (j *JournalEntry) encode(zone []byte) []byte {
	// An upper bound of the version 2 size (an initial load's entries are
	// megabytes: grown by append they would be copied a dozen times).
	size := 31 + len(j.Cause) + len(j.SOAFrom) + len(j.SOATo)
	for _, list := range [][]JournalRR{j.Deleted, j.Added} {
		for _, r := range list {
			size += 4 + len(r.Owner) - len(zone) + len(r.RR)
		}
	}
	e := &enc{B: make([]byte, 0, size)}
	e.U8(journalV2)
	e.U32(j.From)
	e.U32(j.To)
	e.I64(j.Time.UnixNano())
	e.Str16(j.Cause)
	e.Bytes16(j.SOAFrom)
	e.Bytes16(j.SOATo)
	for _, list := range [][]JournalRR{j.Deleted, j.Added} {
		e.Uvarint(uint64(len(list)))
		var prev []byte
		for _, r := range list {
			rel := relativeWire(r.Owner, zone)
			shared := sharedSuffix(prev, rel)
			e.Uvarint(uint64(shared))
			e.Uvarint(uint64(len(rel) - shared))
			e.B = append(e.B, rel[:len(rel)-shared]...)
			e.Uvarint(uint64(len(r.RR)))
			e.B = append(e.B, r.RR...)
			prev = rel
		}
	}
	return e.B
}

// sharedSuffix is the length of the longest common suffix of a and b.
func sharedSuffix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return n
}

// decodeJournalEntry reads an entry. The entry owns its bytes: its
// records' RR bytes are slices of one copy of b, since b is usually a
// bbolt value, which lives in the mapped file only for its transaction
// (a remap or Close unmaps it) while callers keep the entries.
func decodeJournalEntry(b, zone []byte) (JournalEntry, error) {
	d := &dec{B: bytes.Clone(b)}
	version := d.U8()
	if d.Err == nil && version != journalV1 && version != journalV2 {
		return JournalEntry{}, fmt.Errorf("journal entry: unknown encoding version %d", version)
	}
	j := JournalEntry{
		From:    d.U32(),
		To:      d.U32(),
		Time:    time.Unix(0, d.I64()).UTC(),
		Cause:   d.Str16(),
		SOAFrom: d.Bytes16(),
		SOATo:   d.Bytes16(),
	}
	for _, list := range []*[]JournalRR{&j.Deleted, &j.Added} {
		if version == journalV1 {
			n := int(d.U32())
			for i := 0; i < n && d.Err == nil; i++ {
				rel := d.Bytes16()
				rr := d.Bytes16()
				owner := make([]byte, 0, len(rel)+len(zone))
				owner = append(append(owner, rel...), zone...)
				*list = append(*list, JournalRR{Owner: owner, RR: rr})
			}
			continue
		}
		n := d.Uvarint()
		if n > uint64(len(d.B)) { // a record takes at least one byte
			d.Err = field.ErrShort
		}
		var prev []byte
		for i := uint64(0); i < n && d.Err == nil; i++ {
			shared := d.Uvarint()
			prefix := d.Take(d.Uvarint())
			rr := d.Take(d.Uvarint())
			if d.Err != nil {
				break
			}
			if shared > uint64(len(prev)) || (len(prefix) > 0 && shared < uint64(len(prev)) && prefix[len(prefix)-1] == prev[len(prev)-int(shared)-1]) {
				d.Err = fmt.Errorf("owner %d shares %d bytes of the previous one's %d, not the most", i, shared, len(prev))
				break
			}
			owner := make([]byte, 0, len(prefix)+int(shared)+len(zone))
			owner = append(append(append(owner, prefix...), prev[len(prev)-int(shared):]...), zone...)
			prev = owner[:len(owner)-len(zone)]
			*list = append(*list, JournalRR{Owner: owner, RR: rr})
		}
	}
	return j, d.Done("journal entry")
}

// journalHeader decodes only From, To and Time of an encoded entry.
func journalHeader(b []byte) (from, to uint32, t time.Time, ok bool) {
	d := &dec{B: b}
	if v := d.U8(); v != journalV1 && v != journalV2 {
		return 0, 0, time.Time{}, false
	}
	from, to = d.U32(), d.U32()
	t = time.Unix(0, d.I64())
	return from, to, t, d.Err == nil
}

// IXFRWorthIt reports whether an IXFR of records records (every journal
// entry it spans counting its deletions, its additions and its two SOAs)
// is worth sending to a secondary of a zone of names owner names, rather
// than the whole zone (which is also a valid IXFR answer, RFC 1995 §4).
// serve asks it before answering from the journal; the journal drops the
// entries it would never pass (trimUnusable).
func IXFRWorthIt(records, names int) bool { return records < 64 || records < names }

// ixfrRecords is what one entry counts toward IXFRWorthIt.
func (j *JournalEntry) ixfrRecords() int { return len(j.Deleted) + len(j.Added) + 2 }

// journalRecords reads what an encoded entry counts toward IXFRWorthIt
// without decoding its records.
func journalRecords(b []byte) (int, bool) {
	d := &dec{B: b}
	version := d.U8()
	d.Take(4 + 4 + 8)
	d.Str16()
	d.Bytes16()
	d.Bytes16()
	n := 2
	for range 2 {
		switch version {
		case journalV1:
			c := int(d.U32())
			n += c
			for i := 0; i < c && d.Err == nil; i++ {
				d.Bytes16()
				d.Bytes16()
			}
		case journalV2:
			c := int(min(d.Uvarint(), uint64(len(d.B))))
			n += c
			for i := 0; i < c && d.Err == nil; i++ {
				d.Uvarint()
				d.Take(d.Uvarint())
				d.Take(d.Uvarint())
			}
		default:
			return 0, false
		}
	}
	return n, d.Err == nil
}

// trimUnusable drops the journal entries no IXFR will use: an IXFR from an
// entry's serial spans it and every newer entry, and once that is not
// IXFRWorthIt it never will be again (the span only grows, and the zone
// gains at most one name per record added), so the secondary gets the
// whole zone whatever the journal holds. This is what keeps an initial
// load's batches, each a good part of the zone, from filling the journal.
// newest is the count of the entry just written; the entries are looked
// at only when it is large (64 records and 1/64 of the zone), so a commit
// of steady churn costs nothing and leaves the journal to JournalLimits.
func trimUnusable(jb *bolt.Bucket, m *zoneMeta, newest int) error {
	names := int(m.Names)
	if newest < 64 || newest < names/64 {
		return nil
	}
	c := jb.Cursor()
	var cut []byte // the newest entry to drop, with all older ones
	span := 0
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		n, ok := journalRecords(v)
		if !ok {
			return nil // a damaged entry: leave it to cns db check
		}
		if span += n; !IXFRWorthIt(span, names) {
			cut = k
			break
		}
	}
	if cut == nil {
		return nil
	}
	for k, v := c.First(); k != nil && bytes.Compare(k, cut) <= 0; k, v = c.First() {
		m.JEntries--
		m.JBytes -= uint64(len(v))
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
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

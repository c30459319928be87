package serve

import (
	"errors"
	"fmt"
	"sync"

	"github.com/tritondatacenter/cns/db"
)

// coldChunk is about how many bytes of names and records a transfer of a
// cold zone reads from the store in one read transaction (a variable for
// the tests). Each chunk seeks its cursor again and hands its mapped pages
// back (ScanZoneChunk): at a million VMs, 4 MiB chunks took 15-20 % less
// CPU than 256 KiB ones; the read transaction lasts a few ms.
var coldChunk = 4 << 20

// errZoneChanged ends a transfer from the store that a commit overtook.
var errZoneChanged = errors.New("zone changed during the transfer; the client should retry")

// storedNames reads a cold zone's names from the store a chunk at a time,
// each chunk in a read transaction of its own that ends before any of it
// is written to the client: bbolt's rule is never to hold a read
// transaction while waiting on something else (a commit would grow the
// file meanwhile). The names come in store order.
type storedNames struct {
	store  *db.DB
	zone   string
	serial uint32 // the serial the transfer sends
	after  []byte // where the next chunk starts; nil once done
	done   bool
	buf    []byte // the chunk: name, records, name, records...
	ends   []int  // per name: where its name ends, where its records end
}

// next reads the next chunk; ok is false once the zone is done. A chunk
// whose serial is not the one being sent fails with errZoneChanged.
func (n *storedNames) next() (ok bool, err error) {
	if n.done {
		return false, nil
	}
	n.buf, n.ends = n.buf[:0], n.ends[:0]
	after, serial, err := n.store.ScanZoneChunk(n.zone, n.after, coldChunk, func(owner []byte, rrs db.RRs) error {
		n.buf = append(n.buf, owner...)
		n.ends = append(n.ends, len(n.buf))
		n.buf = append(n.buf, rrs...)
		n.ends = append(n.ends, len(n.buf))
		return nil
	})
	if err != nil {
		return false, err
	}
	if serial != n.serial {
		return false, errZoneChanged
	}
	n.after, n.done = after, after == nil
	return true, nil
}

// each calls fn with every name and its records of the chunk read last.
func (n *storedNames) each(fn func(name, rrs []byte) error) error {
	start := 0
	for i := 0; i < len(n.ends); i += 2 {
		if err := fn(n.buf[start:n.ends[i]], n.buf[n.ends[i]:n.ends[i+1]]); err != nil {
			return err
		}
		start = n.ends[i+1]
	}
	return nil
}

// writeColdAXFR sends a zone whose table is not built yet straight from
// the store, so a transfer right after a restart neither waits for the
// warm-up nor makes it hold a read transaction while the client reads. It
// sends SOA, NS, the names in store order, SOA. sent is false when the
// store was already past z's serial at the first chunk, before anything
// was written: the caller sends the zone some other way. A commit between
// two later chunks ends the transfer with errZoneChanged: the names sent
// would mix two serials.
//
// While it is sent, the warm-up waits (coldTransfers): in a CPU quota the
// two scans of the store would share it, and the transfer, which a
// secondary is waiting for, would take as long as both.
func (s *Server) writeColdAXFR(x *xfrWriter, z *zone) (sent bool, err error) {
	s.cold.enter()
	defer s.cold.leave()
	names := &storedNames{store: s.store, zone: z.name, serial: z.serial}
	if _, err := names.next(); err != nil {
		if errors.Is(err, errZoneChanged) {
			return false, nil
		}
		return false, err
	}
	return true, writeZone(x, z, func(add func(name, rrs []byte) error) error {
		for {
			if err := names.each(add); err != nil {
				return err
			}
			more, err := names.next()
			if err != nil {
				return fmt.Errorf("zone %s: %w", z.name, err)
			}
			if !more {
				return nil
			}
		}
	})
}

// coldTransfers counts the transfers being sent from the store. The
// warm-up calls wait between two chunks of its scan, outside any read
// transaction (a paused read transaction would hold off a commit that
// grows the file, and with it the transfer's next chunk).
type coldTransfers struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while n is 0
}

func (c *coldTransfers) enter() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		c.idle = make(chan struct{})
	}
	c.n++
}

func (c *coldTransfers) leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n--; c.n == 0 {
		close(c.idle)
		c.idle = nil
	}
}

// wait returns once no transfer is being sent from the store.
func (c *coldTransfers) wait() {
	c.mu.Lock()
	idle := c.idle
	c.mu.Unlock()
	if idle != nil {
		<-idle
	}
}

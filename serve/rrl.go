package serve

import (
	"encoding/binary"
	"hash/maphash"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tritondatacenter/cns/serve/policy"
)

// rrlVerdict is what to do with one UDP request.
type rrlVerdict int

const (
	rrlAnswer rrlVerdict = iota
	rrlSlip              // answer with an empty, truncated response
	rrlDrop              // no answer
)

// rrlTable counts answers per client network in a fixed-size table: an
// attacker spraying addresses fills slots, it cannot grow memory.
type rrlTable struct {
	cfg    policy.RRL
	seed   maphash.Seed
	shards [256]rrlShard
	now    func() time.Time

	limited atomic.Uint64 // answers dropped or slipped
}

type rrlShard struct {
	mu    sync.Mutex
	slots [256]rrlSlot
}

// rrlSlot is one client network's count in the current second.
type rrlSlot struct {
	key     uint64
	second  int64
	count   int
	limited int // limited answers this second, for the slip cadence
}

func newRRL(cfg policy.RRL) *rrlTable {
	if cfg.ResponsesPerSecond <= 0 {
		return nil
	}
	if cfg.IPv4Prefix <= 0 || cfg.IPv4Prefix > 32 {
		cfg.IPv4Prefix = 24
	}
	if cfg.IPv6Prefix <= 0 || cfg.IPv6Prefix > 128 {
		cfg.IPv6Prefix = 56
	}
	return &rrlTable{cfg: cfg, seed: maphash.MakeSeed(), now: time.Now}
}

// check accounts one UDP answer to src and says what to do with it.
func (t *rrlTable) check(src netip.Addr) rrlVerdict {
	src = src.Unmap()
	for _, p := range t.cfg.Exempt {
		if p.Contains(src) {
			return rrlAnswer
		}
	}
	bits := t.cfg.IPv4Prefix
	if src.Is6() {
		bits = t.cfg.IPv6Prefix
	}
	net, err := src.Prefix(bits)
	if err != nil {
		return rrlAnswer
	}
	a := net.Addr().As16()
	var kb [18]byte
	copy(kb[:], a[:])
	binary.BigEndian.PutUint16(kb[16:], uint16(bits))
	key := maphash.Bytes(t.seed, kb[:]) | 1
	sh := &t.shards[key>>56]
	slot := &sh.slots[(key>>48)&0xff]
	sec := t.now().Unix()

	sh.mu.Lock()
	defer sh.mu.Unlock()
	if slot.key != key || slot.second != sec {
		// A new second, or another network took the slot: start afresh.
		*slot = rrlSlot{key: key, second: sec}
	}
	slot.count++
	if slot.count <= t.cfg.ResponsesPerSecond {
		return rrlAnswer
	}
	slot.limited++
	t.limited.Add(1)
	if t.cfg.Slip > 0 && slot.limited%t.cfg.Slip == 0 {
		return rrlSlip
	}
	return rrlDrop
}

// slipReply is the truncated, empty answer RRL sends instead of the
// real one.
func (s *Server) slipReply(q *query, b []byte) []byte {
	var r response
	r.start(q, b, minUDPSize, s.udpSize)
	r.flags |= flagTC
	return r.finish(q.id)
}

// SetRRL replaces the rate limits (a zero rate turns RRL off).
func (s *Server) SetRRL(cfg policy.RRL) {
	if old := s.rrl.Swap(newRRL(cfg)); old != nil {
		s.rrlLimitedBefore.Add(old.limited.Load())
	}
}

// RRLLimited counts the UDP answers RRL dropped or truncated.
func (s *Server) RRLLimited() uint64 {
	if t := s.rrl.Load(); t != nil {
		return t.limited.Load() + s.rrlLimitedBefore.Load()
	}
	return s.rrlLimitedBefore.Load()
}

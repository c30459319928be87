package serve

import (
	"net/netip"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/admin/status"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/serve/policy"
)

// signerSetup is a server NOTIFYing one fake secondary, polling it fast
// enough that a serial it never serves goes to ERROR within the test.
func signerSetup(t *testing.T, signers ...netip.Addr) (*Server, *db.DB, *fakeSecondary) {
	sec := startFakeSecondary(t)
	a := Access{Zones: map[string]ZoneAccess{zoneName: {Notify: []netip.AddrPort{sec.addr()}}}, MinNotifyInterval: 10 * time.Millisecond}
	s, d, _ := xfrServer(t, 5, a)
	s.cfg.Signers = signers
	s.prop.policy = normalPropagation(policy.Propagation{PollDelay: 10 * time.Millisecond, PollInterval: 20 * time.Millisecond, PollMaxRetries: 15})
	runServer(t, s)
	return s, d, sec
}

func commitOne(t *testing.T, s *Server, d *db.DB, ip string) uint32 {
	t.Helper()
	if _, err := d.Commit(&db.ChangeSet{VMs: []db.VMChange{{UUID: vmB, Records: []db.Record{
		{Zone: zoneName, RR: mustRR(t, "p.dc.example.com. 30 IN A "+ip)},
	}}}}); err != nil {
		t.Fatal(err)
	}
	serial, _ := s.ZoneSerial(zoneName)
	return serial
}

func peerOf(t *testing.T, s *Server, addr netip.Addr) PeerZone {
	t.Helper()
	for _, p := range s.Peers() {
		if p.Address == addr.String() {
			return *p.Zones[zoneName]
		}
	}
	t.Fatalf("no peer %s in %+v", addr, s.Peers())
	return PeerZone{}
}

// Ensure a peer answering serials of its own after transferring cns's
// newest is tracked as a signer: each serial goes ACTIVE once it has
// transferred it and its own serial advanced (not before, not by its
// answer alone), its serial shows next to cns's, and a signer that stops
// transferring lags for real (ERROR, Serial behind).
func TestSignerTrackedByTransfers(t *testing.T) {
	s, d, sec := signerSetup(t)
	addr := sec.addr().Addr()

	s1 := commitOne(t, s, d, "10.0.0.7")
	s.peers.transferred(addr, zoneName, transferResult{kind: "AXFR", serial: s1})
	sec.serial.Store(s1 + 1000) // signed: a serial cns never had
	waitFor(t, s, func(p status.Propagation) bool { return p.State == status.StateActive }, s1)
	p, _ := s.Propagation(zoneName, s1)
	if pp := p.Peers[0]; pp.Serial != s1 || pp.SignerSerial != s1+1000 || pp.Seconds < 0 {
		t.Errorf("signer serving %d as %d: %+v", s1, s1+1000, pp)
	}
	if pz := peerOf(t, s, addr); !pz.Signer || pz.Serial != s1 || pz.SignerSerial != s1+1000 {
		t.Errorf("peer not a signer at %d (own %d): %+v", s1, s1+1000, pz)
	}

	// A new serial: its old own serial does not serve it, nor does the
	// transfer alone; the own serial advancing after the transfer does.
	s2 := commitOne(t, s, d, "10.0.0.8")
	s.peers.transferred(addr, zoneName, transferResult{kind: "IXFR", serial: s2})
	if pz := peerOf(t, s, addr); pz.Serial != s1 || pz.TransferSerial != s2 {
		t.Errorf("transferred but not yet signed: %+v", pz)
	}
	if p, _ := s.Propagation(zoneName, s2); p.State != status.StatePending {
		t.Errorf("before the signer re-signed: %+v", p)
	}
	committed := time.Now()
	sec.serial.Store(s1 + 1001)
	waitFor(t, s, func(p status.Propagation) bool { return p.State == status.StateActive }, s2)
	p, _ = s.Propagation(zoneName, s2)
	if pp := p.Peers[0]; pp.Serial != s2 || pp.SignerSerial != s1+1001 || pp.Seconds < 0 || pp.Seconds > time.Since(committed).Seconds()+1 {
		t.Errorf("signed %d: %+v", s2, pp)
	}

	// It stops transferring but keeps re-signing: a real lag.
	s3 := commitOne(t, s, d, "10.0.0.9")
	sec.serial.Store(s1 + 1002)
	waitFor(t, s, func(p status.Propagation) bool { return p.State == status.StateError }, s3)
	if pz := peerOf(t, s, addr); pz.Serial != s2 || pz.SignerSerial != s1+1002 {
		t.Errorf("a signer that stopped transferring must stay at %d: %+v", s2, pz)
	}
}

// Ensure a peer that serves cns's serials is no signer, even when it
// lags, and that config can name a signer before it is detected.
func TestSignerDetection(t *testing.T) {
	s, d, sec := signerSetup(t)
	addr := sec.addr().Addr()
	s1 := commitOne(t, s, d, "10.0.0.7")
	s.peers.transferred(addr, zoneName, transferResult{kind: "AXFR", serial: s1})
	s2 := commitOne(t, s, d, "10.0.0.8")
	sec.serial.Store(s1) // behind: a serial cns sent it
	waitFor(t, s, func(p status.Propagation) bool { return p.State == status.StateActive }, s1)
	s.peers.transferred(addr, zoneName, transferResult{kind: "IXFR", serial: s2})
	sec.serial.Store(s2)
	waitFor(t, s, func(p status.Propagation) bool { return p.State == status.StateActive }, s2)
	if pz := peerOf(t, s, addr); pz.Signer || pz.Serial != s2 || pz.SignerSerial != 0 {
		t.Errorf("a plain secondary taken for a signer: %+v", pz)
	}

	// Named in config: a signer from its first transfer, whose answer
	// (here equal to cns's serial by chance) does not count by itself.
	s, d, sec = signerSetup(t, netip.MustParseAddr("127.0.0.1"))
	addr = sec.addr().Addr()
	s1 = commitOne(t, s, d, "10.0.0.7")
	s.peers.transferred(addr, zoneName, transferResult{kind: "AXFR", serial: s1 - 1})
	if pz := peerOf(t, s, addr); !pz.Signer {
		t.Errorf("configured signer: %+v", pz)
	}
	sec.serial.Store(s1)
	waitFor(t, s, func(p status.Propagation) bool { return len(p.Peers) == 1 && p.Peers[0].SignerSerial == s1 }, s1)
	if p, _ := s.Propagation(zoneName, s1); p.State == status.StateActive {
		t.Errorf("signer ACTIVE for a serial it never transferred: %+v", p)
	}
}

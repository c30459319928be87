package serve

import (
	"bufio"

	"encoding/binary"
	"github.com/miekg/dns"
	"io"
	"net"
	"net/netip"
	"time"
)

// serveTCP accepts connections until the listener closes.
func (s *Server) serveTCP(ln net.Listener, ep endpoint) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if isClosed(err) || s.closed.Load() {
				return
			}
			s.log.Warn("tcp accept", "err", err)
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE: do not spin
			continue
		}
		if s.tcpActive.Load() >= int64(s.cfg.MaxTCPConns) {
			c.Close()
			continue
		}
		var src netip.Addr
		if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			src = ta.AddrPort().Addr().Unmap()
		}
		s.lmu.Lock()
		if s.closed.Load() {
			s.lmu.Unlock()
			c.Close()
			return
		}
		// One client cannot take every connection slot.
		if s.perIP[src] >= s.cfg.MaxTCPConnsPerIP {
			s.lmu.Unlock()
			c.Close()
			continue
		}
		s.perIP[src]++
		s.conns[c] = struct{}{}
		s.tcpActive.Add(1)
		s.wg.Add(1)
		s.lmu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(c, ep)
			s.lmu.Lock()
			delete(s.conns, c)
			if s.perIP[src]--; s.perIP[src] <= 0 {
				delete(s.perIP, src)
			}
			s.lmu.Unlock()
			s.tcpActive.Add(-1)
		}()
	}
}

// serveConn answers the requests of one TCP connection (RFC 7766: several
// per connection, pipelined). Answers are flushed when no further request
// is already buffered.
func (s *Server) serveConn(c net.Conn, ep endpoint) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 4096)
	bw := bufio.NewWriterSize(c, 16<<10)
	var lenBuf [2]byte
	msg := make([]byte, 0, 512)
	out := make([]byte, 0, 4096)
	q := query{conn: &queryConn{endpoint: ep}}
	for {
		c.SetReadDeadline(time.Now().Add(s.cfg.TCPIdleTimeout))
		if _, err := io.ReadFull(br, lenBuf[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(lenBuf[:]))
		if n == 0 {
			return
		}
		if cap(msg) < n {
			msg = make([]byte, n)
		}
		msg = msg[:n]
		if _, err := io.ReadFull(br, msg); err != nil {
			return
		}
		q.tcp = true
		if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			q.src = ta.AddrPort()
		}
		res := q.parse(msg)
		if res == parseOK && !q.clientOnly() && q.opcode == 0 && q.qclass == dns.ClassINET && (q.qtype == dns.TypeAXFR || q.qtype == dns.TypeIXFR) {
			err := s.serveTransfer(bw, bw.Flush, &q, q.src, func(t time.Time) { c.SetWriteDeadline(t) })
			if err != nil {
				return
			}
			// A transfer may have grown msg's buffer; the next request
			// reads into it as before.
			continue
		}
		resp := s.respond(&q, res, out[:0], maxTCPSize)
		if resp == nil && q.forward {
			resp = s.forwardTCP(&q)
		}
		s.tcpCounters.count(&q, resp)
		if resp == nil {
			continue
		}
		if cap(resp) > cap(out) {
			out = resp[:0] // keep the bigger buffer
		}
		c.SetWriteDeadline(time.Now().Add(s.cfg.TCPIdleTimeout))
		binary.BigEndian.PutUint16(lenBuf[:], uint16(len(resp)))
		bw.Write(lenBuf[:])
		bw.Write(resp)
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return
			}
		}
	}
}

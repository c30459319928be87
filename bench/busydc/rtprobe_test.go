package busydc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// rtProbe is a second measure of cns's answer latency, beside the load
// generator's. The generator is open loop, as clients are, but it shares
// the driver's CPU with the simulator, the change probes and the
// secondaries: when Knot applies an IXFR the whole driver can stall for
// several milliseconds (a Go execution trace of cns showed it idle, its
// UDP socket empty, while the generator's schedule ran on), and the
// queries due meanwhile go out in one burst that cns then works through.
// So part of the generator's tail is the driver's. The RT probe sends a
// query every rtProbeEvery from a thread of its own with real-time priority
// (SCHED_FIFO), which the driver's other work cannot delay, and waits for
// each answer before the next (closed loop). A stall of cns delays the
// one probe that meets it, not every query sent during it, so the probe
// bounds cns's own tail from below, as the generator bounds it from above.
type rtProbe struct {
	lat      hist
	sent     uint64
	lost     uint64        // unanswered after 200 ms
	cpu      time.Duration // the probe thread's CPU time
	realtime error         // why the thread did not get real-time priority (nil: it did)
}

// The probe thread is charged 90–330 µs of CPU per query on the KVM
// guests these runs use: its system calls and timer wake-ups, and the
// kernel's delivery of whatever loopback traffic is queued on its CPU
// when it sends (work done for the other threads, charged to it). One
// every 5 ms keeps that to a few per cent of the driver's CPU, inside the
// real-time budget that bench/capped/taskset gives the driver's cgroup
// (25 %: a thread over its group's budget stops until the next second).
const (
	rtProbeEvery   = 5 * time.Millisecond
	rtProbeTimeout = 200 * time.Millisecond
)

// runRTProbe asks server query (a packed question, its id patched in)
// every rtProbeEvery for d.
func runRTProbe(server netip.AddrPort, query []byte, d time.Duration) (*rtProbe, error) {
	// The thread ends with the goroutine (it stays locked), so its
	// real-time policy never reaches another goroutine.
	runtime.LockOSThread()
	p := &rtProbe{}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 10}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		p.realtime = fmt.Errorf("SCHED_FIFO: %w (the driver's cgroup needs cpu.rt_runtime_us: run as root through bench/busydc.sh)", err)
	}
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 1, 0)
	fd, err := dialUDP(server, rtProbeTimeout)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	q := append([]byte(nil), query...)
	buf := make([]byte, 4096)
	start := time.Now()
	for i := 0; ; i++ {
		due := time.Duration(i) * rtProbeEvery
		if due >= d {
			break
		}
		if wait := due - time.Since(start); wait > 0 {
			ts := syscall.NsecToTimespec(int64(wait))
			syscall.Nanosleep(&ts, nil)
		}
		id := uint16(i)
		binary.BigEndian.PutUint16(q, id)
		sent := time.Now()
		if _, err := syscall.Write(fd, q); err != nil {
			return nil, err
		}
		p.sent++
		for {
			n, err := syscall.Read(fd, buf)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil { // SO_RCVTIMEO: EAGAIN
				p.lost++
				break
			}
			if n >= 12 && binary.BigEndian.Uint16(buf) == id {
				p.lat.add(time.Since(sent))
				break
			}
		}
	}
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) == nil {
		p.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return p, nil
}

package dns_test

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery/dns"
	"github.com/sluice-rpc/sluice/internal/testkit/procmem"
	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// flood answers an SRV query with srvs records, each naming a target of
// its own, and each target's A query with as many addresses as a TCP
// answer holds (4,000): srvs x 4,000 peers. UDP answers are truncated, so
// that Go's resolver asks again over TCP.
type flood struct{ srvs int }

func (f flood) ServeDNS(w mdns.ResponseWriter, req *mdns.Msg) {
	if len(req.Question) != 1 {
		return
	}
	q := req.Question[0]
	m := new(mdns.Msg)
	m.SetReply(req)
	m.Authoritative, m.Compress = true, true
	hdr := func(t uint16) mdns.RR_Header {
		return mdns.RR_Header{Name: q.Name, Rrtype: t, Class: mdns.ClassINET, Ttl: 0}
	}
	switch {
	case q.Qtype == mdns.TypeSRV:
		for i := range f.srvs {
			m.Answer = append(m.Answer, &mdns.SRV{Hdr: hdr(mdns.TypeSRV), Weight: 1, Port: 4000, Target: fmt.Sprintf("t%d.flood.test.", i)})
		}
	case q.Qtype == mdns.TypeA && strings.HasPrefix(q.Name, "t"):
		for i := range 4000 {
			m.Answer = append(m.Answer, &mdns.A{Hdr: hdr(mdns.TypeA), A: net.IPv4(127, 1, byte(i>>8), byte(i))})
		}
	}
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		m.Truncate(512)
	}
	w.WriteMsg(m)
}

// The DNS flood of the hostile-peer report, at full size: an SRV answer
// of 256 targets of 4,000 addresses each, 1,024,000 peers (646 MB in a
// client that built them all). The lookup stops once its addresses pass
// MaxPeers and reports the cap; the process's peak RSS stays under
// 200 MB. The fast version of the same defence is TestMaxPeersSRV.
func TestFloodOfAddresses(t *testing.T) {
	slowtest.Skip(t, "answers a million addresses and measures this process's peak RSS")
	if slowtest.Race {
		t.Skip("the race detector multiplies memory: run without -race")
	}
	if _, err := procmem.PeakRSS(); err != nil {
		t.Skip(err)
	}
	addr := startHandler(t, flood{srvs: 256})
	rec, _ := start(t, dns.Config{Target: "dns://" + addr + "/_kv._tcp.flood.test.", Period: time.Hour, Timeout: 30 * time.Second, Clock: clock.NewFake(time.Unix(0, 0))})
	err := rec.err(t)
	t.Logf("reported: %v", err)
	if !errors.Is(err, dns.ErrOverCap) {
		t.Errorf("the error is not ErrOverCap")
	}
	rec.quiet(t)
	peak, _ := procmem.PeakRSS()
	t.Logf("peak RSS %d MB", peak>>20)
	if peak > 200<<20 {
		t.Errorf("peak RSS %d MB, want under 200 MB", peak>>20)
	}
}

// startHandler serves h on 127.0.0.1, UDP and TCP on one port, until the
// test ends, and returns the port's address.
func startHandler(t *testing.T, h mdns.Handler) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		pc.Close()
		t.Skipf("no TCP port beside UDP %s: %v", pc.LocalAddr(), err)
	}
	for _, srv := range []*mdns.Server{{PacketConn: pc, Handler: h}, {Listener: l, Handler: h}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		served := make(chan error, 1)
		go func() { served <- srv.ActivateAndServe() }()
		testwait.Recv(t, started, "the DNS server to start")
		t.Cleanup(func() {
			srv.Shutdown()
			testwait.Recv(t, served, "the DNS server to stop")
		})
	}
	return pc.LocalAddr().String()
}

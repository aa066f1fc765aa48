package dns_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery/dns"
)

// Guards MaxPeers on A/AAAA answers: a lookup finding more addresses
// than the cap reports an error naming it and no set; under the cap again,
// the set comes. Without the cap the three addresses would be reported.
func TestMaxPeersAddressRecords(t *testing.T) {
	s := startServer(t)
	s.set(t, "kv.test.", "A 127.0.0.1", "A 127.0.0.2", "A 127.0.0.3")
	fc := clock.NewFake(time.Unix(0, 0))
	rec, _ := start(t, dns.Config{Target: "dns://" + s.addr + "/kv.test.:4040", Period: time.Minute, Timeout: lookupTimeout, MaxPeers: 2, Clock: fc})
	err := rec.err(t)
	if !errors.Is(err, dns.ErrOverCap) || !strings.Contains(err.Error(), "the A/AAAA answer has 3 addresses, more than Config.MaxPeers (2)") {
		t.Fatalf("error %v, want ErrOverCap naming 3 addresses and the cap", err)
	}
	rec.quiet(t)

	s.set(t, "kv.test.", "A 127.0.0.1", "A 127.0.0.2")
	waitTimers(t, fc, 1)
	fc.Add(time.Minute)
	checkSet(t, rec.update(t), addrs("127.0.0.1:4040", "127.0.0.2:4040"))
}

// Guards MaxPeers on SRV answers, counted while they are built: more
// records than the cap fail before any target is looked up; records
// whose targets' addresses make more peers than the cap stop the target
// lookups once over it (20 targets of 4 addresses each, a cap of 30: 8
// lookups in flight, and 7 more started before the count passes it) and
// report no set. Without the cap the 80 peers would be reported.
func TestMaxPeersSRV(t *testing.T) {
	s := startServer(t)
	const name = "_kv._tcp.test."
	var recs []string
	for i := range 20 {
		target := fmt.Sprintf("t%02d.kv.test.", i)
		recs = append(recs, fmt.Sprintf("SRV 0 10 %d %s", 4000+i, target))
		s.set(t, target, "A 127.0.1.1", "A 127.0.1.2", "A 127.0.1.3", "A 127.0.1.4")
	}
	s.set(t, name, recs...)
	targetQueries := func() int {
		n := 0
		for i := range 20 {
			n += s.count(mdns.TypeA, fmt.Sprintf("t%02d.kv.test.", i))
		}
		return n
	}

	// More records than the cap: no target looked up.
	rec, stop := start(t, dns.Config{Target: "dns://" + s.addr + "/" + name, Period: time.Minute, Timeout: lookupTimeout, MaxPeers: 19, Clock: clock.NewFake(time.Unix(0, 0))})
	err := rec.err(t)
	if !errors.Is(err, dns.ErrOverCap) || !strings.Contains(err.Error(), "the SRV answer has 20 records, more than Config.MaxPeers (19)") {
		t.Fatalf("error %v, want ErrOverCap naming 20 records and the cap", err)
	}
	rec.quiet(t)
	stop()
	if n := targetQueries(); n != 0 {
		t.Errorf("%d targets were looked up, want none", n)
	}

	// Addresses over the cap: the lookups stop.
	rec, stop = start(t, dns.Config{Target: "dns://" + s.addr + "/" + name, Period: time.Minute, Timeout: lookupTimeout, MaxPeers: 30, Clock: clock.NewFake(time.Unix(0, 0))})
	err = rec.err(t)
	if !errors.Is(err, dns.ErrOverCap) || !strings.Contains(err.Error(), "the SRV answer's 20 records and their targets' addresses make at least") {
		t.Fatalf("error %v, want ErrOverCap naming the cap", err)
	}
	rec.quiet(t)
	stop()
	if n := targetQueries(); n > 15 {
		t.Errorf("%d targets were looked up, want at most 15 (8 in flight, 7 more before the count passed 30)", n)
	}
}

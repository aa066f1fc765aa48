//go:build linux

package channel

import (
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
)

// A client following 9,990 unreachable peers (refused at once) costs under
// 2 s of CPU in its first 20 s and in seconds 40-60: the connect budget
// bounds the refused dials across the peers (about 60,000 in the first
// 20 s without it, each peer on its own backoff), and the watch on failing
// peers looks only at the peers that changed. It measures the process's
// CPU (getrusage), so it runs alone, in a binary built without -race;
// the probe measured 16.4 s per 20 s, the first fix 3.7 s.
func TestUnreachablePeersCostLittleCPU(t *testing.T) {
	slowtest.Skip(t, "runs a client of 9,990 unreachable peers for 60 s")
	if slowtest.Race {
		t.Skip("measures CPU: run without -race")
	}
	hps := refusedPorts(t, 9990)
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	ch, err := New("client")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.NewClient("kv", WithResolver(discovery.StaticHostPorts(hps...))); err != nil {
		t.Fatal(err)
	}
	window := func(name string, c0 time.Duration) {
		t.Helper()
		time.Sleep(20 * time.Second) // the measure is CPU over a span of wall-clock time
		used := cpu() - c0
		t.Logf("%s: %.2f s of CPU", name, used.Seconds())
		if used >= 2*time.Second {
			t.Errorf("%s: %.2f s of CPU, want under 2 s", name, used.Seconds())
		}
	}
	window("seconds 0-20", start)
	time.Sleep(20 * time.Second)
	window("seconds 40-60", cpu())
}

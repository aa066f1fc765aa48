package tchconn

import (
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/tframe"
)

// A load report's frame is a valid signal frame about the connection,
// and reads back as it was made; a report without a utilisation says so;
// values that are not small decimal numbers read as 0, and a class above
// critical_plus as none.
func TestLoadReportFrame(t *testing.T) {
	for _, l := range []Load{
		{Utilisation: 812, HasUtilisation: true, QPS: 1120, Refusing: 2},
		{QPS: 7},
		{Utilisation: 0, HasUtilisation: true},
	} {
		f := AppendLoad(nil, l)
		fr, err := tframe.Parse(f)
		if err != nil || fr.Type != tframe.Signal || fr.ID != tframe.ConnID {
			t.Fatalf("AppendLoad(%+v): frame %+v, %v; want a signal frame with ConnID", l, fr, err)
		}
		var got Load
		tframe.SignalPairs(f[tframe.HeaderSize:], func(k, v []byte) {
			if !readLoad(&got, k, v) {
				t.Errorf("AppendLoad(%+v) wrote key %q, not a load report's", l, k)
			}
		})
		if got != l {
			t.Errorf("AppendLoad(%+v) reads back as %+v", l, got)
		}
	}
	var l Load
	for _, kv := range [][2]string{{keyLoadU, "-5"}, {keyLoadQPS, "1234567890123"}, {keyRefusing, "5"}} {
		readLoad(&l, []byte(kv[0]), []byte(kv[1]))
	}
	if l != (Load{HasUtilisation: true}) {
		t.Errorf("bad values read as %+v, want zeros (and a utilisation of 0 reported)", l)
	}
	if readLoad(&l, []byte("drain"), []byte("conn")) {
		t.Error("readLoad took the drain key")
	}
}

// A server that sends load reports back to back gets one passed on per
// MinLoadGap: each passes over the client's peer list.
func TestLoadReportsAreRateLimited(t *testing.T) {
	g, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var passed int
	g.OnLoad(func(string, Load) { passed++ })
	c := &Conn{g: g}
	c.SetTarget("127.0.0.1:1")
	start := time.Now()
	for i := range 1000 {
		c.gotLoad(Load{QPS: int64(i + 1)})
	}
	most := 1 + int(time.Since(start)/MinLoadGap)
	if passed < 1 || passed > most {
		t.Errorf("%d of 1000 back-to-back reports passed on, want 1 to %d (one per %v)", passed, most, MinLoadGap)
	}
	if l, ok := c.LastLoad(); !ok || l.QPS > int64(passed*1000) || l.QPS == 0 {
		t.Errorf("LastLoad %+v, %v: want a report that passed", l, ok)
	}
}

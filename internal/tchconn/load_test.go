package tchconn

import (
	"testing"

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

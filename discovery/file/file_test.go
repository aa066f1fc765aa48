package file_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/discovery/file"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A peer list in each shape, with and without weights; a bad entry is
// named by its line.
func TestParse(t *testing.T) {
	want := []discovery.Address{{HostPort: "127.0.0.1:4040"}, {HostPort: "localhost:4041", Weight: 2.5}, {HostPort: "[::1]:4042"}}
	for _, tc := range []struct{ name, text string }{
		{"lines", "127.0.0.1:4040\n\n# a comment\n  localhost:4041 2.5  # trailing comment\n[::1]:4042\n"},
		{"json", `["127.0.0.1:4040", {"hostPort": "localhost:4041", "weight": 2.5},` + "\n" + `"[::1]:4042"]`},
		{"yaml", "# peers\n- 127.0.0.1:4040\n- hostPort: localhost:4041\n  weight: 2.5\n- '[::1]:4042'\n"},
	} {
		got, err := file.Parse([]byte(tc.text))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, want)
		}
	}
	for _, tc := range []struct{ name, text, want string }{
		{"bad line", "127.0.0.1:4040\n\nnohost\n", `line 3: peer: bad host:port "nohost"`},
		{"bad port", "127.0.0.1:4040\n127.0.0.1:0\n", `line 2: peer: bad host:port "127.0.0.1:0"`},
		{"bad weight", "127.0.0.1:4040 heavy\n", `line 1: weight "heavy" is not a number`},
		{"zero weight", "127.0.0.1:4040 0\n", `line 1: weight 0, must be a number in [1e-06, 1e+09]`},
		{"weight below the least", "127.0.0.1:4040 1e-7\n", `line 1: weight 1e-07, must be a number in [1e-06, 1e+09]`},
		{"three fields", "127.0.0.1:4040 1 2\n", `line 1: want "host:port" or "host:port weight", got 3 fields`},
		{"bad json entry", "[\n  \"127.0.0.1:4040\",\n  \"127.0.0.1:99999\"\n]", `line 3: peer: bad host:port "127.0.0.1:99999"`},
		{"json number", "[\"127.0.0.1:4040\",\n 4041]", `line 2: want a "host:port" string or {"hostPort"`},
		{"json unknown field", `[{"hostport": "127.0.0.1:4040"}]`, `unknown field "hostport"`},
		{"json negative weight", `[{"hostPort": "127.0.0.1:4040", "weight": -1}]`, `weight -1, must be a number in [1e-06, 1e+09]`},
		{"bad yaml entry", "- 127.0.0.1:4040\n- nohost\n", `line 2: peer: bad host:port "nohost"`},
		{"yaml nested", "- 127.0.0.1:4040\n- [127.0.0.1:4041]\n", `line 2: want a "host:port" string`},
		{"empty json", "[]", "the list is empty"},
		{"empty", "\n# nothing\n", "no peers in the file"},
		{"garbage", "\x00\x01garbage{{", `bad host:port`},
	} {
		if _, err := file.Parse([]byte(tc.text)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// updates records what a resolver reports.
type updates struct {
	sets chan []discovery.Address
	errs chan error
	now  chan struct{}
}

func newUpdates() *updates {
	return &updates{make(chan []discovery.Address, 10), make(chan error, 10), make(chan struct{}, 1)}
}
func (u *updates) Update(a []discovery.Address) { u.sets <- a }
func (u *updates) Error(err error)              { u.errs <- err }
func (u *updates) ResolveNow() <-chan struct{}  { return u.now }

// The file is followed: a change is reported at the next period, an
// unchanged file is not reported again, garbage and a missing file are
// failures naming the file, and a fixed file is reported again.
func TestResolverFollowsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "peers")
	// write replaces the file whole, as the package doc advises: a
	// read never sees it half-written.
	write := func(s string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("127.0.0.1:4040\n")
	clk := clock.NewFake(time.Unix(1000, 0))
	r, err := file.New(file.Config{Path: path, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if r.String() != "file:"+path {
		t.Fatalf("String() = %q", r.String())
	}
	u := newUpdates()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Resolve(ctx, u) }()
	defer func() { cancel(); <-done }()
	// tick ends a period and waits for the resolver to have read the
	// file and armed its next timer, so that a write after it is seen at
	// the next tick, not this one.
	tick := func() {
		t.Helper()
		testwait.Timers(t, clk, 1)
		clk.Add(file.DefaultPeriod)
		testwait.Timers(t, clk, 1)
	}
	if got := testwait.Recv(t, u.sets, "the first set"); len(got) != 1 || got[0].HostPort != "127.0.0.1:4040" {
		t.Fatalf("first set %+v", got)
	}
	tick()
	write("127.0.0.1:4040\n127.0.0.1:4041 3\n")
	tick()
	if got := testwait.Recv(t, u.sets, "the changed set"); len(got) != 2 || got[1].Weight != 3 {
		t.Fatalf("changed set %+v", got)
	}
	tick() // the same content: nothing reported
	write("{{ not a peer list")
	tick()
	if err := testwait.Recv(t, u.errs, "the garbage"); !strings.Contains(err.Error(), path) {
		t.Fatalf("garbage: %v, want the path named", err)
	}
	select {
	case s := <-u.sets:
		t.Fatalf("an unchanged file was reported again: %+v", s)
	default:
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	tick()
	if err := testwait.Recv(t, u.errs, "the missing file"); !os.IsNotExist(err) && !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("missing file: %v", err)
	}
	write("127.0.0.1:4042\n")
	u.now <- struct{}{} // ResolveNow reads at once
	if got := testwait.Recv(t, u.sets, "the fixed file"); len(got) != 1 || got[0].HostPort != "127.0.0.1:4042" {
		t.Fatalf("fixed file %+v", got)
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := file.New(file.Config{}); err == nil || !strings.Contains(err.Error(), `file: Config.Path is "", must name the file of peers`) {
		t.Fatalf("no path: %v", err)
	}
	if _, err := file.New(file.Config{Path: "x", Period: -1}); err == nil || !strings.Contains(err.Error(), "Period is -1ns, must be >= 0") {
		t.Fatalf("negative period: %v", err)
	}
}

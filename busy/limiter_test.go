package busy

import (
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
)

var epoch = time.Unix(1_700_000_000, 0)

func newTestLimiter(t testing.TB, cfg Config) (*Limiter, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(epoch)
	cfg.Clock = clk
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

func TestNextArithmetic(t *testing.T) {
	def := Config{}
	constant := Config{Strategy: Constant}
	tests := []struct {
		name  string
		cfg   Config
		limit float64
		busy  int
		want  float64
	}{
		{"quiet window recovers x4", def, 100, 0, 400},
		{"one busy halves the x4 recovery", def, 100, 1, 200},
		{"each busy halves once more", def, 1024, 5, 1024 * 4 / 32.0},
		{"halvings are capped at MaxHalvings", def, 9999999, 3000, 9999999 * 4 / math.Exp2(20)},
		{"cap is exact: 20 and 21 busy agree", def, 5000, 21, 5000 * 4 / math.Exp2(20)},
		{"the ceiling bounds recovery", def, 5e6, 0, 9999999},
		{"the ceiling stays put when quiet", def, 9999999, 0, 9999999},
		{"constant adds RecoverValue", constant, 100, 0, 300},
		{"constant halves after adding", constant, 100, 1, 150},
		{"constant is capped too", constant, 9999999, 3000, (9999999 + 200) / math.Exp2(20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.Next(tt.limit, tt.busy); math.Abs(got-tt.want) > 1e-9*tt.want {
				t.Errorf("Next(%v, %d) = %v, want %v", tt.limit, tt.busy, got, tt.want)
			}
		})
	}
}

// The design's published table: 5000 rps with 3000 busy responses collapses
// the limit to 38 in one window.
func TestLimiterCollapsesThenRecoversX4PerSecond(t *testing.T) {
	l, clk := newTestLimiter(t, Config{})
	for i := 0; i < 5000; i++ {
		if !l.Allow() {
			t.Fatalf("request %d refused at the ceiling", i)
		}
	}
	for i := 0; i < 3000; i++ {
		l.RecordBusy()
	}
	clk.Add(time.Second)
	if got := l.Limit(); math.Floor(got) != 38 {
		t.Fatalf("limit after a busy window = %v, want 38.x", got)
	}
	want := l.Limit()
	for sec := 0; sec < 6; sec++ {
		allowed := 0
		for l.Allow() {
			allowed++
		}
		if allowed != int(math.Floor(want)) {
			t.Fatalf("second %d: allowed %d, want floor(%v)", sec, allowed, want)
		}
		clk.Add(time.Second)
		want = math.Min(DefaultCeiling, want*4)
		if got := l.Limit(); got != want {
			t.Fatalf("second %d: limit %v, want %v", sec, got, want)
		}
	}
}

func TestLimiterIdleWindowsStillRecover(t *testing.T) {
	l, clk := newTestLimiter(t, Config{})
	l.Allow()
	for i := 0; i < 20; i++ {
		l.RecordBusy()
	}
	clk.Add(time.Second)
	base := l.Limit() // 9999999*4/2^20
	// Three quiet seconds with no call at all: the next look sees x4^3.
	clk.Add(3 * time.Second)
	if got, want := l.Limit(), base*64; math.Abs(got-want) > 1e-9 {
		t.Fatalf("after 3 idle seconds limit = %v, want %v", got, want)
	}
	// A very long silence recovers to the ceiling without looping forever.
	clk.Add(1000 * time.Hour)
	if got := l.Limit(); got != DefaultCeiling {
		t.Fatalf("after a long silence limit = %v, want the ceiling", got)
	}
}

func TestLimiterBusyAfterIdleCountsInItsOwnWindow(t *testing.T) {
	l, clk := newTestLimiter(t, Config{})
	clk.Add(2500 * time.Millisecond) // into window 2
	l.RecordBusy()
	clk.Add(time.Second)
	if got := l.Limit(); got != DefaultCeiling { // 9999999*4/2 is capped
		t.Fatalf("limit = %v, want the ceiling", got)
	}
	// From a low limit the same single busy shows: x4 then /2.
	for i := 0; i < 20; i++ {
		l.RecordBusy()
	}
	clk.Add(time.Second)
	low := l.Limit()
	l.RecordBusy()
	clk.Add(time.Second)
	if got, want := l.Limit(), low*2; math.Abs(got-want) > 1e-9 {
		t.Fatalf("one busy: limit %v, want %v", got, want)
	}
}

func TestLimiterClockBehindUsesCurrentWindow(t *testing.T) {
	l, clk := newTestLimiter(t, Config{})
	clk.Add(5 * time.Second)
	l.Limit()
	// A goroutine whose clock read happened earlier still counts now.
	if !l.AllowAt(epoch.Add(time.Second)) {
		t.Fatal("a late clock reading was refused")
	}
	if !l.AllowAt(epoch.Add(-time.Hour)) {
		t.Fatal("a reading before the origin was refused")
	}
}

func TestLimiterConcurrentAllowsExactlyFloorLimit(t *testing.T) {
	cfg := Config{Ceiling: 1000.7}
	l, _ := newTestLimiter(t, cfg)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for i := 0; i < 500; i++ {
				if l.Allow() {
					n++
				}
				if i%50 == 0 {
					l.RecordBusy()
				}
			}
			mu.Lock()
			allowed += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if allowed != 1000 {
		t.Fatalf("allowed %d in one window, want floor(1000.7) = 1000", allowed)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{RecoverRate: -1}, "RecoverRate is -1, must be a finite number >= 0 (0 means the default, 3)"},
		{Config{RecoverRate: math.NaN()}, "RecoverRate is NaN"},
		{Config{RecoverRate: math.Inf(1)}, "RecoverRate is +Inf"},
		{Config{Strategy: Constant, RecoverValue: -200}, "RecoverValue is -200, must be a finite number >= 0 (0 means the default, 200)"},
		{Config{Strategy: 7}, "Strategy is Strategy(7), must be Multiplicative or Constant"},
		{Config{Ceiling: -1}, "Ceiling is -1, must be a finite number >= 0 (0 means the default, 9999999)"},
		{Config{Ceiling: math.Inf(1)}, "Ceiling is +Inf"},
		{Config{Ceiling: 1 << 33}, "must be < 2^32"},
		{Config{MaxHalvings: -1}, "MaxHalvings is -1, must be between 0 and 255 (0 means the default, 20)"},
		{Config{MaxHalvings: 256}, "MaxHalvings is 256"},
		{Config{Window: -time.Second}, "Window is -1s, must be >= 0 (0 means the default, 1s)"},
	}
	for _, tt := range tests {
		_, err := New(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) error = %v, want it to say %q", tt.cfg, err, tt.want)
		}
	}
}

// The zero Config, and each zero field, mean the design's defaults; a
// disabled Config needs nothing else.
func TestZeroConfigMeansDefaults(t *testing.T) {
	want := Config{Strategy: Multiplicative, Ceiling: DefaultCeiling, RecoverRate: DefaultRecoverRate,
		RecoverValue: DefaultRecoverValue, MaxHalvings: DefaultMaxHalvings, Window: DefaultWindow, Clock: clock.Real}
	for _, cfg := range []Config{{}, {Disabled: true}, {Ceiling: 50}} {
		l, err := New(cfg)
		if err != nil {
			t.Fatalf("New(%+v): %v", cfg, err)
		}
		w := want
		w.Disabled = cfg.Disabled
		if cfg.Ceiling != 0 {
			w.Ceiling = cfg.Ceiling
		}
		if got := l.Config(); got != w {
			t.Errorf("New(%+v).Config() = %+v, want %+v", cfg, got, w)
		}
	}
	if got, want := (Config{}).Next(1000, 1), 2000.0; got != want {
		t.Errorf("Config{}.Next(1000, 1) = %v, want %v", got, want)
	}
	l, _ := newTestLimiter(t, Config{Disabled: true, Ceiling: 1})
	for i := 0; i < 3; i++ {
		l.RecordBusy()
		if !l.Allow() {
			t.Fatalf("a disabled limiter refused request %d", i)
		}
	}
}

func BenchmarkAllowAt(b *testing.B) {
	l, _ := newTestLimiter(b, Config{})
	now := epoch.Add(10 * time.Millisecond)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if i%1_000_000 == 0 {
			now = now.Add(time.Second) // stay under the ceiling
		}
		l.AllowAt(now)
	}
}

func BenchmarkAllowRecordBusyParallel(b *testing.B) {
	l, err := New(Config{}) // wall clock: the production path, time.Now included
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if i%1000 == 999 {
				l.RecordBusy()
			} else {
				l.Allow()
			}
			i++
		}
	})
}

func BenchmarkAllowWallClock(b *testing.B) {
	l, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		l.Allow()
	}
}

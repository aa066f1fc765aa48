package busysim

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/busy"
)

// The design's two published tables (testdata/*.golden, copied from the
// design with its hand-written "<=== flappy traffic" notes removed) must come
// out line for line.
func TestPresetsMatchTheDesignsTables(t *testing.T) {
	for name, sc := range Presets {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile("testdata/" + name + ".golden")
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if _, err := RunBoth(&got, sc); err != nil {
				t.Fatal(err)
			}
			gl, wl := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
			for i := 0; i < len(gl) || i < len(wl); i++ {
				var g, w string
				if i < len(gl) {
					g = gl[i]
				}
				if i < len(wl) {
					w = wl[i]
				}
				if g != w {
					t.Fatalf("line %d:\n got: %q\nwant: %q", i+1, g, w)
				}
			}
		})
	}
}

func TestRunReportsConvergence(t *testing.T) {
	var buf bytes.Buffer
	res, err := Run(&buf, busy.Config{}, Presets["steady"])
	if err != nil {
		t.Fatal(err)
	}
	if !res.Converged || res.At != 17 || res.Speed != 7 {
		t.Fatalf("steady recover-rate run: %+v, want converged at 17, speed 7", res)
	}
	// The Result holds what was printed, second by second.
	var lines []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(l, "    --- ") || strings.HasPrefix(l, "    +++ ") {
			lines = append(lines, l)
		}
	}
	if len(res.Seconds) != len(lines) || res.StartLimit != 9999999 || res.RecoverRate != 3 || res.Strategy != busy.Multiplicative {
		t.Fatalf("%d seconds, %d printed; start limit %d, recover rate %v, strategy %v", len(res.Seconds), len(lines), res.StartLimit, res.RecoverRate, res.Strategy)
	}
	for i, s := range res.Seconds {
		mark, busyN := "---", fmt.Sprint(s.Busy)
		if s.Recovering {
			mark = "+++"
		}
		if want := fmt.Sprintf("    %s time=%d rps=%d throttled=%d busy=%s limit=%d", mark, s.Time, s.RPS, s.Throttled, busyN, s.Limit); lines[i] != want {
			t.Errorf("second %d: %+v, printed %q", i, s, lines[i])
		}
	}
	if res, _ := Run(&buf, busy.Config{Strategy: busy.Constant}, Presets["steady"]); res.Converged {
		t.Fatal("the constant strategy converged; the design says it does not")
	}
}

func TestPatterns(t *testing.T) {
	tests := []struct {
		p    Pattern
		v, t int
		want int
	}{
		{Steady, 5000, 4, 5000},
		{Flappy, 3000, 3, 3000},
		{Flappy, 3000, 4, 0},
		{LinearGrow, 1000, 5, 1500},
		{LinearDecrease, 1000, 5, 500},
		{LinearDecrease, 1000, 20, 0},
	}
	for _, tt := range tests {
		if got := tt.p.At(tt.v, tt.t); got != tt.want {
			t.Errorf("%s.At(%d, %d) = %d, want %d", tt.p, tt.v, tt.t, got, tt.want)
		}
	}
}

func TestScenarioValidate(t *testing.T) {
	bad := []Scenario{
		{RPS: -1, RPSPattern: Steady, BusyPattern: Steady},
		{RPS: 1, RPSPattern: "zigzag", BusyPattern: Steady},
		{RPS: 1, RPSPattern: Steady, BusyPattern: ""},
		{RPS: 1, Busy: maxRate + 1, RPSPattern: Steady, BusyPattern: Steady},
	}
	for _, s := range bad {
		if _, err := Run(&bytes.Buffer{}, busy.Config{}, s); err == nil {
			t.Errorf("Run(%+v) accepted", s)
		}
	}
}

// Other combinations run the same way; linear growth converges later than
// steady traffic because the target keeps moving.
func TestLinearPatternsRun(t *testing.T) {
	var buf bytes.Buffer
	res, err := Run(&buf, busy.Config{}, Scenario{RPS: 2000, RPSPattern: LinearGrow, Busy: 500, BusyPattern: LinearDecrease})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "start rps=2000 (linear_grow) throttled=0 busy=500 (linear_decrease)") {
		t.Fatalf("unexpected header:\n%s", buf.String())
	}
	if !res.Converged {
		t.Fatalf("did not converge:\n%s", buf.String())
	}
}

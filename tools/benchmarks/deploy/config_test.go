package deploy

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" for valid
	}{
		{"zero means the defaults", Config{}, ""},
		{"short", shortConfig(AllRows...), ""},
		{"empty rows", Config{Rows: []Row{}}, "Rows is empty"},
		{"unknown row", Config{Rows: []Row{"grpc"}}, `Rows holds "grpc"`},
		{"row twice", Config{Rows: []Row{RowDNS, RowDNS}}, `Rows holds "dns" twice`},
		{"instances", Config{Instances: MaxInstances + 1}, "Instances is 17"},
		{"rate", Config{Rate: -1}, "Rate is -1"},
		{"clients", Config{Clients: -1}, "Clients is -1"},
		{"replacements", Config{Replacements: MaxReplacements + 1}, "Replacements is 101"},
		{"steady", Config{Steady: millis.Duration(time.Millisecond)}, "Steady is 1ms"},
		{"settle", Config{Settle: millis.Duration(-time.Second)}, "Settle is -1s"},
		{"service time", Config{ServiceTime: millis.Duration(2 * time.Second)}, "ServiceTime is 2s"},
		{"timeout", Config{Timeout: millis.Duration(-time.Second)}, "Timeout is -1s"},
		{"dns period", Config{DNSPeriod: millis.Duration(time.Millisecond)}, "DNSPeriod is 1ms"},
		{"min interval above the period", Config{DNSMinInterval: millis.Duration(3 * time.Second)}, "DNSMinInterval is 3s"},
		{"grace inside a DNS period", Config{Grace: millis.Duration(time.Second)}, "Grace is 1s, must outlast DNSPeriod (2s)"},
		{"a short grace without the dns row", Config{Rows: []Row{RowEtcd}, Grace: millis.Duration(time.Second)}, ""},
		{"quiet", Config{Quiet: millis.Duration(-time.Second)}, "Quiet is -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if c.Instances != 4 || c.Rate != 1000 || c.Replacements != 8 || c.Grace.D() != 5*time.Second || len(c.Rows) != len(AllRows) {
		t.Errorf("defaults %+v: want 4 instances, 1000 calls/s, 8 replacements, a 5s grace, every row", c)
	}
}

func TestParseRows(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Row
		err  string
	}{
		{"all", AllRows, ""},
		{"dns", []Row{RowDNS}, ""},
		{"tchannel, etcd", []Row{RowTChannel, RowEtcd}, ""},
		{"dns,dns", nil, "given twice"},
		{"consul", nil, `row "consul", want one of etcd, dns, static, tchannel`},
		{"", nil, `row ""`},
	} {
		got, err := ParseRows(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseRows(%q): %v, want an error containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(rowStrings(got), ",") != strings.Join(rowStrings(tc.want), ",") {
			t.Errorf("ParseRows(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func rowStrings(rows []Row) []string {
	s := make([]string, len(rows))
	for i, r := range rows {
		s[i] = string(r)
	}
	return s
}

// Every row draws the same settles, each within a quarter of Settle.
func TestSettleSchedule(t *testing.T) {
	cfg := Config{Settle: millis.Duration(2 * time.Second), Replacements: 50}
	a, b := settleSchedule(cfg), settleSchedule(cfg)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("settle %d: %v then %v; want the same in every row", i, a[i], b[i])
		}
		if a[i] < 1500*time.Millisecond || a[i] > 2500*time.Millisecond {
			t.Errorf("settle %d is %v, want within [1.5s, 2.5s]", i, a[i])
		}
	}
	if a[0] == a[1] && a[1] == a[2] {
		t.Errorf("settles %v: want them to vary", a[:3])
	}
}

package deploy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// Row is one way of deploying: how servers come and go and how clients
// find them.
type Row string

// The rows. RowEtcd's clients follow discovery/etcd, RowDNS's look up SRV
// records served in this process every Config.DNSPeriod; in both a new
// server comes on a new port, then the old one Shutdowns. RowStatic's
// clients have a fixed peer list and RowTChannel's are plain tchannel-go:
// each instance is replaced in place, the old one Closing first.
const (
	RowEtcd     Row = "etcd"
	RowDNS      Row = "dns"
	RowStatic   Row = "static"
	RowTChannel Row = "tchannel"
)

// AllRows lists every row, in Run's default order.
var AllRows = []Row{RowEtcd, RowDNS, RowStatic, RowTChannel}

// Title is the row's name in the table.
func (r Row) Title() string {
	return cmp.Or(map[Row]string{
		RowEtcd:     "Sluice, etcd discovery, Shutdown",
		RowDNS:      "Sluice, DNS SRV discovery, Shutdown",
		RowStatic:   "Sluice, static peers, Close in place",
		RowTChannel: "tchannel-go, static peers, Close in place",
	}[r], string(r))
}

// discovery reports whether the row's clients follow a registry.
func (r Row) discovery() bool { return r == RowEtcd || r == RowDNS }

// ParseRows reads a comma-separated list of rows ("etcd,dns"), or "all".
func ParseRows(s string) ([]Row, error) {
	if s == "all" {
		return slices.Clone(AllRows), nil
	}
	var rows []Row
	for _, f := range strings.Split(s, ",") {
		r := Row(strings.TrimSpace(f))
		if !slices.Contains(AllRows, r) {
			return nil, fmt.Errorf("deploy: row %q, want one of %s, or all", f, benchrun.Names(AllRows))
		}
		if slices.Contains(rows, r) {
			return nil, fmt.Errorf("deploy: row %q given twice", r)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// Config is one rolling-deploy comparison; zero fields mean the defaults.
type Config struct {
	// Rows to run, one after the other. nil means AllRows.
	Rows []Row `json:"rows"`
	// Instances is the size of the fleet. Default 4.
	Instances int `json:"instances"`
	// Rate is the calls per second, all clients together. Default 1,000.
	Rate float64 `json:"rate"`
	// Clients share the load, each with its own resolver and
	// connections. Default 2.
	Clients int `json:"clients"`
	// Replacements is how many instances are replaced, each in turn.
	// Default 2 x Instances.
	Replacements int `json:"replacements"`
	// Warmup is the load's first stretch, left out. Default 1 s.
	Warmup millis.Duration `json:"warmup_ms"`
	// Steady is the stretch before the first replacement, the deploys'
	// baseline. Default 5 s.
	Steady millis.Duration `json:"steady_ms"`
	// Settle is the mean wait after each replacement: Settle times a
	// factor in [0.75, 1.25], the same ones in every row (settleSchedule).
	// Default 2.5 s.
	Settle millis.Duration `json:"settle_ms"`
	// ServiceTime is how long a server takes to answer. Default 1 ms.
	ServiceTime millis.Duration `json:"service_time_ms"`
	// Timeout is each call's deadline. Default 1 s.
	Timeout millis.Duration `json:"timeout_ms"`
	// DNSPeriod and DNSMinInterval are RowDNS's discovery/dns Period and
	// MinInterval. Defaults 2 s and 1 s.
	DNSPeriod      millis.Duration `json:"dns_period_ms"`
	DNSMinInterval millis.Duration `json:"dns_min_interval_ms"`
	// Grace and Quiet are the servers' channel.ShutdownConfig; Grace must
	// outlast DNSPeriod. Defaults 2 x DNSPeriod + 1 s, and 1 s.
	Grace millis.Duration `json:"grace_ms"`
	Quiet millis.Duration `json:"quiet_ms"`
	// EtcdEndpoint is RowEtcd's etcd; "" has Run start one
	// (internal/etcdserver): EtcdBinary, or the one installed, or with
	// EmbeddedEtcd or none installed, one in this process.
	EtcdEndpoint string `json:"etcd_endpoint"`
	EtcdBinary   string `json:"etcd_binary"`
	EmbeddedEtcd bool   `json:"embedded_etcd"`
	// Progress, if not nil, is told what Run is doing.
	Progress func(string) `json:"-"`
}

// Bounds of a Config.
const (
	MaxInstances    = 16
	MaxRate         = 20_000
	MaxClients      = 16
	MaxReplacements = 100
	MaxStretch      = 10 * time.Minute // Warmup, Steady, Settle
	MaxTimeout      = time.Minute
)

// Defaults returns the defaults of a Config's zero fields, for a
// command's flags, but Rows, Replacements and Grace's, which follow other
// fields.
func Defaults() Config {
	c := Config{}.withDefaults()
	c.Rows, c.Replacements, c.Grace = nil, 0, 0
	return c
}

func (c Config) withDefaults() Config {
	if c.Rows == nil {
		c.Rows = slices.Clone(AllRows)
	}
	c.Instances = cmp.Or(c.Instances, 4)
	c.Rate = cmp.Or(c.Rate, 1000)
	c.Clients = cmp.Or(c.Clients, 2)
	c.Replacements = cmp.Or(c.Replacements, 2*c.Instances)
	c.Warmup = cmp.Or(c.Warmup, millis.Duration(time.Second))
	c.Steady = cmp.Or(c.Steady, millis.Duration(5*time.Second))
	c.Settle = cmp.Or(c.Settle, millis.Duration(2500*time.Millisecond))
	c.ServiceTime = cmp.Or(c.ServiceTime, millis.Duration(time.Millisecond))
	c.Timeout = cmp.Or(c.Timeout, millis.Duration(time.Second))
	c.DNSPeriod = cmp.Or(c.DNSPeriod, millis.Duration(2*time.Second))
	c.DNSMinInterval = cmp.Or(c.DNSMinInterval, millis.Duration(time.Second))
	c.Grace = cmp.Or(c.Grace, 2*c.DNSPeriod+millis.Duration(time.Second))
	c.Quiet = cmp.Or(c.Quiet, millis.Duration(time.Second))
	return c
}

// Validate reports the first field out of range, naming it.
func (c Config) Validate() error {
	if len(c.Rows) == 0 && c.Rows != nil {
		return fmt.Errorf("deploy: Rows is empty; give at least one of %s (nil means all)", benchrun.Names(AllRows))
	}
	for i, r := range c.Rows {
		if !slices.Contains(AllRows, r) {
			return fmt.Errorf("deploy: Rows holds %q, want rows among %s", r, benchrun.Names(AllRows))
		}
		if slices.Contains(c.Rows[:i], r) {
			return fmt.Errorf("deploy: Rows holds %q twice", r)
		}
	}
	c = c.withDefaults()
	switch {
	case c.Instances < 1 || c.Instances > MaxInstances:
		return fmt.Errorf("deploy: Instances is %d, must be in [1, %d]", c.Instances, MaxInstances)
	case !(c.Rate > 0 && c.Rate <= MaxRate):
		return fmt.Errorf("deploy: Rate is %v, must be in (0, %d]", c.Rate, MaxRate)
	case c.Clients < 1 || c.Clients > MaxClients:
		return fmt.Errorf("deploy: Clients is %d, must be in [1, %d]", c.Clients, MaxClients)
	case c.Replacements < 1 || c.Replacements > MaxReplacements:
		return fmt.Errorf("deploy: Replacements is %d, must be in [1, %d]", c.Replacements, MaxReplacements)
	case c.ServiceTime < 0 || c.ServiceTime.D() > time.Second:
		return fmt.Errorf("deploy: ServiceTime is %v, must be in [0, 1s]", c.ServiceTime)
	case c.Timeout < 0 || c.Timeout.D() > MaxTimeout:
		return fmt.Errorf("deploy: Timeout is %v, must be in (0, %v]", c.Timeout, MaxTimeout)
	case c.DNSPeriod.D() < 100*time.Millisecond || c.DNSPeriod.D() > time.Minute:
		return fmt.Errorf("deploy: DNSPeriod is %v, must be in [100ms, 1m]", c.DNSPeriod)
	case c.DNSMinInterval < 0 || c.DNSMinInterval > c.DNSPeriod:
		return fmt.Errorf("deploy: DNSMinInterval is %v, must be in (0, DNSPeriod = %v]", c.DNSMinInterval, c.DNSPeriod)
	case c.Quiet < 0 || c.Quiet.D() > time.Minute:
		return fmt.Errorf("deploy: Quiet is %v, must be in (0, 1m]", c.Quiet)
	case c.Grace < 0 || c.Grace.D() > MaxStretch:
		return fmt.Errorf("deploy: Grace is %v, must be in (0, %v]", c.Grace, MaxStretch)
	case c.Grace <= c.DNSPeriod && slices.Contains(c.Rows, RowDNS):
		return fmt.Errorf("deploy: Grace is %v, must outlast DNSPeriod (%v): a leaving server must serve until every client has looked its record up again", c.Grace, c.DNSPeriod)
	}
	for _, st := range []struct {
		name  string
		d, lo time.Duration
	}{{"Warmup", c.Warmup.D(), 0}, {"Steady", c.Steady.D(), 100 * time.Millisecond}, {"Settle", c.Settle.D(), 0}} {
		if st.d < st.lo || st.d > MaxStretch {
			return fmt.Errorf("deploy: %s is %v, must be in [%v, %v]", st.name, st.d, st.lo, MaxStretch)
		}
	}
	return nil
}

func (c Config) progress(format string, args ...any) {
	if c.Progress != nil {
		c.Progress(fmt.Sprintf(format, args...))
	}
}

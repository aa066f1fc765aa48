package dns

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/internal/config"
)

// Defaults of a Config: what its zero fields mean.
const (
	// DefaultPeriod is the time between two lookups when nothing asks for
	// one sooner.
	DefaultPeriod = 30 * time.Second
	// DefaultMinInterval is the least time between two lookups when
	// Updates.ResolveNow asks for them.
	DefaultMinInterval = 5 * time.Second
	// DefaultTimeout bounds one lookup.
	DefaultTimeout = 5 * time.Second
	// DefaultMaxPeers bounds the peers one lookup may find when
	// Config.MaxPeers is 0: discovery.DefaultMaxPeers, the largest set a
	// Channel's Client takes by default.
	DefaultMaxPeers = discovery.DefaultMaxPeers
)

// DefaultServerPort is the port of a DNS server named without one in a
// target (dns://10.0.0.2/...).
const DefaultServerPort = "53"

// Config configures a Resolver. Its zero fields mean the defaults; only
// Target is required. New rejects a Config that fails Validate.
type Config struct {
	// Target names what to look up: dns:///host:port (A/AAAA),
	// dns://SERVER/host:port (the same, asking the DNS server SERVER), or
	// dns:///name without a port (SRV). See the package doc. Required.
	Target string
	// Period is the time from the end of one lookup to the next when
	// nothing asks for one sooner, > 0. 0 means DefaultPeriod (30 s).
	Period time.Duration
	// MinInterval is the least time from the end of one lookup to a
	// lookup that Updates.ResolveNow asks for, so that peers failing
	// together do not flood the DNS server. 0 means DefaultMinInterval
	// (5 s); a value above Period counts as Period.
	MinInterval time.Duration
	// Timeout bounds one lookup, an SRV lookup and the lookups of its
	// targets together. It is wall-clock time (a context deadline), whatever
	// the Clock. 0 means DefaultTimeout (5 s).
	Timeout time.Duration
	// Resolver does the lookups. nil means the system's resolver (the
	// one net.DefaultResolver is), or, when the target names a DNS server,
	// Go's resolver asking that server over UDP, and TCP when an answer is
	// too long for UDP. Either way its queries end with the lookup: one cut
	// short by Timeout, or by Resolve returning, leaves no query behind. A
	// Resolver set here is used as it is; unless its Dial closes the
	// connection when the query's context ends, a query cut short goes on
	// (and holds a goroutine) until /etc/resolv.conf's timeout. A target
	// that names a DNS server cannot also have a Resolver: the server would
	// be ignored.
	Resolver *net.Resolver
	// MaxPeers bounds the peers one lookup may find: the addresses of an
	// A/AAAA answer, or of an SRV answer's records times their targets'
	// addresses, counted as the targets' answers come, so that a
	// lookup stops (and its remaining target lookups are cancelled) once
	// it is over, before a set is built. A lookup over it is a failure
	// naming the bound, reported with Updates.Error: the Channel's Client keeps
	// the last good set. 0 means DefaultMaxPeers.
	MaxPeers int
	// Clock times the period and the rate limit; nil means clock.Real.
	Clock clock.Clock
}

// pkg names this package in configuration errors.
const pkg = "dns"

// Validate reports the first field that breaks its rule, as a
// *retry.FieldError naming it and what it must be. Zero fields other than Target are valid: they mean the
// defaults.
func (c Config) Validate() error {
	t, why := parseTarget(c.Target)
	if why != "" {
		return config.Errorf(pkg, "Config.Target", c.Target, "must be a DNS target (%s); write %s", why, targetForms)
	}
	for _, f := range []struct {
		name   string
		v, def time.Duration
	}{
		{"Period", c.Period, DefaultPeriod},
		{"MinInterval", c.MinInterval, DefaultMinInterval},
		{"Timeout", c.Timeout, DefaultTimeout},
	} {
		if f.v < 0 {
			return config.Errorf(pkg, "Config."+f.name, f.v, "must be >= 0 (0 means the default, %v)", f.def)
		}
	}
	if c.MaxPeers < 0 {
		return config.Errorf(pkg, "Config.MaxPeers", c.MaxPeers, "must be >= 0 (0 means the default, %d)", DefaultMaxPeers)
	}
	if c.Resolver != nil && t.Server != "" {
		return config.Errorf(pkg, "Config.Resolver", config.Verbatim("set"), "while Target %q names the DNS server %s; set one or the other (dns:///%s asks the Resolver)", c.Target, t.Server, t.name())
	}
	return nil
}

// withDefaults returns c with its zero fields set to their defaults and
// MinInterval capped at Period.
func (c Config) withDefaults() Config {
	if c.Period == 0 {
		c.Period = DefaultPeriod
	}
	if c.MinInterval == 0 {
		c.MinInterval = DefaultMinInterval
	}
	c.MinInterval = min(c.MinInterval, c.Period)
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxPeers == 0 {
		c.MaxPeers = DefaultMaxPeers
	}
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	return c
}

// Target is a parsed target.
type Target struct {
	// Server is the DNS server to ask, host:port (port 53 if the target
	// gives none); "" means the system's resolver.
	Server string
	// Host is the name to look up, or an IP address (which needs a Port).
	// IPv6 addresses are kept without brackets.
	Host string
	// Port is the peers' port, "" for an SRV lookup.
	Port string
}

// SRV reports whether the target is looked up as SRV records (it has no
// port).
func (t Target) SRV() bool { return t.Port == "" }

// String returns the target in its canonical form,
// dns://[SERVER]/host[:port].
func (t Target) String() string { return "dns://" + t.Server + "/" + t.name() }

func (t Target) name() string {
	if t.Port == "" {
		return t.Host
	}
	return net.JoinHostPort(t.Host, t.Port)
}

// targetForms shows the valid forms in errors.
const targetForms = "dns:///kv.example:4040, dns://10.0.0.2:53/kv.example:4040, or dns:///_kv._tcp.example. for SRV records"

// ParseTarget parses a target in gRPC's form: dns:///host:port,
// dns://SERVER/host:port, or either without the port for an SRV lookup
// (see the package doc). dns:host:port, without the slashes, is accepted
// too. The scheme is case-insensitive.
func ParseTarget(s string) (Target, error) {
	t, why := parseTarget(s)
	if why != "" {
		return Target{}, fmt.Errorf("dns: Target %q: %s; write %s", s, why, targetForms)
	}
	return t, nil
}

// parseTarget is ParseTarget, returning why s is not a target instead of
// an error.
func parseTarget(s string) (Target, string) {
	bad := func(why string) (Target, string) { return Target{}, why }
	if len(s) < 4 || !strings.EqualFold(s[:4], "dns:") {
		if s == "" {
			return bad("empty, it is required")
		}
		return bad("must start with dns:")
	}
	var t Target
	rest := s[4:]
	if auth, ok := strings.CutPrefix(rest, "//"); ok {
		server, name, ok := strings.Cut(auth, "/")
		if !ok {
			return bad("no name after the DNS server (dns://SERVER/name)")
		}
		if server != "" {
			var err error
			if t.Server, err = parseServer(server); err != nil {
				return bad(err.Error())
			}
		}
		rest = name
	}
	if rest == "" {
		return bad("no name to look up")
	}
	if strings.Contains(rest, ":") {
		host, port, err := net.SplitHostPort(rest)
		if err != nil {
			if strings.HasPrefix(rest, "[") || net.ParseIP(rest) != nil {
				return bad(fmt.Sprintf("IP address %s has no port", rest))
			}
			return bad(fmt.Sprintf("%q is not host:port", rest))
		}
		if err := checkPort(port); err != nil {
			return bad(err.Error())
		}
		if net.ParseIP(hostOnly(host)) == nil {
			if err := checkName(host); err != nil {
				return bad(err.Error())
			}
		}
		t.Host, t.Port = host, port
		return t, ""
	}
	if net.ParseIP(rest) != nil {
		return bad(fmt.Sprintf("IP address %s has no port (an SRV lookup needs a name)", rest))
	}
	if err := checkName(rest); err != nil {
		return bad(err.Error())
	}
	t.Host = rest
	return t, ""
}

// parseServer returns the DNS server's host:port, port 53 if it has none.
func parseServer(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// No port: a name, an IPv4 address, or an IPv6 one in brackets or
		// not.
		host, port = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), DefaultServerPort
		if strings.Contains(host, ":") && net.ParseIP(host) == nil {
			return "", fmt.Errorf("DNS server %q is not host or host:port", s)
		}
	}
	if err := checkPort(port); err != nil {
		return "", fmt.Errorf("DNS server %q: %v", s, err)
	}
	if net.ParseIP(hostOnly(host)) == nil {
		if err := checkName(host); err != nil {
			return "", fmt.Errorf("DNS server %q: %v", s, err)
		}
	}
	return net.JoinHostPort(host, port), nil
}

// hostOnly drops an IPv6 zone (fe80::1%eth0) so that ParseIP accepts the
// address.
func hostOnly(h string) string {
	h, _, _ = strings.Cut(h, "%")
	return h
}

func checkPort(p string) error {
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return nil
}

// checkName accepts what DNS names hold in practice: labels of letters,
// digits, '-' and '_' (SRV's _service._proto), at most 63 bytes each and
// 253 in all, with or without the final dot.
func checkName(name string) error {
	n := strings.TrimSuffix(name, ".")
	if n == "" || len(n) > 253 {
		return fmt.Errorf("name %q is not a DNS name of 1 to 253 characters", name)
	}
	for label := range strings.SplitSeq(n, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("name %q has a label that is empty or longer than 63 characters", name)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Errorf("name %q holds %q; DNS names hold letters, digits, '-', '_' and dots", name, r)
			}
		}
	}
	return nil
}

package etcd_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/discovery/etcd"
	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
)

func TestResolverConfigValidate(t *testing.T) {
	cli := newClient(t, "http://"+testnet.Refused(t))
	ok := etcd.ResolverConfig{Client: cli, Prefix: prefix}
	tests := []struct {
		name string
		edit func(*etcd.ResolverConfig)
		want string // in the error; "" for none
	}{
		{"the zero values", func(*etcd.ResolverConfig) {}, ""},
		{"all set", func(c *etcd.ResolverConfig) {
			c.CheckInterval, c.NoResync, c.Timeout, c.Backoff = time.Second, true, time.Second, testBackoff
		}, ""},
		{"no client", func(c *etcd.ResolverConfig) { c.Client = nil }, "etcd: ResolverConfig.Client is nil, must be a connected etcd client"},
		{"no prefix", func(c *etcd.ResolverConfig) { c.Prefix = "" }, "ResolverConfig.Prefix is \"\""},
		{"only slashes", func(c *etcd.ResolverConfig) { c.Prefix = "//" }, "ResolverConfig.Prefix is \"//\""},
		{"negative check", func(c *etcd.ResolverConfig) { c.CheckInterval = -1 }, "ResolverConfig.CheckInterval is -1ns, must be >= 0 (0 means the default, 5s)"},
		{"negative resync", func(c *etcd.ResolverConfig) { c.ResyncInterval = -1 }, "ResolverConfig.ResyncInterval is -1ns, must be >= 0 (0 means the default, 5m0s; NoResync means never)"},
		{"resync and no resync", func(c *etcd.ResolverConfig) { c.ResyncInterval, c.NoResync = time.Minute, true }, "ResolverConfig.ResyncInterval is 1m0s, must be 0 when NoResync is set"},
		{"negative timeout", func(c *etcd.ResolverConfig) { c.Timeout = -1 }, "ResolverConfig.Timeout is -1ns, must be >= 0 (0 means the default, 5s)"},
		{"backoff max below initial", func(c *etcd.ResolverConfig) {
			c.Backoff = backoff.Exponential{Initial: time.Second, Max: time.Millisecond, Multiplier: 2}
		}, "etcd: ResolverConfig.Backoff.Max is 1ms, must be >= Initial (1s)"},
		{"backoff multiplier", func(c *etcd.ResolverConfig) {
			c.Backoff = backoff.Exponential{Initial: time.Second, Max: time.Second, Multiplier: 0.5}
		}, "ResolverConfig.Backoff.Multiplier is 0.5"},
	}
	for _, tt := range tests {
		c := ok
		tt.edit(&c)
		err := c.Validate()
		if _, nerr := etcd.NewResolver(c); (err == nil) != (nerr == nil) {
			t.Errorf("%s: Validate says %v, NewResolver %v", tt.name, err, nerr)
		}
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

func TestRegistrarConfigValidate(t *testing.T) {
	cli := newClient(t, "http://"+testnet.Refused(t))
	ok := etcd.RegistrarConfig{Client: cli, Prefix: prefix}
	tests := []struct {
		name string
		edit func(*etcd.RegistrarConfig)
		want string
	}{
		{"the zero values", func(*etcd.RegistrarConfig) {}, ""},
		{"all set", func(c *etcd.RegistrarConfig) {
			c.TTL, c.Weight, c.Metadata, c.Backoff = 3*time.Second, 2, map[string]any{"zone": "a"}, testBackoff
		}, ""},
		{"no client", func(c *etcd.RegistrarConfig) { c.Client = nil }, "RegistrarConfig.Client is nil"},
		{"no prefix", func(c *etcd.RegistrarConfig) { c.Prefix = "/" }, "RegistrarConfig.Prefix is \"/\""},
		{"sub-second TTL", func(c *etcd.RegistrarConfig) { c.TTL = 500 * time.Millisecond }, "RegistrarConfig.TTL is 500ms, must be a whole number of seconds >= 1s (0 means the default, 10s)"},
		{"fractional TTL", func(c *etcd.RegistrarConfig) { c.TTL = 1500 * time.Millisecond }, "RegistrarConfig.TTL is 1.5s"},
		{"negative TTL", func(c *etcd.RegistrarConfig) { c.TTL = -time.Second }, "RegistrarConfig.TTL is -1s"},
		{"negative weight", func(c *etcd.RegistrarConfig) { c.Weight = -1 }, "RegistrarConfig.Weight is -1, must be 0 (none written) or a number in [1e-06, 1e+09]"},
		{"weight below the least", func(c *etcd.RegistrarConfig) { c.Weight = 1e-7 }, "RegistrarConfig.Weight is 1e-07, must be 0"},
		{"weight above the most", func(c *etcd.RegistrarConfig) { c.Weight = 2e9 }, "RegistrarConfig.Weight is 2e+09, must be 0"},
		{"NaN weight", func(c *etcd.RegistrarConfig) { c.Weight = math.NaN() }, "RegistrarConfig.Weight is NaN"},
		{"metadata not JSON", func(c *etcd.RegistrarConfig) { c.Metadata = map[string]any{"f": func() {}} }, "RegistrarConfig.Metadata is not JSON, must be JSON-encodable"},
		{"backoff", func(c *etcd.RegistrarConfig) { c.Backoff = backoff.Exponential{Initial: -1} }, "etcd: RegistrarConfig.Backoff.Initial is -1ns, must be > 0"},
	}
	for _, tt := range tests {
		c := ok
		tt.edit(&c)
		err := c.Validate()
		if _, nerr := etcd.NewRegistrar(c); (err == nil) != (nerr == nil) {
			t.Errorf("%s: Validate says %v, NewRegistrar %v", tt.name, err, nerr)
		}
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

func TestParseTarget(t *testing.T) {
	tests := []struct {
		target    string
		endpoints []string
		prefix    string
		err       string
	}{
		{"etcd://127.0.0.1:2379/services/kv", []string{"127.0.0.1:2379"}, "services/kv", ""},
		{"etcd://10.0.0.1:2379,10.0.0.2:2379,etcd-3.example:2379/services/kv/", []string{"10.0.0.1:2379", "10.0.0.2:2379", "etcd-3.example:2379"}, "services/kv", ""},
		{"etcd://[::1]:2379//services/kv", []string{"[::1]:2379"}, "/services/kv", ""},
		{"etcd://127.0.0.1:2379/a/b:c/d", []string{"127.0.0.1:2379"}, "a/b:c/d", ""},
		{"dns:///kv.example:4040", nil, "", "does not start with etcd://"},
		{"127.0.0.1:2379/services/kv", nil, "", "does not start with etcd://"},
		{"etcd://127.0.0.1:2379", nil, "", "has no prefix"},
		{"etcd://127.0.0.1:2379/", nil, "", "has an empty prefix"},
		{"etcd://127.0.0.1:2379///", nil, "", "has an empty prefix"},
		{"etcd:///services/kv", nil, "", "names no etcd endpoint"},
		{"etcd://127.0.0.1/services/kv", nil, "", "endpoint 1: peer: bad host:port \"127.0.0.1\""},
		{"etcd://127.0.0.1:2379,,127.0.0.1:2380/services/kv", nil, "", "endpoint 2"},
		{"etcd://http://127.0.0.1:2379/services/kv", nil, "", "endpoint 1"},
	}
	for _, tt := range tests {
		eps, p, err := etcd.ParseTarget(tt.target)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseTarget(%q) = %v, %q, %v; want an error containing %q", tt.target, eps, p, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(eps, tt.endpoints) || p != tt.prefix {
			t.Errorf("ParseTarget(%q) = %v, %q, %v; want %v, %q", tt.target, eps, p, err, tt.endpoints, tt.prefix)
		}
	}
}

// A resolver's String parses back to its client's endpoints and prefix.
func TestStringParsesBack(t *testing.T) {
	addr := testnet.Refused(t)
	cli := newClient(t, "http://"+addr)
	for _, p := range []string{"services/kv", "/services/kv"} {
		r, err := etcd.NewResolver(etcd.ResolverConfig{Client: cli, Prefix: p + "/"})
		if err != nil {
			t.Fatal(err)
		}
		eps, got, err := etcd.ParseTarget(r.String())
		if err != nil || !slices.Equal(eps, []string{addr}) || got != p {
			t.Errorf("ParseTarget(%q) = %v, %q, %v; want [%s], %q", r.String(), eps, got, err, addr, p)
		}
	}
}

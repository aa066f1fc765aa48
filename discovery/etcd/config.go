package etcd

import (
	"cmp"
	"encoding/json"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/uber-go/tally/v4"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/balance"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/internal/balancing"
	cfgerr "github.com/sluice-rpc/sluice/internal/config"
)

const (
	// DefaultCheckInterval is how often a Resolver asks etcd for its
	// watch's progress when ResolverConfig.CheckInterval is 0.
	DefaultCheckInterval = 5 * time.Second
	// DefaultResyncInterval is how often a Resolver reads its prefix
	// afresh whatever happened, when ResolverConfig.ResyncInterval is 0.
	DefaultResyncInterval = 5 * time.Minute
	// DefaultTimeout bounds each Get of a read of the prefix when
	// ResolverConfig.Timeout is 0.
	DefaultTimeout = 5 * time.Second
	// DefaultTTL is a registration's lease time to live when
	// RegistrarConfig.TTL is 0: about how long etcd keeps the address of a
	// server that died without deregistering.
	DefaultTTL = 10 * time.Second
	// DefaultMaxKeys bounds the keys under a Resolver's prefix when
	// ResolverConfig.MaxKeys is 0: discovery.DefaultMaxPeers, the
	// largest set a Channel's Client takes by default.
	DefaultMaxKeys = discovery.DefaultMaxPeers
	// DefaultMaxValueSize bounds each key and each value under a
	// Resolver's prefix, in bytes, when ResolverConfig.MaxValueSize is 0.
	// An endpoint's JSON with a few metadata fields is about 100 bytes.
	DefaultMaxValueSize = 4 << 10
	// DefaultMaxBytes bounds the sum of the sizes of the keys and values
	// a Resolver keeps, when ResolverConfig.MaxBytes is 0: room for
	// DefaultMaxKeys entries of 800 bytes.
	DefaultMaxBytes = 8 << 20
)

// defaultBackoff returns the wait between failed attempts to read the
// prefix or to register, when a configuration's Backoff is the zero
// value: 100 ms after the first failure in a row, doubled per further
// failure, at most 5 s, each wait drawn from the upper half of that
// (equal jitter), so that the programs following one etcd do not all come
// back together after an outage.
func defaultBackoff() backoff.Exponential {
	return backoff.Exponential{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Multiplier: 2,
		Jitter: backoff.EqualJitter}
}

// ResolverConfig configures a Resolver. The zero value of each field but
// Client and Prefix means its default.
type ResolverConfig struct {
	// Client is the etcd client the Resolver reads and watches through;
	// the Resolver never closes it. Required.
	Client *clientv3.Client
	// Prefix is where the peers' keys are: PREFIX/<anything>, as
	// endpoints.NewManager(client, PREFIX) writes them. Trailing slashes
	// are dropped ("services/kv/" is "services/kv"); a leading one is kept
	// ("/services/kv" and "services/kv" are different prefixes in etcd).
	// Required.
	Prefix string
	// CheckInterval is how often the Resolver asks etcd for its watch's
	// progress; a request not answered within the next interval, or an
	// answer whose revision went backwards, makes it read the prefix
	// afresh. 0 means DefaultCheckInterval.
	CheckInterval time.Duration
	// ResyncInterval is how often the Resolver reads the prefix afresh in
	// any case, >= 0. 0 means DefaultResyncInterval, unless NoResync is
	// set.
	ResyncInterval time.Duration
	// NoResync makes the Resolver read the prefix afresh only when its
	// watch fails or its progress checks say so. ResyncInterval must then
	// be 0.
	NoResync bool
	// Timeout bounds each Get of a read of the prefix (a read takes one
	// Get per 16 keys). 0 means DefaultTimeout.
	Timeout time.Duration
	// Backoff spaces the attempts to read and watch the prefix after
	// failures in a row. The zero value means 100 ms doubled per failure,
	// at most 5 s, each wait drawn from the upper half of its ceiling
	// (equal jitter).
	Backoff backoff.Exponential
	// MaxKeys bounds the keys under the prefix. A prefix holding more is
	// a failure, found before any value is read (the first page's count)
	// or as the watch adds keys: the Resolver reports an error naming the
	// bound, keeps no set of its own, and the Channel's Client keeps the last good
	// one. 0 means DefaultMaxKeys.
	MaxKeys int
	// MaxValueSize bounds each key and each value, in bytes: a value (or
	// key) over it is left out unread, without being decoded, and
	// reported as an error naming its key (a key over it by its first
	// bytes and a digest), as a value that is not an endpoint's JSON is.
	// 0 means DefaultMaxValueSize.
	MaxValueSize int
	// MaxBytes bounds the sum of the sizes of the keys and values read,
	// but for those left out for MaxValueSize: a prefix holding more is
	// a failure, as for MaxKeys. It bounds what the Resolver holds and
	// decodes (Metadata included) whatever the registry holds. 0 means
	// DefaultMaxBytes.
	MaxBytes int
	// Clock times the checks and the backoff; nil means clock.Real.
	// etcd's client times its own requests on the wall clock.
	Clock clock.Clock
}

// pkg names this package in configuration errors.
const pkg = "etcd"

// Validate reports the first rule c breaks, in the order of the fields, as
// a *retry.FieldError naming the field, or nil.
func (c ResolverConfig) Validate() error {
	switch {
	case c.Client == nil:
		return cfgerr.Errorf(pkg, "ResolverConfig.Client", cfgerr.Verbatim("nil"), "must be a connected etcd client")
	case normalizePrefix(c.Prefix) == "":
		return cfgerr.Errorf(pkg, "ResolverConfig.Prefix", c.Prefix, "must be the prefix the peers are under, such as services/kv")
	case c.CheckInterval < 0:
		return cfgerr.Errorf(pkg, "ResolverConfig.CheckInterval", c.CheckInterval, "must be >= 0 (0 means the default, %v)", DefaultCheckInterval)
	case c.ResyncInterval < 0:
		return cfgerr.Errorf(pkg, "ResolverConfig.ResyncInterval", c.ResyncInterval, "must be >= 0 (0 means the default, %v; NoResync means never)", DefaultResyncInterval)
	case c.NoResync && c.ResyncInterval != 0:
		return cfgerr.Errorf(pkg, "ResolverConfig.ResyncInterval", c.ResyncInterval, "must be 0 when NoResync is set")
	case c.Timeout < 0:
		return cfgerr.Errorf(pkg, "ResolverConfig.Timeout", c.Timeout, "must be >= 0 (0 means the default, %v)", DefaultTimeout)
	}
	if err := validateBackoff("ResolverConfig", c.Backoff); err != nil {
		return err
	}
	switch {
	case c.MaxKeys < 0:
		return cfgerr.Errorf(pkg, "ResolverConfig.MaxKeys", c.MaxKeys, "must be >= 0 (0 means the default, %d)", DefaultMaxKeys)
	case c.MaxValueSize < 0:
		return cfgerr.Errorf(pkg, "ResolverConfig.MaxValueSize", c.MaxValueSize, "must be >= 0 (0 means the default, %d)", DefaultMaxValueSize)
	case c.MaxBytes < 0:
		return cfgerr.Errorf(pkg, "ResolverConfig.MaxBytes", c.MaxBytes, "must be >= 0 (0 means the default, %d)", DefaultMaxBytes)
	}
	return nil
}

func (c ResolverConfig) withDefaults() ResolverConfig {
	c.Prefix = normalizePrefix(c.Prefix)
	c.CheckInterval = cmp.Or(c.CheckInterval, DefaultCheckInterval)
	if !c.NoResync {
		c.ResyncInterval = cmp.Or(c.ResyncInterval, DefaultResyncInterval)
	}
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.MaxKeys = cmp.Or(c.MaxKeys, DefaultMaxKeys)
	c.MaxValueSize = cmp.Or(c.MaxValueSize, DefaultMaxValueSize)
	c.MaxBytes = cmp.Or(c.MaxBytes, DefaultMaxBytes)
	if c.Backoff == (backoff.Exponential{}) {
		c.Backoff = defaultBackoff()
	}
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	return c
}

// RegistrarConfig configures a Registrar. The zero value of each field but
// Client and Prefix means its default.
type RegistrarConfig struct {
	// Client is the etcd client the Registrar writes through; it never
	// closes it. Required.
	Client *clientv3.Client
	// Prefix is where the servers' keys go: PREFIX/<host:port>. Trailing
	// slashes are dropped, a leading one kept, as in ResolverConfig.
	// Required.
	Prefix string
	// TTL is the time to live of the lease the key is written under, in
	// whole seconds, at least 1 s: how long etcd keeps the address of a
	// server that stopped renewing it (etcd raises a TTL below its own
	// minimum, about 2 s with its default heartbeat). It also bounds each
	// grant and write. 0 means DefaultTTL.
	TTL time.Duration
	// Metadata is written beside the address (the endpoint's Metadata);
	// it must be JSON-encodable. nil means none.
	Metadata map[string]any
	// Weight, if not 0, is written as Metadata.weight: the server's share
	// of its service's traffic relative to the others' (unset counts as
	// 1). It must be 0 or in [balance.MinWeight, balance.MaxWeight], 1e-6
	// to 1e9: clients leave out a weight outside.
	Weight float64
	// Scope receives the registration metrics (stats.RegistrationRegistered,
	// ...); nil means nowhere.
	Scope tally.Scope
	// Backoff spaces the attempts to register after failures in a row.
	// The zero value means 100 ms doubled per failure, at most 5 s, each
	// wait drawn from the upper half of its ceiling (equal jitter).
	Backoff backoff.Exponential
	// Clock times the backoff and stamps the State; nil means clock.Real.
	Clock clock.Clock
	// Logger receives the Registrar's lines: at Warn each failure to
	// register or to keep a registration (the Registrar tries again after
	// a backoff), at Info a registration written again after one; at most
	// 10 at once and 10 a second. Nil means slog.Default(), read when a
	// line is written.
	Logger *slog.Logger
}

// Validate reports the first rule c breaks, in the order of the fields, as
// a *retry.FieldError naming the field, or nil.
func (c RegistrarConfig) Validate() error {
	switch {
	case c.Client == nil:
		return cfgerr.Errorf(pkg, "RegistrarConfig.Client", cfgerr.Verbatim("nil"), "must be a connected etcd client")
	case normalizePrefix(c.Prefix) == "":
		return cfgerr.Errorf(pkg, "RegistrarConfig.Prefix", c.Prefix, "must be the prefix the servers register under, such as services/kv")
	case c.TTL < 0 || c.TTL%time.Second != 0:
		return cfgerr.Errorf(pkg, "RegistrarConfig.TTL", c.TTL, "must be a whole number of seconds >= 1s (0 means the default, %v)", DefaultTTL)
	}
	if _, err := json.Marshal(c.Metadata); err != nil {
		return cfgerr.Errorf(pkg, "RegistrarConfig.Metadata", cfgerr.Verbatim("not JSON"), "must be JSON-encodable: %v", err)
	}
	if balancing.CheckWeight(c.Weight) != nil {
		// Clients leave out an entry whose weight breaks it: refused here,
		// a server does not register where no client will call it.
		return cfgerr.Errorf(pkg, "RegistrarConfig.Weight", c.Weight, "must be 0 (none written) or a number in [%g, %g]", balance.MinWeight, balance.MaxWeight)
	}
	return validateBackoff("RegistrarConfig", c.Backoff)
}

func (c RegistrarConfig) withDefaults() RegistrarConfig {
	c.Prefix = normalizePrefix(c.Prefix)
	c.TTL = cmp.Or(c.TTL, DefaultTTL)
	if c.Backoff == (backoff.Exponential{}) {
		c.Backoff = defaultBackoff()
	}
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	if c.Scope == nil {
		c.Scope = tally.NoopScope
	}
	// The registrar's own copy, with the weight in it.
	c.Metadata = maps.Clone(c.Metadata)
	if c.Weight != 0 {
		if c.Metadata == nil {
			c.Metadata = map[string]any{}
		}
		c.Metadata["weight"] = c.Weight
	}
	return c
}

func validateBackoff(config string, b backoff.Exponential) error {
	if b == (backoff.Exponential{}) {
		return nil // defaultBackoff()
	}
	return cfgerr.Nest(b.Validate(), "etcd", config+".Backoff")
}

// normalizePrefix drops prefix's trailing slashes.
func normalizePrefix(prefix string) string { return strings.TrimRight(prefix, "/") }

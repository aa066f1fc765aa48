package cli

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/hedge"
	"github.com/sluice-rpc/sluice/internal/localfile"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/serviceconfig"
)

// policyFlags give the called method a retry or hedging policy, from a
// service-config file or from flags (call and bench).
type policyFlags struct {
	config, retryCodes, hedgeCodes string
	retryMax, hedgeMax             int
	retryBackoff, hedgeDelay       time.Duration
	quantile, budget               float64 // --hedge-adaptive's, as window, floor and cap
	window                         int
	floor, cap                     time.Duration
}

// maxRetryBackoff bounds --retry-backoff: the policy's maxBackoff is ten
// times it, which must stay a valid duration, and no call waits that long.
const maxRetryBackoff = time.Hour

// addPolicyFlags registers the policy flags on fs; adaptive adds the
// adaptive hedging ones.
func addPolicyFlags(fs *flag.FlagSet, adaptive bool) *policyFlags {
	f := &policyFlags{}
	fs.StringVar(&f.config, "service-config", "", "a JSON service config `FILE` (gRPC's shape, with Sluice's extensions)")
	fs.IntVar(&f.retryMax, "retry-max", 0, "retry: maxAttempts `N` (>= 2) for this method; 0 means no retry policy from flags")
	fs.StringVar(&f.retryCodes, "retry-codes", "BUSY", "retry: retryable `CODES`, comma-separated")
	fs.DurationVar(&f.retryBackoff, "retry-backoff", 10*time.Millisecond, "retry: initial backoff (max is 10x)")
	fs.IntVar(&f.hedgeMax, "hedge-max", 0, "hedge: maxAttempts `N` (>= 2) for this method; 0 means no hedging from flags")
	delayDoc := "hedge: delay between hedged attempts (0 sends all at once)"
	if adaptive {
		delayDoc = "hedge: delay between hedged attempts (0 sends all at once; with --hedge-adaptive, the delay until enough latencies are seen)"
	}
	fs.DurationVar(&f.hedgeDelay, "hedge-delay", 0, delayDoc)
	fs.StringVar(&f.hedgeCodes, "hedge-codes", "BUSY", "hedge: non-fatal `CODES`, comma-separated")
	if adaptive {
		fs.Float64Var(&f.quantile, "hedge-adaptive", 0, "hedge: take the delay from this `QUANTILE` of recent latencies, e.g. 0.95 (0: a fixed delay)")
		fs.IntVar(&f.window, "hedge-window", 1000, "hedge: with --hedge-adaptive, the quantile is of the `N` most recent latencies")
		fs.DurationVar(&f.floor, "hedge-floor", time.Millisecond, "hedge: with --hedge-adaptive, the least delay")
		fs.DurationVar(&f.cap, "hedge-cap", 500*time.Millisecond, "hedge: with --hedge-adaptive, the most delay")
		fs.Float64Var(&f.budget, "hedge-budget", 0.1, "hedge: with --hedge-adaptive, at most this many extra attempts per call (0: no budget)")
	}
	return f
}

// validate reports a bad combination or value, naming the flag.
func (f *policyFlags) validate() error {
	switch {
	case f.config != "" && (f.retryMax != 0 || f.hedgeMax != 0):
		return errors.New("--service-config cannot be combined with --retry-max or --hedge-max")
	case f.retryMax != 0 && f.hedgeMax != 0:
		return errors.New("--retry-max and --hedge-max are exclusive: a method has a retry or a hedging policy")
	case f.quantile != 0 && f.hedgeMax == 0:
		return errors.New("--hedge-adaptive needs --hedge-max")
	case f.retryMax < 0 || f.retryMax == 1:
		return fmt.Errorf("--retry-max is %d, must be >= 2 (or 0 for none)", f.retryMax)
	case f.hedgeMax < 0 || f.hedgeMax == 1:
		return fmt.Errorf("--hedge-max is %d, must be >= 2 (or 0 for none)", f.hedgeMax)
	case f.hedgeDelay < 0:
		return fmt.Errorf("--hedge-delay is %v, must be >= 0", f.hedgeDelay)
	case f.retryBackoff <= 0 || f.retryBackoff > maxRetryBackoff:
		return fmt.Errorf("--retry-backoff is %v, must be in (0, %v] (the policy's maxBackoff is 10x)", f.retryBackoff, maxRetryBackoff)
	}
	return nil
}

// maxServiceConfigFile bounds --service-config's file: thousands of policies.
const maxServiceConfigFile = 1 << 20

// serviceConfig builds the service config of calls to service::method: the
// file's, or one policy from the flags, or nil when neither is given.
func (f *policyFlags) serviceConfig(service, method string) (*serviceconfig.Config, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	if f.config != "" {
		data, err := localfile.Read(f.config, maxServiceConfigFile, "a service config file")
		var cfg *serviceconfig.Config
		if err == nil {
			cfg, err = serviceconfig.Parse(data)
		}
		if err != nil {
			return nil, fmt.Errorf("--service-config %s: %w", f.config, err)
		}
		return cfg, nil
	}
	mc := serviceconfig.MethodConfig{Names: []serviceconfig.Name{{Service: service, Method: method}}}
	switch {
	case f.retryMax != 0:
		set, err := parseCodes("--retry-codes", f.retryCodes)
		if err != nil {
			return nil, err
		}
		mc.Retry = &retry.Policy{MaxAttempts: f.retryMax, InitialBackoff: f.retryBackoff, MaxBackoff: 10 * f.retryBackoff,
			BackoffMultiplier: 2, RetryableCodes: set}
	case f.hedgeMax != 0:
		set, err := parseCodes("--hedge-codes", f.hedgeCodes)
		if err != nil {
			return nil, err
		}
		mc.Hedge = &hedge.Policy{MaxAttempts: f.hedgeMax, HedgingDelay: f.hedgeDelay, NonFatalCodes: set}
		if f.quantile != 0 {
			a := hedge.Adaptive{Quantile: f.quantile, Window: f.window, Floor: f.floor, Cap: f.cap, Budget: f.budget}
			if err := a.Validate(); err != nil {
				return nil, adaptiveFlagError(err)
			}
			mc.Hedge.Adaptive = &a
		}
	default:
		return nil, nil
	}
	return serviceconfig.New([]serviceconfig.MethodConfig{mc}, nil)
}

func parseCodes(flagName, list string) (codes.Set, error) {
	var set codes.Set
	for _, s := range strings.Split(list, ",") {
		c, err := codes.Parse(s)
		if err != nil {
			return 0, fmt.Errorf("%s: %v", flagName, err)
		}
		set |= codes.NewSet(c)
	}
	return set, nil
}

// adaptiveFlagError restates an adaptive-delay validation error in terms of
// the flag that set the field.
func adaptiveFlagError(err error) error {
	flags := map[string]string{"Adaptive.Quantile": "--hedge-adaptive", "Adaptive.Window": "--hedge-window",
		"Adaptive.Floor": "--hedge-floor", "Adaptive.Cap": "--hedge-cap", "Adaptive.Budget": "--hedge-budget"}
	var fe *retry.FieldError
	if errors.As(err, &fe) && flags[fe.Field] != "" {
		return fmt.Errorf("%s is %s, %s", flags[fe.Field], fe.Value, fe.Rule)
	}
	return err
}

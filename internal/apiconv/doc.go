// Package apiconv holds only tests: they walk every configuration type of
// the library (found in the source, listed in configs_gen_test.go) and check
// the one configuration convention of STYLE.md: the zero value validates and
// means the defaults; an exported value-receiver Validate() error whose
// errors are deterministic *config.FieldError values naming the Go field and
// the rule; no negative sentinels; time through a Clock clock.Clock field,
// randomness through Rand func() float64, backoffs as backoff.Exponential,
// metrics through Scope tally.Scope.
package apiconv

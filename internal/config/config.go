// Package config holds the one error type every Sluice configuration check
// returns, so that a caller (a service config parser, a flag parser, a test)
// reads any package's configuration error the same way. The public name of
// the type is retry.FieldError; errors.As with a *retry.FieldError finds it
// in the error of any Validate of the library.
package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// FieldError says which field of a configuration broke which rule. Its
// message reads "<Package>: <Field> is <Value>, <Rule>", as
// "busy: Config.Ceiling is -1, must be a finite number >= 0".
type FieldError struct {
	// Package is the package whose configuration is wrong ("busy").
	Package string
	// Field is the Go path of the field from its configuration type:
	// "Config.Ceiling", "ClientConfig.Backoff.Initial",
	// "ClientConfig.Resources[\"db\"].Wants".
	Field string
	// Value is the offending value as text.
	Value string
	// Rule is what the value must be ("must be > 0").
	Rule string
}

// Error returns "<Package>: <Field> is <Value>, <Rule>".
func (e *FieldError) Error() string {
	return e.Package + ": " + e.Field + " is " + e.Value + ", " + e.Rule
}

// Errorf returns a *FieldError for field of a configuration of package pkg
// holding value, which breaks the rule (formatted with args).
func Errorf(pkg, field string, value any, rule string, args ...any) *FieldError {
	if len(args) > 0 {
		rule = fmt.Sprintf(rule, args...)
	}
	return &FieldError{Package: pkg, Field: field, Value: Text(value), Rule: rule}
}

// Text spells a configuration value for an error: durations as
// time.Duration prints them, floats in the shortest form, strings quoted.
func Text(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case time.Duration:
		return v.String()
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case fmt.Stringer:
		return v.String()
	}
	return fmt.Sprint(v)
}

// Nest re-presents an error of a nested configuration's Validate under the
// field path that holds it: a FieldError for "Exponential.Initial" nested
// at "ConnectConfig.Backoff" of package pkg becomes one for
// "ConnectConfig.Backoff.Initial" of pkg. Other errors are returned as
// they are; nil stays nil.
func Nest(err error, pkg, path string) error {
	var fe *FieldError
	if !errors.As(err, &fe) {
		return err
	}
	rest := fe.Field
	if i := strings.IndexAny(rest, ".["); i >= 0 {
		rest = rest[i:]
	} else {
		rest = ""
	}
	return &FieldError{Package: pkg, Field: path + rest, Value: fe.Value, Rule: fe.Rule}
}

// Same reports whether a and b are the same value (the same clock, say),
// false rather than a panic when their dynamic type is not comparable.
func Same(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}

// Verbatim is a value Text spells as it is, unquoted: a type's name
// ("*clock.Fake") where the value itself cannot be printed.
type Verbatim string

// String returns v.
func (v Verbatim) String() string { return string(v) }

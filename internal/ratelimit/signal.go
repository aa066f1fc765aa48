package ratelimit

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/pacing"
)

// Key returns the Windows key of dimension d for a call to
// service::method: ServiceKey(service) for pacing.DimensionUser and
// pacing.DimensionNone, MethodKey(service, method) for
// pacing.DimensionUserAPI.
func Key(d pacing.Dimension, service, method string) string {
	if d == pacing.DimensionUserAPI {
		return MethodKey(service, method)
	}
	return ServiceKey(service)
}

// ServiceKey is the Windows key of a service-wide quota: the service name.
func ServiceKey(service string) string { return service }

// MethodKey is the Windows key of one method's quota: "service::method".
func MethodKey(service, method string) string { return service + "::" + method }

// Empty reports whether the server sent no quota field at all.
func Empty(s pacing.Signal) bool { return s.Fields == 0 }

// Throttled reports whether s says the quota is spent: Remaining
// was sent and is 0.
func Throttled(s pacing.Signal) bool { return s.Has(pacing.FieldRemaining) && s.Remaining == 0 }

// Wait is how long s asks the caller to hold off: the larger of
// RetryAfter and, when the quota is spent, TimeLeft. It is 0 when the
// signal asks for no wait.
func Wait(s pacing.Signal) time.Duration {
	w := s.RetryAfter
	if Throttled(s) && s.TimeLeft > w {
		w = s.TimeLeft
	}
	return w
}

// RemainingFraction is s.Remaining/s.Limit clamped to [0, 1], with fallback as
// the limit when the signal has none. Plenty (-1), an unknown Remaining or
// an unknown limit give 1: no news is read as good news, so that a pacer
// facing a server that sends quota headers only on throttled responses
// (Aliyun without pacing.HeaderMode: debug) still recovers.
func RemainingFraction(s pacing.Signal, fallback int64) float64 {
	if !s.Has(pacing.FieldRemaining) || s.Remaining == pacing.RemainingPlenty {
		return 1
	}
	limit := fallback
	if s.Has(pacing.FieldLimit) && s.Limit > 0 {
		limit = s.Limit
	}
	if limit <= 0 {
		return 1
	}
	f := float64(s.Remaining) / float64(limit)
	switch {
	case f < 0:
		return 0
	case f > 1:
		return 1
	}
	return f
}

// ErrMalformedHeader is the sentinel every *HeaderError matches with
// errors.Is.
var ErrMalformedHeader = errors.New("pacing: malformed rate-limit header")

// HeaderError reports a quota header that ParseHeaders ignored because its
// value could not be read. Callers count it (a metric) and carry on.
type HeaderError struct {
	// Header is the header's name as sent.
	Header string
	// Value is the header's value, truncated to 64 bytes.
	Value string
	// Reason says what was wrong.
	Reason string
}

// Error returns "pacing: ignored header <name>: <value>: <reason>".
func (e *HeaderError) Error() string {
	return "pacing: ignored header " + e.Header + ": " + strconv.Quote(e.Value) + ": " + e.Reason
}

// Is makes errors.Is(err, ErrMalformedHeader) true.
func (e *HeaderError) Is(target error) bool { return target == ErrMalformedHeader }

func headerError(name, value, reason string) *HeaderError {
	if len(value) > 64 {
		value = value[:64]
	}
	return &HeaderError{Header: name, Value: value, Reason: reason}
}

// ParseHeaders reads the quota headers of a response received at now. Header
// names match case-insensitively. Every header that is present but
// malformed is ignored, as if absent, and reported in the returned error
// (one *HeaderError, or several joined with errors.Join; errors.Is(err,
// ErrMalformedHeader) holds); the pacing.Signal carries whatever the other headers
// said. It never panics, and it does not allocate unless a header is
// malformed.
//
// When both Aliyun dimensions are present the binding one is returned: the
// spent one (Remain 0) with the longer TimeLeft, else the one with the
// smaller remaining fraction. RateLimit-* headers fill the fields an Aliyun
// header did not send (and alone give pacing.DimensionNone); Retry-After is added
// to either.
func ParseHeaders(h map[string]string, now time.Time) (pacing.Signal, error) {
	var (
		user, userAPI, generic pacing.Signal
		haveUser, haveAPI      bool
		errs                   []error
	)
	for k, v := range h {
		switch len(k) { // cheap filter before the case-insensitive compares
		case len(pacing.HeaderUserAPI), len(pacing.HeaderUser), len(pacing.HeaderRemaining), len(pacing.HeaderLimit), len(pacing.HeaderRetryAfter):
		default:
			continue
		}
		switch {
		case strings.EqualFold(k, pacing.HeaderUserAPI):
			s, err := ParseQuota(v)
			if err != nil {
				errs = append(errs, headerError(k, v, err.Error()))
				continue
			}
			s.Dimension = pacing.DimensionUserAPI
			userAPI, haveAPI = s, true
		case strings.EqualFold(k, pacing.HeaderUser):
			s, err := ParseQuota(v)
			if err != nil {
				errs = append(errs, headerError(k, v, err.Error()))
				continue
			}
			s.Dimension = pacing.DimensionUser
			user, haveUser = s, true
		case strings.EqualFold(k, pacing.HeaderRemaining):
			n, ok := parseUint(trimSpace(v))
			if !ok {
				errs = append(errs, headerError(k, v, "want a non-negative integer"))
				continue
			}
			generic.Remaining = n
			generic.Fields |= pacing.FieldRemaining
		case strings.EqualFold(k, pacing.HeaderLimit):
			n, w, ok := parseLimit(v)
			if !ok {
				errs = append(errs, headerError(k, v, "want a non-negative integer, optionally with ;w=seconds"))
				continue
			}
			generic.Limit = n
			generic.Fields |= pacing.FieldLimit
			if w >= 0 {
				generic.Window = w
				generic.Fields |= pacing.FieldWindow
			}
		case strings.EqualFold(k, pacing.HeaderReset):
			n, ok := parseUint(trimSpace(v))
			if !ok {
				errs = append(errs, headerError(k, v, "want a non-negative integer number of seconds"))
				continue
			}
			var left time.Duration
			var at time.Time
			if n >= 1e9 { // a Unix time, not a delay
				at = time.Unix(n, 0)
				left = max(at.Sub(now), 0)
			} else {
				left = time.Duration(n) * time.Second
				at = now.Add(left)
			}
			generic.TimeLeft, generic.Reset = left, at
			generic.Fields |= pacing.FieldTimeLeft | pacing.FieldReset
		case strings.EqualFold(k, pacing.HeaderRetryAfter):
			d, ok := ParseRetryAfter(v, now)
			if !ok {
				errs = append(errs, headerError(k, v, "want delay-seconds or an HTTP date"))
				continue
			}
			generic.RetryAfter = d
			generic.Fields |= pacing.FieldRetryAfter
		}
	}
	var s pacing.Signal
	switch {
	case haveUser && haveAPI:
		s = binding(user, userAPI)
	case haveUser:
		s = user
	case haveAPI:
		s = userAPI
	}
	s = merge(s, generic)
	var err error
	switch len(errs) {
	case 0:
	case 1:
		err = errs[0]
	default:
		err = errors.Join(errs...)
	}
	return s, err
}

// binding returns whichever of two dimensions limits the caller.
func binding(a, b pacing.Signal) pacing.Signal {
	ta, tb := Throttled(a), Throttled(b)
	switch {
	case ta && tb:
		if b.TimeLeft > a.TimeLeft {
			return b
		}
		return a
	case ta:
		return a
	case tb:
		return b
	}
	if RemainingFraction(b, 0) < RemainingFraction(a, 0) {
		return b
	}
	return a
}

// merge fills the fields of s that g has and s lacks.
func merge(s, g pacing.Signal) pacing.Signal {
	missing := g.Fields &^ s.Fields
	if missing&pacing.FieldRemaining != 0 {
		s.Remaining = g.Remaining
	}
	if missing&pacing.FieldLimit != 0 {
		s.Limit = g.Limit
	}
	if missing&pacing.FieldWindow != 0 {
		s.Window = g.Window
	}
	if missing&pacing.FieldTimeLeft != 0 {
		s.TimeLeft = g.TimeLeft
	}
	if missing&pacing.FieldReset != 0 {
		s.Reset = g.Reset
	}
	if missing&pacing.FieldRetryAfter != 0 {
		s.RetryAfter = g.RetryAfter
	}
	s.Fields |= missing
	return s
}

// errQuota* are the reasons ParseQuota gives; fixed values so the hot path
// does not allocate.
var (
	errQuotaPair   = errors.New("want Name:value pairs separated by commas")
	errQuotaNumber = errors.New("a field is not an integer in its range")
	errQuotaEmpty  = errors.New("no known field")
)

// ParseQuota reads the value of an Aliyun quota header
// ("Remain:1,Limit:2,Time:1000,TimeLeft:122,Reset:1637835220000"): Remain
// (>= -1, where -1 is pacing.RemainingPlenty), Limit (>= 0), Time and TimeLeft
// (milliseconds, >= 0) and Reset (a Unix time in milliseconds, >= 0). Names
// match case-insensitively, spaces around names and values are ignored,
// unknown names are skipped, and a value with no known field or any field
// out of range is an error. The returned Signal has DimensionNone. It does
// not allocate.
func ParseQuota(v string) (pacing.Signal, error) {
	var s pacing.Signal
	for len(v) > 0 {
		var pair string
		if i := strings.IndexByte(v, ','); i >= 0 {
			pair, v = v[:i], v[i+1:]
		} else {
			pair, v = v, ""
		}
		pair = trimSpace(pair)
		if pair == "" {
			continue
		}
		i := strings.IndexByte(pair, ':')
		if i < 0 {
			return pacing.Signal{}, errQuotaPair
		}
		name, val := trimSpace(pair[:i]), trimSpace(pair[i+1:])
		switch {
		case strings.EqualFold(name, "Remain"):
			n, ok := parseInt(val)
			if !ok || n < pacing.RemainingPlenty {
				return pacing.Signal{}, errQuotaNumber
			}
			s.Remaining = n
			s.Fields |= pacing.FieldRemaining
		case strings.EqualFold(name, "Limit"):
			n, ok := parseUint(val)
			if !ok {
				return pacing.Signal{}, errQuotaNumber
			}
			s.Limit = n
			s.Fields |= pacing.FieldLimit
		case strings.EqualFold(name, "Time"):
			d, ok := parseMillis(val)
			if !ok {
				return pacing.Signal{}, errQuotaNumber
			}
			s.Window = d
			s.Fields |= pacing.FieldWindow
		case strings.EqualFold(name, "TimeLeft"):
			d, ok := parseMillis(val)
			if !ok {
				return pacing.Signal{}, errQuotaNumber
			}
			s.TimeLeft = d
			s.Fields |= pacing.FieldTimeLeft
		case strings.EqualFold(name, "Reset"):
			n, ok := parseUint(val)
			if !ok || n > maxUnixMilli {
				return pacing.Signal{}, errQuotaNumber
			}
			s.Reset = time.UnixMilli(n)
			s.Fields |= pacing.FieldReset
		}
	}
	if s.Fields == 0 {
		return pacing.Signal{}, errQuotaEmpty
	}
	return s, nil
}

// maxUnixMilli bounds Reset to the times whose UnixNano fits an int64 (up
// to the year 2262), so that arithmetic on Reset stays exact.
const maxUnixMilli = math.MaxInt64 / int64(time.Millisecond)

// httpDateLayouts are the three date formats HTTP/1.1 accepts (RFC 9110,
// section 5.6.7), the preferred IMF-fixdate first.
var httpDateLayouts = [...]string{
	"Mon, 02 Jan 2006 15:04:05 GMT",
	"Monday, 02-Jan-06 15:04:05 GMT",
	"Mon Jan _2 15:04:05 2006",
}

// ParseRetryAfter reads a Retry-After value received at now: a
// non-negative number of seconds, or an HTTP date (a date in the past gives
// 0). It reports false for anything else. A number of seconds too large for
// a time.Duration is an error, not a wrap-around.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = trimSpace(v)
	if n, ok := parseUint(v); ok {
		if n > int64(math.MaxInt64/int64(time.Second)) {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	if len(v) == 0 || v[0] < 'A' || v[0] > 'Z' { // every layout starts with a day name
		return 0, false
	}
	for _, layout := range httpDateLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			return max(t.Sub(now), 0), true
		}
	}
	return 0, false
}

// parseLimit reads "N" or IETF's "N, Q;w=S, ...": the first integer, and
// the first w= parameter of any quota policy (-1 when there is none).
func parseLimit(v string) (int64, time.Duration, bool) {
	first, rest := v, ""
	if i := strings.IndexAny(v, ",;"); i >= 0 {
		first, rest = v[:i], v[i:]
	}
	n, ok := parseUint(trimSpace(first))
	if !ok {
		return 0, 0, false
	}
	window := time.Duration(-1)
	for len(rest) > 0 {
		var p string
		if i := strings.IndexAny(rest[1:], ",;"); i >= 0 {
			p, rest = rest[:i+1], rest[i+1:]
		} else {
			p, rest = rest, ""
		}
		// p is ",item" or ";param"; only parameters matter here.
		if p[0] != ';' {
			if trimSpace(p[1:]) == "" {
				return 0, 0, false
			}
			continue
		}
		p = trimSpace(p[1:])
		if len(p) > 2 && (p[0] == 'w' || p[0] == 'W') && p[1] == '=' {
			s, ok := parseUint(trimSpace(p[2:]))
			if !ok || s > int64(math.MaxInt64/int64(time.Second)) {
				return 0, 0, false
			}
			if window < 0 {
				window = time.Duration(s) * time.Second
			}
		}
	}
	return n, window, true
}

// parseMillis reads a non-negative number of milliseconds that fits a
// time.Duration.
func parseMillis(v string) (time.Duration, bool) {
	n, ok := parseUint(v)
	if !ok || n > int64(math.MaxInt64/int64(time.Millisecond)) {
		return 0, false
	}
	return time.Duration(n) * time.Millisecond, true
}

// parseInt reads [-+]?[0-9]+ within int64.
func parseInt(v string) (int64, bool) {
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// parseUint reads one or more decimal digits within int64, nothing else
// (no sign: strconv.ParseUint accepts none).
func parseUint(v string) (int64, bool) {
	n, err := strconv.ParseUint(v, 10, 63)
	return int64(n), err == nil
}

// trimSpace drops ASCII spaces and tabs at both ends without allocating.
func trimSpace(s string) string { return strings.Trim(s, " \t") }

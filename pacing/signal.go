package pacing

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// Header names a server uses to send its quota, and the request header a
// client sets to ask for them on every response.
const (
	// HeaderUserAPI carries Aliyun's quota for the "API + User" dimension:
	// "Remain:1,Limit:2,Time:1000,TimeLeft:122,Reset:1637835220000".
	HeaderUserAPI = "X-RateLimit-User-API"
	// HeaderUser carries Aliyun's quota for the "User" dimension, in the
	// same format as HeaderUserAPI.
	HeaderUser = "X-RateLimit-User"
	// HeaderRemaining is the number of requests left in the current window
	// (Heroku, IETF draft), a non-negative integer.
	HeaderRemaining = "RateLimit-Remaining"
	// HeaderLimit is the window's quota: an integer, optionally followed by
	// IETF quota policies ("100, 100;w=60"); the first "w=" parameter gives
	// the window in seconds.
	HeaderLimit = "RateLimit-Limit"
	// HeaderReset is the number of seconds until the quota resets. A value
	// of 1e9 or more is read as a Unix time in seconds, as some servers send.
	HeaderReset = "RateLimit-Reset"
	// HeaderRetryAfter asks to wait before retrying: delay-seconds or an
	// HTTP date.
	HeaderRetryAfter = "Retry-After"
	// HeaderMode is the request header asking an Aliyun-style server to
	// send its quota headers on every response, not only throttled ones.
	HeaderMode = "X-RateLimit-Mode"
	// ModeDebug is the value of HeaderMode that asks for quota headers on
	// every response.
	ModeDebug = "debug"
)

// RemainingPlenty is the Remaining value an Aliyun server sends (Remain:-1)
// when the quota left is large enough not to matter.
const RemainingPlenty = -1

// Dimension says which quota a Signal describes.
type Dimension uint8

const (
	// DimensionNone: no quota header was seen, or only the dimensionless
	// RateLimit-* and Retry-After headers, which describe the whole service.
	DimensionNone Dimension = iota
	// DimensionUser is Aliyun's "User" dimension (X-RateLimit-User): the
	// caller's quota across all of a service's methods.
	DimensionUser
	// DimensionUserAPI is Aliyun's "API + User" dimension
	// (X-RateLimit-User-API): the caller's quota for one method.
	DimensionUserAPI
)

// String returns "none", "user" or "user-api".
func (d Dimension) String() string {
	switch d {
	case DimensionNone:
		return "none"
	case DimensionUser:
		return "user"
	case DimensionUserAPI:
		return "user-api"
	}
	return "Dimension(" + strconv.Itoa(int(d)) + ")"
}

// Key returns the Windows key of this dimension for a call to
// service::method: ServiceKey(service) for DimensionUser and DimensionNone,
// MethodKey(service, method) for DimensionUserAPI.
func (d Dimension) Key(service, method string) string {
	if d == DimensionUserAPI {
		return MethodKey(service, method)
	}
	return ServiceKey(service)
}

// ServiceKey is the Windows key of a service-wide quota: the service name.
func ServiceKey(service string) string { return service }

// MethodKey is the Windows key of one method's quota: "service::method".
func MethodKey(service, method string) string { return service + "::" + method }

// Field is a bit set naming the fields of a Signal the server sent.
type Field uint8

const (
	// FieldRemaining: Signal.Remaining was sent.
	FieldRemaining Field = 1 << iota
	// FieldLimit: Signal.Limit was sent.
	FieldLimit
	// FieldWindow: Signal.Window was sent.
	FieldWindow
	// FieldTimeLeft: Signal.TimeLeft was sent.
	FieldTimeLeft
	// FieldReset: Signal.Reset was sent.
	FieldReset
	// FieldRetryAfter: Signal.RetryAfter was sent.
	FieldRetryAfter
)

// Signal is what a response's headers say about the caller's quota. The
// zero value says nothing. Only the fields named in Fields were sent; the
// others are zero. It is a small value, copied freely.
type Signal struct {
	// Fields names the fields below that the server sent.
	Fields Field
	// Dimension is the quota the fields describe; when a response carries
	// both Aliyun dimensions, the binding one (see ParseHeaders).
	Dimension Dimension
	// Remaining is the number of requests left in the current window, >= 0,
	// or RemainingPlenty (-1) when the server says there are plenty.
	Remaining int64
	// Limit is the window's quota, >= 0.
	Limit int64
	// Window is the length of the quota window (Aliyun's Time), >= 0.
	Window time.Duration
	// TimeLeft is how long the current window still runs, >= 0: Aliyun's
	// TimeLeft, or RateLimit-Reset as a duration.
	TimeLeft time.Duration
	// Reset is when the next window starts (Aliyun's Reset, or the parse
	// time plus RateLimit-Reset).
	Reset time.Time
	// RetryAfter is how long Retry-After asks to wait, >= 0.
	RetryAfter time.Duration
}

// Has reports whether the server sent every field in f.
func (s Signal) Has(f Field) bool { return s.Fields&f == f }

// Empty reports whether the server sent no quota field at all.
func (s Signal) Empty() bool { return s.Fields == 0 }

// Throttled reports whether the signal says the quota is spent: Remaining
// was sent and is 0.
func (s Signal) Throttled() bool { return s.Has(FieldRemaining) && s.Remaining == 0 }

// Wait is how long the server asks the caller to hold off: the larger of
// RetryAfter and, when the quota is spent, TimeLeft. It is 0 when the
// signal asks for no wait.
func (s Signal) Wait() time.Duration {
	w := s.RetryAfter
	if s.Throttled() && s.TimeLeft > w {
		w = s.TimeLeft
	}
	return w
}

// RemainingFraction is Remaining/Limit clamped to [0, 1], with fallback as
// the limit when the signal has none. Plenty (-1), an unknown Remaining or
// an unknown limit give 1: no news is read as good news, so that a pacer
// facing a server that sends quota headers only on throttled responses
// (Aliyun without HeaderMode: debug) still recovers.
func (s Signal) RemainingFraction(fallback int64) float64 {
	if !s.Has(FieldRemaining) || s.Remaining == RemainingPlenty {
		return 1
	}
	limit := fallback
	if s.Has(FieldLimit) && s.Limit > 0 {
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
// ErrMalformedHeader) holds); the Signal carries whatever the other headers
// said. It never panics, and it does not allocate unless a header is
// malformed.
//
// When both Aliyun dimensions are present the binding one is returned: the
// spent one (Remain 0) with the longer TimeLeft, else the one with the
// smaller remaining fraction. RateLimit-* headers fill the fields an Aliyun
// header did not send (and alone give DimensionNone); Retry-After is added
// to either.
func ParseHeaders(h map[string]string, now time.Time) (Signal, error) {
	var (
		user, userAPI, generic Signal
		haveUser, haveAPI      bool
		errs                   []error
	)
	for k, v := range h {
		switch len(k) { // cheap filter before the case-insensitive compares
		case len(HeaderUserAPI), len(HeaderUser), len(HeaderRemaining), len(HeaderLimit), len(HeaderRetryAfter):
		default:
			continue
		}
		switch {
		case strings.EqualFold(k, HeaderUserAPI):
			s, err := ParseQuota(v)
			if err != nil {
				errs = append(errs, headerError(k, v, err.Error()))
				continue
			}
			s.Dimension = DimensionUserAPI
			userAPI, haveAPI = s, true
		case strings.EqualFold(k, HeaderUser):
			s, err := ParseQuota(v)
			if err != nil {
				errs = append(errs, headerError(k, v, err.Error()))
				continue
			}
			s.Dimension = DimensionUser
			user, haveUser = s, true
		case strings.EqualFold(k, HeaderRemaining):
			n, ok := parseUint(trimSpace(v))
			if !ok {
				errs = append(errs, headerError(k, v, "want a non-negative integer"))
				continue
			}
			generic.Remaining = n
			generic.Fields |= FieldRemaining
		case strings.EqualFold(k, HeaderLimit):
			n, w, ok := parseLimit(v)
			if !ok {
				errs = append(errs, headerError(k, v, "want a non-negative integer, optionally with ;w=seconds"))
				continue
			}
			generic.Limit = n
			generic.Fields |= FieldLimit
			if w >= 0 {
				generic.Window = w
				generic.Fields |= FieldWindow
			}
		case strings.EqualFold(k, HeaderReset):
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
			generic.Fields |= FieldTimeLeft | FieldReset
		case strings.EqualFold(k, HeaderRetryAfter):
			d, ok := ParseRetryAfter(v, now)
			if !ok {
				errs = append(errs, headerError(k, v, "want delay-seconds or an HTTP date"))
				continue
			}
			generic.RetryAfter = d
			generic.Fields |= FieldRetryAfter
		}
	}
	var s Signal
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
func binding(a, b Signal) Signal {
	ta, tb := a.Throttled(), b.Throttled()
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
	if b.RemainingFraction(0) < a.RemainingFraction(0) {
		return b
	}
	return a
}

// merge fills the fields of s that g has and s lacks.
func merge(s, g Signal) Signal {
	missing := g.Fields &^ s.Fields
	if missing&FieldRemaining != 0 {
		s.Remaining = g.Remaining
	}
	if missing&FieldLimit != 0 {
		s.Limit = g.Limit
	}
	if missing&FieldWindow != 0 {
		s.Window = g.Window
	}
	if missing&FieldTimeLeft != 0 {
		s.TimeLeft = g.TimeLeft
	}
	if missing&FieldReset != 0 {
		s.Reset = g.Reset
	}
	if missing&FieldRetryAfter != 0 {
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
// (>= -1, where -1 is RemainingPlenty), Limit (>= 0), Time and TimeLeft
// (milliseconds, >= 0) and Reset (a Unix time in milliseconds, >= 0). Names
// match case-insensitively, spaces around names and values are ignored,
// unknown names are skipped, and a value with no known field or any field
// out of range is an error. The returned Signal has DimensionNone. It does
// not allocate.
func ParseQuota(v string) (Signal, error) {
	var s Signal
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
			return Signal{}, errQuotaPair
		}
		name, val := trimSpace(pair[:i]), trimSpace(pair[i+1:])
		switch {
		case strings.EqualFold(name, "Remain"):
			n, ok := parseInt(val)
			if !ok || n < RemainingPlenty {
				return Signal{}, errQuotaNumber
			}
			s.Remaining = n
			s.Fields |= FieldRemaining
		case strings.EqualFold(name, "Limit"):
			n, ok := parseUint(val)
			if !ok {
				return Signal{}, errQuotaNumber
			}
			s.Limit = n
			s.Fields |= FieldLimit
		case strings.EqualFold(name, "Time"):
			d, ok := parseMillis(val)
			if !ok {
				return Signal{}, errQuotaNumber
			}
			s.Window = d
			s.Fields |= FieldWindow
		case strings.EqualFold(name, "TimeLeft"):
			d, ok := parseMillis(val)
			if !ok {
				return Signal{}, errQuotaNumber
			}
			s.TimeLeft = d
			s.Fields |= FieldTimeLeft
		case strings.EqualFold(name, "Reset"):
			n, ok := parseUint(val)
			if !ok || n > maxUnixMilli {
				return Signal{}, errQuotaNumber
			}
			s.Reset = time.UnixMilli(n)
			s.Fields |= FieldReset
		}
	}
	if s.Fields == 0 {
		return Signal{}, errQuotaEmpty
	}
	return s, nil
}

// maxUnixMilli bounds Reset to the times whose UnixNano fits an int64 (up
// to the year 2262), so that arithmetic on Reset stays exact.
const maxUnixMilli = math.MaxInt64 / int64(time.Millisecond)

// FormatQuota writes s in the Aliyun quota format, the inverse of
// ParseQuota: the fields s has, in the order Remain, Limit, Time, TimeLeft,
// Reset. Window is written in whole milliseconds; TimeLeft and Reset are
// rounded up to the millisecond, so that a client pacing itself by them
// never comes back before the window has really ended.
func FormatQuota(s Signal) string {
	b := make([]byte, 0, 64)
	add := func(name string, n int64) {
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = append(b, name...)
		b = append(b, ':')
		b = strconv.AppendInt(b, n, 10)
	}
	if s.Has(FieldRemaining) {
		add("Remain", s.Remaining)
	}
	if s.Has(FieldLimit) {
		add("Limit", s.Limit)
	}
	if s.Has(FieldWindow) {
		add("Time", s.Window.Milliseconds())
	}
	if s.Has(FieldTimeLeft) {
		add("TimeLeft", ceilMillis(s.TimeLeft))
	}
	if s.Has(FieldReset) {
		add("Reset", s.Reset.Add(time.Millisecond-1).UnixMilli())
	}
	return string(b)
}

// SetHeaders writes s into response headers h, as a server does: the
// Aliyun header of s.Dimension (none for DimensionNone) and the RateLimit-*
// headers for the fields s has (RateLimit-Reset as whole seconds left,
// rounded up), plus Retry-After in whole seconds, rounded up. A Remaining of
// RemainingPlenty is written only in the Aliyun header.
func SetHeaders(h map[string]string, s Signal) {
	switch s.Dimension {
	case DimensionUser:
		h[HeaderUser] = FormatQuota(s)
	case DimensionUserAPI:
		h[HeaderUserAPI] = FormatQuota(s)
	}
	if s.Has(FieldRemaining) && s.Remaining >= 0 {
		h[HeaderRemaining] = strconv.FormatInt(s.Remaining, 10)
	}
	if s.Has(FieldLimit) {
		v := strconv.FormatInt(s.Limit, 10)
		if s.Has(FieldWindow) {
			v += ";w=" + strconv.FormatInt(ceilSeconds(s.Window), 10)
		}
		h[HeaderLimit] = v
	}
	if s.Has(FieldTimeLeft) {
		h[HeaderReset] = strconv.FormatInt(ceilSeconds(s.TimeLeft), 10)
	}
	if s.Has(FieldRetryAfter) {
		h[HeaderRetryAfter] = strconv.FormatInt(ceilSeconds(s.RetryAfter), 10)
	}
}

func ceilMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

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

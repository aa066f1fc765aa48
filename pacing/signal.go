package pacing

import (
	"strconv"
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
	// both Aliyun dimensions, the binding one: the spent one, else the one
	// with less of its quota left.
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

// formatQuota writes s in the Aliyun quota format, the inverse of the
// client's parsing: the fields s has, in the order Remain, Limit, Time, TimeLeft,
// Reset. Window is written in whole milliseconds; TimeLeft and Reset are
// rounded up to the millisecond, so that a client pacing itself by them
// never comes back before the window has really ended.
func formatQuota(s Signal) string {
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
		h[HeaderUser] = formatQuota(s)
	case DimensionUserAPI:
		h[HeaderUserAPI] = formatQuota(s)
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

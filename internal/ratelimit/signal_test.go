package ratelimit

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/pacing"
)

const ms = time.Millisecond

var now = time.Date(2021, 11, 25, 10, 13, 40, 0, time.UTC)

func TestParseQuota(t *testing.T) {
	all := pacing.FieldRemaining | pacing.FieldLimit | pacing.FieldWindow | pacing.FieldTimeLeft | pacing.FieldReset
	tests := []struct {
		name, in string
		want     pacing.Signal
		bad      bool
	}{
		{name: "Aliyun's example", in: "Remain:1,Limit:2,Time:1000,TimeLeft:122,Reset:1637835220000",
			want: pacing.Signal{Fields: all, Remaining: 1, Limit: 2, Window: time.Second, TimeLeft: 122 * ms, Reset: time.UnixMilli(1637835220000)}},
		{name: "plenty", in: "Remain:-1,Limit:100", want: pacing.Signal{Fields: pacing.FieldRemaining | pacing.FieldLimit, Remaining: pacing.RemainingPlenty, Limit: 100}},
		{name: "throttled", in: "Remain:0,TimeLeft:5000", want: pacing.Signal{Fields: pacing.FieldRemaining | pacing.FieldTimeLeft, TimeLeft: 5 * time.Second}},
		{name: "spaces, case, unknown names, empty pairs", in: " remain : 3 ,, LIMIT:4, Burst:9 ,",
			want: pacing.Signal{Fields: pacing.FieldRemaining | pacing.FieldLimit, Remaining: 3, Limit: 4}},
		{name: "partial: only Reset", in: "Reset:0", want: pacing.Signal{Fields: pacing.FieldReset, Reset: time.UnixMilli(0)}},
		{name: "empty", in: "", bad: true},
		{name: "only unknown", in: "Foo:1", bad: true},
		{name: "no colon", in: "Remain=1", bad: true},
		{name: "not a number", in: "Remain:one", bad: true},
		{name: "below plenty", in: "Remain:-2", bad: true},
		{name: "negative limit", in: "Limit:-1", bad: true},
		{name: "negative time", in: "TimeLeft:-5", bad: true},
		{name: "fraction", in: "Time:1.5", bad: true},
		{name: "overflows int64", in: "Limit:9223372036854775808", bad: true},
		{name: "overflows Duration", in: "Time:9223372036854775", bad: true},
		{name: "reset beyond 2262", in: "Reset:9223372036854775", bad: true},
		{name: "one bad field spoils the header", in: "Remain:1,Limit:x", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseQuota(tc.in)
			if tc.bad {
				if err == nil {
					t.Fatalf("ParseQuota(%q) = %+v, want an error", tc.in, got)
				}
				if got != (pacing.Signal{}) {
					t.Fatalf("ParseQuota(%q) returned %+v with its error, want the zero pacing.Signal", tc.in, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseQuota(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseHeaders(t *testing.T) {
	tests := []struct {
		name    string
		h       map[string]string
		want    pacing.Signal
		badHdrs []string // headers reported malformed
	}{
		{name: "nothing", h: map[string]string{"content-type": "json"}},
		{name: "user-api", h: map[string]string{pacing.HeaderUserAPI: "Remain:0,Limit:2,Time:1000,TimeLeft:122"},
			want: pacing.Signal{Fields: pacing.FieldRemaining | pacing.FieldLimit | pacing.FieldWindow | pacing.FieldTimeLeft, Dimension: pacing.DimensionUserAPI,
				Limit: 2, Window: time.Second, TimeLeft: 122 * ms}},
		{name: "lower-case names", h: map[string]string{"x-ratelimit-user": "Remain:5", "ratelimit-limit": "10"},
			want: pacing.Signal{Fields: pacing.FieldRemaining | pacing.FieldLimit, Dimension: pacing.DimensionUser, Remaining: 5, Limit: 10}},
		{name: "binding dimension: the spent one", h: map[string]string{
			pacing.HeaderUser:    "Remain:0,TimeLeft:3000",
			pacing.HeaderUserAPI: "Remain:7,TimeLeft:100"},
			want: pacing.Signal{Fields: pacing.FieldRemaining | pacing.FieldTimeLeft, Dimension: pacing.DimensionUser, TimeLeft: 3 * time.Second}},
		{name: "binding dimension: both spent, the longer window", h: map[string]string{
			pacing.HeaderUser:    "Remain:0,TimeLeft:3000",
			pacing.HeaderUserAPI: "Remain:0,TimeLeft:9000"},
			want: pacing.Signal{Fields: pacing.FieldRemaining | pacing.FieldTimeLeft, Dimension: pacing.DimensionUserAPI, TimeLeft: 9 * time.Second}},
		{name: "binding dimension: the smaller fraction left", h: map[string]string{
			pacing.HeaderUser:    "Remain:50,Limit:100",
			pacing.HeaderUserAPI: "Remain:-1,Limit:2"},
			want: pacing.Signal{Fields: pacing.FieldRemaining | pacing.FieldLimit, Dimension: pacing.DimensionUser, Remaining: 50, Limit: 100}},
		{name: "heroku remaining alone", h: map[string]string{pacing.HeaderRemaining: "4499"},
			want: pacing.Signal{Fields: pacing.FieldRemaining, Remaining: 4499}},
		{name: "ietf limit with window, reset in seconds", h: map[string]string{
			pacing.HeaderRemaining: "0", pacing.HeaderLimit: "100, 100;w=60", pacing.HeaderReset: "12"},
			want: pacing.Signal{Fields: pacing.FieldRemaining | pacing.FieldLimit | pacing.FieldWindow | pacing.FieldTimeLeft | pacing.FieldReset,
				Limit: 100, Window: time.Minute, TimeLeft: 12 * time.Second, Reset: now.Add(12 * time.Second)}},
		{name: "reset as a unix time", h: map[string]string{pacing.HeaderReset: "1637835230"},
			want: pacing.Signal{Fields: pacing.FieldTimeLeft | pacing.FieldReset, TimeLeft: time.Unix(1637835230, 0).Sub(now), Reset: time.Unix(1637835230, 0)}},
		{name: "aliyun fields win, generic ones fill in", h: map[string]string{
			pacing.HeaderUserAPI: "Remain:0,TimeLeft:500", pacing.HeaderRemaining: "9", pacing.HeaderLimit: "20", pacing.HeaderRetryAfter: "2"},
			want: pacing.Signal{Fields: pacing.FieldRemaining | pacing.FieldTimeLeft | pacing.FieldLimit | pacing.FieldRetryAfter, Dimension: pacing.DimensionUserAPI,
				TimeLeft: 500 * ms, Limit: 20, RetryAfter: 2 * time.Second}},
		{name: "retry-after http date", h: map[string]string{pacing.HeaderRetryAfter: "Thu, 25 Nov 2021 10:14:10 GMT"},
			want: pacing.Signal{Fields: pacing.FieldRetryAfter, RetryAfter: 30 * time.Second}},
		{name: "retry-after date in the past", h: map[string]string{pacing.HeaderRetryAfter: "Thu, 25 Nov 2021 10:00:00 GMT"},
			want: pacing.Signal{Fields: pacing.FieldRetryAfter}},
		{name: "malformed ones ignored, the rest kept", h: map[string]string{
			pacing.HeaderUserAPI: "Remain:zero", pacing.HeaderUser: "Remain:2,Limit:3", pacing.HeaderRemaining: "-4",
			pacing.HeaderLimit: "lots", pacing.HeaderReset: "soon", pacing.HeaderRetryAfter: "tomorrow"},
			want:    pacing.Signal{Fields: pacing.FieldRemaining | pacing.FieldLimit, Dimension: pacing.DimensionUser, Remaining: 2, Limit: 3},
			badHdrs: []string{pacing.HeaderUserAPI, pacing.HeaderRemaining, pacing.HeaderLimit, pacing.HeaderReset, pacing.HeaderRetryAfter}},
		{name: "one malformed", h: map[string]string{pacing.HeaderRetryAfter: "-1"}, badHdrs: []string{pacing.HeaderRetryAfter}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseHeaders(tc.h, now)
			if !got.Reset.Equal(tc.want.Reset) {
				t.Fatalf("Reset = %v, want %v", got.Reset, tc.want.Reset)
			}
			got.Reset, tc.want.Reset = time.Time{}, time.Time{}
			if got != tc.want {
				t.Fatalf("ParseHeaders = %+v, want %+v", got, tc.want)
			}
			if len(tc.badHdrs) == 0 {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if !errors.Is(err, ErrMalformedHeader) {
				t.Fatalf("error %v does not match ErrMalformedHeader", err)
			}
			var he *HeaderError
			if !errors.As(err, &he) {
				t.Fatalf("error %v holds no *HeaderError", err)
			}
			for _, name := range tc.badHdrs {
				if !strings.Contains(err.Error(), "header "+name+":") {
					t.Errorf("error %q does not name %s", err, name)
				}
			}
		})
	}
}

func TestHeaderErrorTruncatesValue(t *testing.T) {
	_, err := ParseHeaders(map[string]string{pacing.HeaderUser: strings.Repeat("x", 1000)}, now)
	var he *HeaderError
	if !errors.As(err, &he) || len(he.Value) != 64 {
		t.Fatalf("got %v; want a *HeaderError with a 64-byte value", err)
	}
}

func TestSignalHelpers(t *testing.T) {
	spent := pacing.Signal{Fields: pacing.FieldRemaining | pacing.FieldTimeLeft | pacing.FieldRetryAfter, TimeLeft: 5 * time.Second, RetryAfter: 2 * time.Second}
	if !Throttled(spent) || Wait(spent) != 5*time.Second {
		t.Fatalf("spent: Throttled %v Wait %v", Throttled(spent), Wait(spent))
	}
	left := spent
	left.Remaining = 3
	if Throttled(left) || Wait(left) != 2*time.Second {
		t.Fatalf("with quota left: Throttled %v Wait %v; want false, the Retry-After", Throttled(left), Wait(left))
	}
	if Throttled(pacing.Signal{}) || !Empty(pacing.Signal{}) || Wait(pacing.Signal{}) != 0 {
		t.Fatal("the zero pacing.Signal must say nothing")
	}
	fractions := []struct {
		s        pacing.Signal
		fallback int64
		want     float64
	}{
		{pacing.Signal{}, 4500, 1},
		{pacing.Signal{Fields: pacing.FieldRemaining, Remaining: pacing.RemainingPlenty}, 4500, 1},
		{pacing.Signal{Fields: pacing.FieldRemaining, Remaining: 2250}, 4500, 0.5},
		{pacing.Signal{Fields: pacing.FieldRemaining | pacing.FieldLimit, Remaining: 1, Limit: 4}, 4500, 0.25},
		{pacing.Signal{Fields: pacing.FieldRemaining, Remaining: 9000}, 4500, 1},
		{pacing.Signal{Fields: pacing.FieldRemaining, Remaining: 0}, 4500, 0},
		{pacing.Signal{Fields: pacing.FieldRemaining, Remaining: 5}, 0, 1},
	}
	for _, f := range fractions {
		if got := RemainingFraction(f.s, f.fallback); got != f.want {
			t.Errorf("RemainingFraction(%+v, %d) = %v, want %v", f.s, f.fallback, got, f.want)
		}
	}
	if k := Key(pacing.DimensionUserAPI, "kv", "Get"); k != "kv::Get" {
		t.Errorf("user-api key = %q", k)
	}
	if k := Key(pacing.DimensionUser, "kv", "Get"); k != "kv" {
		t.Errorf("user key = %q", k)
	}
}

func TestSetHeadersRoundTrip(t *testing.T) {
	in := pacing.Signal{Fields: pacing.FieldRemaining | pacing.FieldLimit | pacing.FieldWindow | pacing.FieldTimeLeft | pacing.FieldReset | pacing.FieldRetryAfter,
		Dimension: pacing.DimensionUserAPI, Remaining: 0, Limit: 2, Window: time.Second, TimeLeft: 1500 * ms,
		Reset: time.UnixMilli(1637835220000), RetryAfter: 1500 * ms}
	h := map[string]string{}
	pacing.SetHeaders(h, in)
	want := map[string]string{
		pacing.HeaderUserAPI:    "Remain:0,Limit:2,Time:1000,TimeLeft:1500,Reset:1637835220000",
		pacing.HeaderRemaining:  "0",
		pacing.HeaderLimit:      "2;w=1",
		pacing.HeaderReset:      "2",
		pacing.HeaderRetryAfter: "2",
	}
	if len(h) != len(want) {
		t.Fatalf("SetHeaders wrote %v, want %v", h, want)
	}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("%s = %q, want %q", k, h[k], v)
		}
	}
	out, err := ParseHeaders(h, now)
	if err != nil {
		t.Fatal(err)
	}
	out.RetryAfter = in.RetryAfter // whole seconds on the wire
	if out != in {
		t.Fatalf("round trip: %+v, want %+v", out, in)
	}
}

func TestParseHeadersDoesNotAllocate(t *testing.T) {
	h := map[string]string{pacing.HeaderUserAPI: "Remain:1,Limit:2,Time:1000,TimeLeft:122,Reset:1637835220000",
		pacing.HeaderRemaining: "12", pacing.HeaderLimit: "100, 100;w=60", pacing.HeaderRetryAfter: "3", "other": "x"}
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseHeaders(h, now) }); n != 0 {
		t.Fatalf("ParseHeaders allocates %v times per call", n)
	}
}

func BenchmarkParseHeaders(b *testing.B) {
	h := map[string]string{pacing.HeaderUserAPI: "Remain:1,Limit:2,Time:1000,TimeLeft:122,Reset:1637835220000",
		pacing.HeaderRemaining: "12", "content-type": "application/json"}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = ParseHeaders(h, now)
	}
}

// FuzzParseQuota: never panics; what it accepts respects the documented
// ranges and survives the server's formatting (pacing.SetHeaders).
func FuzzParseQuota(f *testing.F) {
	for _, s := range []string{"Remain:1,Limit:2,Time:1000,TimeLeft:122,Reset:1637835220000", "Remain:-1", "", ",,,",
		"Remain:-2", "remain : 0", "Time:9223372036854775807", "Foo:1,Limit:3", "Limit:+4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		s, err := ParseQuota(v)
		if err != nil {
			if s != (pacing.Signal{}) {
				t.Fatalf("ParseQuota(%q) = %+v with error %v", v, s, err)
			}
			return
		}
		if Empty(s) || s.Remaining < pacing.RemainingPlenty || s.Limit < 0 || s.Window < 0 || s.TimeLeft < 0 || s.Dimension != pacing.DimensionNone {
			t.Fatalf("ParseQuota(%q) = %+v: out of range", v, s)
		}
		h := map[string]string{}
		s.Dimension = pacing.DimensionUser
		pacing.SetHeaders(h, s)
		s.Dimension = pacing.DimensionNone
		back, err := ParseQuota(h[pacing.HeaderUser])
		if err != nil || back != s {
			t.Fatalf("round trip of %q: %+v became %+v, %v", v, s, back, err)
		}
	})
}

// FuzzParseHeaders: never panics; every header it rejects is reported, and
// the signal's durations are never negative.
func FuzzParseHeaders(f *testing.F) {
	f.Add("Remain:0,TimeLeft:122", "Remain:5", "4499", "4500;w=3600", "60", "120")
	f.Add("x", "Remain:-1", "-1", "1, 2", "1637835230", "Thu, 25 Nov 2021 10:14:10 GMT")
	f.Add("", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, userAPI, user, remaining, limit, reset, retryAfter string) {
		h := map[string]string{pacing.HeaderUserAPI: userAPI, pacing.HeaderUser: user, pacing.HeaderRemaining: remaining,
			pacing.HeaderLimit: limit, pacing.HeaderReset: reset, pacing.HeaderRetryAfter: retryAfter}
		s, err := ParseHeaders(h, now)
		if s.Window < 0 || s.TimeLeft < 0 || s.RetryAfter < 0 || s.Limit < 0 || s.Remaining < pacing.RemainingPlenty || Wait(s) < 0 {
			t.Fatalf("ParseHeaders(%v) = %+v: out of range", h, s)
		}
		if err != nil && !errors.Is(err, ErrMalformedHeader) {
			t.Fatalf("error %v does not match ErrMalformedHeader", err)
		}
		if _, qerr := ParseQuota(userAPI); (qerr != nil) != (err != nil && strings.Contains(err.Error(), pacing.HeaderUserAPI+":")) {
			t.Fatalf("user-api %q: ParseQuota error %v, ParseHeaders error %v", userAPI, qerr, err)
		}
		if f := RemainingFraction(s, 4500); !(f >= 0 && f <= 1) {
			t.Fatalf("RemainingFraction = %v", f)
		}
	})
}

// FuzzParseRetryAfter: never panics; accepted values are never negative and
// whole seconds survive formatting.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "0", "-1", "", "Thu, 25 Nov 2021 10:14:10 GMT", "Thursday, 25-Nov-21 10:14:10 GMT",
		"Thu Nov 25 10:14:10 2021", "9223372036854775807", " 7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := ParseRetryAfter(v, now)
		if !ok {
			if d != 0 {
				t.Fatalf("ParseRetryAfter(%q) = %v, false", v, d)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v", v, d)
		}
	})
}

// The headers a handler sends for a spent pacing.Quota round-trip through
// ParseHeaders: the client sees the quota spent and waits the window out.
func TestQuotaHeadersRoundTrip(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	q, err := pacing.NewQuota(pacing.QuotaConfig{Limit: 1, Window: time.Second, Dimension: pacing.DimensionUser, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := q.Take(); !ok {
		t.Fatal("the first Take of a quota of 1 was refused")
	}
	sig, ok := q.Take()
	if ok {
		t.Fatal("the second Take of a quota of 1 was allowed")
	}
	h := map[string]string{}
	pacing.SetHeaders(h, sig)
	got, err := ParseHeaders(h, clk.Now())
	if err != nil || !Throttled(got) || Wait(got) != time.Second || got.Dimension != pacing.DimensionUser {
		t.Fatalf("round trip: %+v, %v (headers %v)", got, err, h)
	}
}

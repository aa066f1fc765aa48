package pacing

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

var now = time.Date(2021, 11, 25, 10, 13, 40, 0, time.UTC)

func TestParseQuota(t *testing.T) {
	all := FieldRemaining | FieldLimit | FieldWindow | FieldTimeLeft | FieldReset
	tests := []struct {
		name, in string
		want     Signal
		bad      bool
	}{
		{name: "Aliyun's example", in: "Remain:1,Limit:2,Time:1000,TimeLeft:122,Reset:1637835220000",
			want: Signal{Fields: all, Remaining: 1, Limit: 2, Window: time.Second, TimeLeft: 122 * ms, Reset: time.UnixMilli(1637835220000)}},
		{name: "plenty", in: "Remain:-1,Limit:100", want: Signal{Fields: FieldRemaining | FieldLimit, Remaining: RemainingPlenty, Limit: 100}},
		{name: "throttled", in: "Remain:0,TimeLeft:5000", want: Signal{Fields: FieldRemaining | FieldTimeLeft, TimeLeft: 5 * time.Second}},
		{name: "spaces, case, unknown names, empty pairs", in: " remain : 3 ,, LIMIT:4, Burst:9 ,",
			want: Signal{Fields: FieldRemaining | FieldLimit, Remaining: 3, Limit: 4}},
		{name: "partial: only Reset", in: "Reset:0", want: Signal{Fields: FieldReset, Reset: time.UnixMilli(0)}},
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
				if got != (Signal{}) {
					t.Fatalf("ParseQuota(%q) returned %+v with its error, want the zero Signal", tc.in, got)
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
		want    Signal
		badHdrs []string // headers reported malformed
	}{
		{name: "nothing", h: map[string]string{"content-type": "json"}},
		{name: "user-api", h: map[string]string{HeaderUserAPI: "Remain:0,Limit:2,Time:1000,TimeLeft:122"},
			want: Signal{Fields: FieldRemaining | FieldLimit | FieldWindow | FieldTimeLeft, Dimension: DimensionUserAPI,
				Limit: 2, Window: time.Second, TimeLeft: 122 * ms}},
		{name: "lower-case names", h: map[string]string{"x-ratelimit-user": "Remain:5", "ratelimit-limit": "10"},
			want: Signal{Fields: FieldRemaining | FieldLimit, Dimension: DimensionUser, Remaining: 5, Limit: 10}},
		{name: "binding dimension: the spent one", h: map[string]string{
			HeaderUser:    "Remain:0,TimeLeft:3000",
			HeaderUserAPI: "Remain:7,TimeLeft:100"},
			want: Signal{Fields: FieldRemaining | FieldTimeLeft, Dimension: DimensionUser, TimeLeft: 3 * time.Second}},
		{name: "binding dimension: both spent, the longer window", h: map[string]string{
			HeaderUser:    "Remain:0,TimeLeft:3000",
			HeaderUserAPI: "Remain:0,TimeLeft:9000"},
			want: Signal{Fields: FieldRemaining | FieldTimeLeft, Dimension: DimensionUserAPI, TimeLeft: 9 * time.Second}},
		{name: "binding dimension: the smaller fraction left", h: map[string]string{
			HeaderUser:    "Remain:50,Limit:100",
			HeaderUserAPI: "Remain:-1,Limit:2"},
			want: Signal{Fields: FieldRemaining | FieldLimit, Dimension: DimensionUser, Remaining: 50, Limit: 100}},
		{name: "heroku remaining alone", h: map[string]string{HeaderRemaining: "4499"},
			want: Signal{Fields: FieldRemaining, Remaining: 4499}},
		{name: "ietf limit with window, reset in seconds", h: map[string]string{
			HeaderRemaining: "0", HeaderLimit: "100, 100;w=60", HeaderReset: "12"},
			want: Signal{Fields: FieldRemaining | FieldLimit | FieldWindow | FieldTimeLeft | FieldReset,
				Limit: 100, Window: time.Minute, TimeLeft: 12 * time.Second, Reset: now.Add(12 * time.Second)}},
		{name: "reset as a unix time", h: map[string]string{HeaderReset: "1637835230"},
			want: Signal{Fields: FieldTimeLeft | FieldReset, TimeLeft: time.Unix(1637835230, 0).Sub(now), Reset: time.Unix(1637835230, 0)}},
		{name: "aliyun fields win, generic ones fill in", h: map[string]string{
			HeaderUserAPI: "Remain:0,TimeLeft:500", HeaderRemaining: "9", HeaderLimit: "20", HeaderRetryAfter: "2"},
			want: Signal{Fields: FieldRemaining | FieldTimeLeft | FieldLimit | FieldRetryAfter, Dimension: DimensionUserAPI,
				TimeLeft: 500 * ms, Limit: 20, RetryAfter: 2 * time.Second}},
		{name: "retry-after http date", h: map[string]string{HeaderRetryAfter: "Thu, 25 Nov 2021 10:14:10 GMT"},
			want: Signal{Fields: FieldRetryAfter, RetryAfter: 30 * time.Second}},
		{name: "retry-after date in the past", h: map[string]string{HeaderRetryAfter: "Thu, 25 Nov 2021 10:00:00 GMT"},
			want: Signal{Fields: FieldRetryAfter}},
		{name: "malformed ones ignored, the rest kept", h: map[string]string{
			HeaderUserAPI: "Remain:zero", HeaderUser: "Remain:2,Limit:3", HeaderRemaining: "-4",
			HeaderLimit: "lots", HeaderReset: "soon", HeaderRetryAfter: "tomorrow"},
			want:    Signal{Fields: FieldRemaining | FieldLimit, Dimension: DimensionUser, Remaining: 2, Limit: 3},
			badHdrs: []string{HeaderUserAPI, HeaderRemaining, HeaderLimit, HeaderReset, HeaderRetryAfter}},
		{name: "one malformed", h: map[string]string{HeaderRetryAfter: "-1"}, badHdrs: []string{HeaderRetryAfter}},
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
	_, err := ParseHeaders(map[string]string{HeaderUser: strings.Repeat("x", 1000)}, now)
	var he *HeaderError
	if !errors.As(err, &he) || len(he.Value) != 64 {
		t.Fatalf("got %v; want a *HeaderError with a 64-byte value", err)
	}
}

func TestSignalHelpers(t *testing.T) {
	spent := Signal{Fields: FieldRemaining | FieldTimeLeft | FieldRetryAfter, TimeLeft: 5 * time.Second, RetryAfter: 2 * time.Second}
	if !spent.Throttled() || spent.Wait() != 5*time.Second {
		t.Fatalf("spent: Throttled %v Wait %v", spent.Throttled(), spent.Wait())
	}
	left := spent
	left.Remaining = 3
	if left.Throttled() || left.Wait() != 2*time.Second {
		t.Fatalf("with quota left: Throttled %v Wait %v; want false, the Retry-After", left.Throttled(), left.Wait())
	}
	if (Signal{}).Throttled() || !(Signal{}).Empty() || (Signal{}).Wait() != 0 {
		t.Fatal("the zero Signal must say nothing")
	}
	fractions := []struct {
		s        Signal
		fallback int64
		want     float64
	}{
		{Signal{}, 4500, 1},
		{Signal{Fields: FieldRemaining, Remaining: RemainingPlenty}, 4500, 1},
		{Signal{Fields: FieldRemaining, Remaining: 2250}, 4500, 0.5},
		{Signal{Fields: FieldRemaining | FieldLimit, Remaining: 1, Limit: 4}, 4500, 0.25},
		{Signal{Fields: FieldRemaining, Remaining: 9000}, 4500, 1},
		{Signal{Fields: FieldRemaining, Remaining: 0}, 4500, 0},
		{Signal{Fields: FieldRemaining, Remaining: 5}, 0, 1},
	}
	for _, f := range fractions {
		if got := f.s.RemainingFraction(f.fallback); got != f.want {
			t.Errorf("%+v.RemainingFraction(%d) = %v, want %v", f.s, f.fallback, got, f.want)
		}
	}
	if k := DimensionUserAPI.Key("kv", "Get"); k != "kv::Get" {
		t.Errorf("user-api key = %q", k)
	}
	if k := DimensionUser.Key("kv", "Get"); k != "kv" {
		t.Errorf("user key = %q", k)
	}
}

func TestSetHeadersRoundTrip(t *testing.T) {
	in := Signal{Fields: FieldRemaining | FieldLimit | FieldWindow | FieldTimeLeft | FieldReset | FieldRetryAfter,
		Dimension: DimensionUserAPI, Remaining: 0, Limit: 2, Window: time.Second, TimeLeft: 1500 * ms,
		Reset: time.UnixMilli(1637835220000), RetryAfter: 1500 * ms}
	h := map[string]string{}
	SetHeaders(h, in)
	want := map[string]string{
		HeaderUserAPI:    "Remain:0,Limit:2,Time:1000,TimeLeft:1500,Reset:1637835220000",
		HeaderRemaining:  "0",
		HeaderLimit:      "2;w=1",
		HeaderReset:      "2",
		HeaderRetryAfter: "2",
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
	h := map[string]string{HeaderUserAPI: "Remain:1,Limit:2,Time:1000,TimeLeft:122,Reset:1637835220000",
		HeaderRemaining: "12", HeaderLimit: "100, 100;w=60", HeaderRetryAfter: "3", "other": "x"}
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseHeaders(h, now) }); n != 0 {
		t.Fatalf("ParseHeaders allocates %v times per call", n)
	}
}

func BenchmarkParseHeaders(b *testing.B) {
	h := map[string]string{HeaderUserAPI: "Remain:1,Limit:2,Time:1000,TimeLeft:122,Reset:1637835220000",
		HeaderRemaining: "12", "content-type": "application/json"}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = ParseHeaders(h, now)
	}
}

// A client paces itself by TimeLeft and Reset: written rounded down they
// would send it back up to a millisecond before the window ends.
func TestFormatQuotaRoundsTheWindowsEndUp(t *testing.T) {
	s := Signal{Fields: FieldTimeLeft | FieldReset | FieldWindow, Window: 1500 * time.Microsecond,
		TimeLeft: 1200 * time.Microsecond, Reset: time.UnixMilli(1637835220000).Add(500 * time.Microsecond)}
	if got, want := FormatQuota(s), "Time:1,TimeLeft:2,Reset:1637835220001"; got != want {
		t.Fatalf("FormatQuota = %q, want %q", got, want)
	}
	s = Signal{Fields: FieldTimeLeft | FieldReset, TimeLeft: 2 * time.Millisecond, Reset: time.UnixMilli(1637835220000)}
	if got, want := FormatQuota(s), "TimeLeft:2,Reset:1637835220000"; got != want {
		t.Fatalf("whole milliseconds: FormatQuota = %q, want %q", got, want)
	}
}

// FuzzParseQuota: never panics; what it accepts respects the documented
// ranges and survives FormatQuota.
func FuzzParseQuota(f *testing.F) {
	for _, s := range []string{"Remain:1,Limit:2,Time:1000,TimeLeft:122,Reset:1637835220000", "Remain:-1", "", ",,,",
		"Remain:-2", "remain : 0", "Time:9223372036854775807", "Foo:1,Limit:3", "Limit:+4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		s, err := ParseQuota(v)
		if err != nil {
			if s != (Signal{}) {
				t.Fatalf("ParseQuota(%q) = %+v with error %v", v, s, err)
			}
			return
		}
		if s.Empty() || s.Remaining < RemainingPlenty || s.Limit < 0 || s.Window < 0 || s.TimeLeft < 0 || s.Dimension != DimensionNone {
			t.Fatalf("ParseQuota(%q) = %+v: out of range", v, s)
		}
		back, err := ParseQuota(FormatQuota(s))
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
		h := map[string]string{HeaderUserAPI: userAPI, HeaderUser: user, HeaderRemaining: remaining,
			HeaderLimit: limit, HeaderReset: reset, HeaderRetryAfter: retryAfter}
		s, err := ParseHeaders(h, now)
		if s.Window < 0 || s.TimeLeft < 0 || s.RetryAfter < 0 || s.Limit < 0 || s.Remaining < RemainingPlenty || s.Wait() < 0 {
			t.Fatalf("ParseHeaders(%v) = %+v: out of range", h, s)
		}
		if err != nil && !errors.Is(err, ErrMalformedHeader) {
			t.Fatalf("error %v does not match ErrMalformedHeader", err)
		}
		if _, qerr := ParseQuota(userAPI); (qerr != nil) != (err != nil && strings.Contains(err.Error(), HeaderUserAPI+":")) {
			t.Fatalf("user-api %q: ParseQuota error %v, ParseHeaders error %v", userAPI, qerr, err)
		}
		if f := s.RemainingFraction(4500); !(f >= 0 && f <= 1) {
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

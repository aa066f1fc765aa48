package jsonout

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"Calls": "calls", "P50": "p50", "P999": "p999", "RSSPeak": "rss_peak", "GCs": "gcs", "RPCs": "rpcs",
		"ConnectsAfter1s": "connects_after1s", "MaxOK": "max_ok", "HTTPServer": "http_server", "ID": "id",
		"PickedAfterFault": "picked_after_fault", "IDsSeen": "ids_seen", "already_snake": "already_snake",
	} {
		if got := Snake(in); got != want {
			t.Errorf("Snake(%q) = %q, want %q", in, got, want)
		}
	}
}

type kind int

func (k kind) String() string { return [...]string{"NONE", "FAIR_SHARE"}[k] }

type inner struct {
	Shadowed int
	Promoted string
}

type marshals struct{}

func (marshals) MarshalJSON() ([]byte, error) { return []byte(`"mine"`), nil }

type report struct {
	inner
	Shadowed    string
	Name        string `json:"the_name"`
	Skipped     int    `json:"-"`
	Empty       int    `json:",omitempty"`
	Progress    func(string)
	Service     time.Duration
	Took        time.Duration `json:"took_s"`
	Steps       []time.Duration
	Algorithm   kind
	At          time.Time
	Ratio       float64
	NaN, Inf    float64
	Nothing     *int
	NoList      []int
	Errors      map[string]int
	Custom      marshals
	unexported  int
	RSSBefore   int64
	Interface   any
	NilPointer  *inner
	SomeInts    [2]int
	ByteContent []byte
}

// The convention, field by field.
func TestMarshal(t *testing.T) {
	r := report{inner: inner{Shadowed: 1, Promoted: "p"}, Shadowed: "outer", Name: "n", Skipped: 3,
		Progress: func(string) {}, Service: 2500 * time.Microsecond, Took: time.Second, Steps: []time.Duration{time.Millisecond},
		Algorithm: 1, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Ratio: 0.5, NaN: math.NaN(), Inf: math.Inf(1),
		Errors: map[string]int{"BUSY": 2, "APPLICATION": 1}, unexported: 4, RSSBefore: 7, Interface: inner{Promoted: "x"},
		ByteContent: []byte("hi")}
	b, err := Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"promoted":"p","shadowed":"outer","the_name":"n","service_ms":2.5,"took_s":1,"steps_ms":[1],"algorithm":"FAIR_SHARE",` +
		`"at":"2026-01-02T03:04:05Z","ratio":0.5,"na_n":null,"inf":null,"nothing":null,"no_list":null,` +
		`"errors":{"APPLICATION":1,"BUSY":2},"custom":"mine","rss_before":7,"interface":{"shadowed":0,"promoted":"x"},` +
		`"nil_pointer":null,"some_ints":[0,0],"byte_content":"aGk="}`
	if string(b) != want {
		t.Errorf("Marshal:\n got %s\nwant %s", b, want)
	}
	if !json.Valid(b) {
		t.Error("not valid JSON")
	}
	var sb strings.Builder
	if err := Write(&sb, []int{1}); err != nil || sb.String() != "[1]\n" {
		t.Errorf("Write: %q, %v", sb.String(), err)
	}
}

type loop struct{ Next *loop }

func TestMarshalCycle(t *testing.T) {
	l := &loop{}
	l.Next = l
	if _, err := Marshal(l); err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Errorf("a cycle: %v", err)
	}
}

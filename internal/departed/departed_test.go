package departed

import (
	"fmt"
	"testing"
	"time"
)

func hp(i int) string { return fmt.Sprintf("127.0.0.1:%d", 4000+i) }

// A Table forgets a host:port once it has been gone for the grace, and
// holds at most max, the earliest gone dropped first; a host:port that
// leaves again is timed from its latest departure.
func TestDeparturesForgetAfterTheGrace(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	d := New[int](time.Minute, 100)
	for i := range 250 {
		d.Put(hp(i%150), i, t0.Add(time.Duration(i)*time.Second/10))
	}
	if d.Len() != 100 {
		t.Fatalf("%d held, want the cap of 100", d.Len())
	}
	now := t0.Add(25 * time.Second)
	if v, ok := d.Get(hp(99), now); !ok || v != 249 {
		t.Errorf("get of the latest departure = %v, %v; want 249, true", v, ok)
	}
	if _, ok := d.Get(hp(120), now); ok {
		t.Error("one of the earliest gone, past the cap, is still held")
	}
	now = t0.Add(84 * time.Second) // a minute after the departures at 24 s
	d.Prune(now)
	if d.Len() != 9 { // hp(91)..hp(99) left at 24.1-24.9 s
		t.Errorf("%d held a minute after the first 241 left, want 9", d.Len())
	}
	if v, ok := d.Take(hp(95), now); !ok || v != 245 {
		t.Errorf("take = %v, %v; want 245, true", v, ok)
	}
	if _, ok := d.Get(hp(95), now); ok || d.Len() != 8 {
		t.Error("take did not forget the host:port")
	}
	d.Prune(t0.Add(time.Hour))
	if d.Len() != 0 || len(d.q)-d.head != 0 {
		t.Errorf("after an hour, %d held and %d queued; want none", d.Len(), len(d.q)-d.head)
	}
}

package event

import (
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

func TestQueueOrder(t *testing.T) {
	for _, tt := range []struct {
		name string
		at   []time.Duration // event i is due at t0 + at[i]
		want []int           // the events in the order they come out
	}{
		{"empty", nil, nil},
		{"one", []time.Duration{5}, []int{0}},
		{"by time", []time.Duration{3, 1, 2}, []int{1, 2, 0}},
		{"ties in push order", []time.Duration{1, 1, 1, 1}, []int{0, 1, 2, 3}},
		{"ties among others", []time.Duration{2, 1, 2, 0, 1, 2}, []int{3, 1, 4, 0, 2, 5}},
		{"before the epoch", []time.Duration{0, -time.Hour, 0}, []int{1, 0, 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var q Queue[int]
			for i, d := range tt.at {
				q.Push(t0.Add(d), i)
			}
			if q.Len() != len(tt.at) {
				t.Fatalf("Len() = %d after %d pushes", q.Len(), len(tt.at))
			}
			var got []int
			for {
				next, nextOK := q.Next()
				at, e, ok := q.Pop()
				if ok != nextOK || !at.Equal(next) {
					t.Fatalf("Next() = %v, %v but Pop() = %v, %v", next, nextOK, at, ok)
				}
				if !ok {
					break
				}
				if want := t0.Add(tt.at[e]); !at.Equal(want) {
					t.Errorf("event %d came out due at %v, was pushed at %v", e, at, want)
				}
				got = append(got, e)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("popped %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("popped %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// Pushes and pops interleaved at random, on few distinct times so that
// ties abound, against the rule itself: the earliest time, and among
// those the first pushed.
func TestQueueMatchesTheRule(t *testing.T) {
	type ev struct {
		at time.Time
		n  int
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var q Queue[int]
	var pending []ev // in push order
	pushed := 0
	for step := 0; step < 4000; step++ {
		if rng.IntN(3) > 0 || len(pending) == 0 {
			at := t0.Add(time.Duration(rng.IntN(8)) * time.Second)
			q.Push(at, pushed)
			pending = append(pending, ev{at, pushed})
			pushed++
			continue
		}
		first := 0
		for i, e := range pending {
			if e.at.Before(pending[first].at) {
				first = i
			}
		}
		want := pending[first]
		pending = append(pending[:first], pending[first+1:]...)
		at, n, ok := q.Pop()
		if !ok || n != want.n || !at.Equal(want.at) {
			t.Fatalf("step %d: Pop() = %v, %d, %v; want %v, %d", step, at, n, ok, want.at, want.n)
		}
		if q.Len() != len(pending) {
			t.Fatalf("step %d: Len() = %d, want %d", step, q.Len(), len(pending))
		}
	}
}

// A popped event's slot no longer holds it: a queue of pointers does not
// keep what it handed back alive.
func TestQueuePopClearsTheSlot(t *testing.T) {
	var q Queue[*int]
	for i := range 3 {
		q.Push(t0.Add(time.Duration(i)), new(int))
	}
	q.Pop()
	if e := q.items[:3][2].e; e != nil {
		t.Errorf("the vacated slot still holds %p", e)
	}
}

// BenchmarkQueue pushes and pops one event at a time on a queue holding
// about 1000, as a simulation's steady state does.
func BenchmarkQueue(b *testing.B) {
	var q Queue[int]
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 1000 {
		q.Push(t0.Add(time.Duration(rng.IntN(1e9))), i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		at, e, _ := q.Pop()
		q.Push(at.Add(time.Duration(rng.IntN(1e9))), e)
	}
}

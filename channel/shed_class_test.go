package channel

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/internal/retryexec"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/shed"
	"github.com/uber/tchannel-go"
)

// classGate is a gate server on a fake clock (the one its limits' windows
// follow) with a Sluice client that sends each call once: no busy
// throttling, and the server's Busy answers say not to retry.
type classGate struct {
	*gateServer
	clk    *clock.Fake
	client *Client
	// short is released apart from the gate server's release: its calls
	// run "short", theirs "work".
	short chan struct{}
}

func startClassGate(t *testing.T, cfg ShedConfig) *classGate {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg.NoRetry = true
	ch, err := New("kv", WithShedding(cfg), WithClock(clk))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	g := &gateServer{ch: ch, release: make(chan struct{})}
	short := make(chan struct{})
	for method, release := range map[string]chan struct{}{"work": g.release, "short": short} {
		if err := ch.RegisterRaw(method, func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
			g.running.Add(1)
			defer g.running.Add(-1)
			<-release
			return &RawResponse{}, nil
		}); err != nil {
			t.Fatalf("RegisterRaw: %v", err)
		}
	}
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
	t.Cleanup(ch.Close)
	// Runs before ch.Close (cleanups run last first): a test that failed
	// half way leaves no handler waiting.
	t.Cleanup(func() {
		for _, c := range []chan struct{}{g.release, short} {
			select {
			case <-c:
			default:
				close(c)
			}
		}
	})
	g2 := &classGate{gateServer: g, clk: clk, short: short}
	g2.client = g2.caller(t, "client")
	return g2
}

// caller returns a Client of "kv" on a Channel of its own, which calls
// from caller (its TChannel caller name).
func (g *classGate) caller(t *testing.T, caller string) *Client {
	t.Helper()
	client, err := New(caller, WithBusyConfig(busy.Config{Disabled: true}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(client.Close)
	kv := to(client, "kv")
	if err := kv.AddPeer(g.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	return kv
}

// callAs sends one call of method and class cls through kv and returns
// its error when it ends.
func (g *classGate) callAs(kv *Client, method string, cls criticality.Class) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(criticality.WithClass(context.Background(), cls), testwait.Limit)
		defer cancel()
		_, err := kv.CallRaw(ctx, method, nil, nil)
		done <- err
	}()
	return done
}

// admitted sends a call of class cls and waits until its handler runs, as
// the n-th at once.
func (g *classGate) admitted(t *testing.T, cls criticality.Class, n int) <-chan error {
	t.Helper()
	return g.admittedAs(t, g.client, "work", cls, n)
}

// admittedAs is admitted for a call of method through kv.
func (g *classGate) admittedAs(t *testing.T, kv *Client, method string, cls criticality.Class, n int) <-chan error {
	t.Helper()
	done := g.callAs(kv, method, cls)
	testwait.Until(t, "the call's handler running", func() bool {
		select {
		case err := <-done:
			t.Fatalf("%v call: got %v, want it admitted", cls, err)
		default:
		}
		return g.running.Load() == int64(n)
	})
	return done
}

// refused sends a call of class cls and returns the class its Busy answer
// names as refused (0: none), failing unless it is Busy. (The client has
// taken the pushback hint off the message: TestBusyNamesClassBeforeHint
// checks the server's own.)
func (g *classGate) refused(t *testing.T, cls criticality.Class) criticality.Class {
	t.Helper()
	return g.refusedAs(t, g.client, cls)
}

// refusedAs is refused for a call through kv.
func (g *classGate) refusedAs(t *testing.T, kv *Client, cls criticality.Class) criticality.Class {
	t.Helper()
	var err error
	select {
	case err = <-g.callAs(kv, "work", cls):
	case <-time.After(testwait.Limit):
		t.Fatalf("%v call: no answer", cls)
	}
	var ce *CallError
	if !errors.As(err, &ce) || ce.Code != codes.Busy {
		t.Fatalf("%v call: got %v, want Busy", cls, err)
	}
	named, _ := refusingOf(ce.Message)
	return named
}

// TestShedByClassOnARealServer: a server with MaxInFlight 4 refuses a
// sheddable call while it leaves room to critical ones; once
// critical_plus calls overflow its limit for a window it refuses
// sheddable calls wholesale and says so, and a window later it partially
// admits critical (the boundary) and names sheddable_plus, the highest
// class refused wholesale, in its Busy answers, whatever class they
// answer.
func TestShedByClassOnARealServer(t *testing.T) {
	g := startClassGate(t, ShedConfig{MaxInFlight: 4})
	var admitted []<-chan error
	for i := 1; i <= 3; i++ {
		admitted = append(admitted, g.admitted(t, criticality.Critical, i))
	}
	if got := g.refused(t, criticality.Sheddable); got != 0 {
		t.Errorf("sheddable refused at the headroom names %v, want none (nothing is refused wholesale yet)", got)
	}
	admitted = append(admitted, g.admitted(t, criticality.Critical, 4))
	for range 3 {
		g.refused(t, criticality.CriticalPlus) // the limit overflows
	}
	// sheddable_plus is about too (else the level passes it: see
	// package shed's doc).
	if got := g.refused(t, criticality.SheddablePlus); got != 0 {
		t.Errorf("sheddable_plus refused at the limit names %v, want none yet", got)
	}

	g.clk.Add(100 * time.Millisecond) // the window ends
	if got, want := g.refused(t, criticality.Sheddable), criticality.Sheddable; got != want {
		t.Errorf("sheddable refused after a window of overflow names %v, want %v", got, want)
	}
	for range 3 {
		if got, want := g.refused(t, criticality.CriticalPlus), criticality.Sheddable; got != want {
			t.Errorf("critical_plus refused at the limit names %v, want %v", got, want)
		}
	}

	g.clk.Add(100 * time.Millisecond)
	for _, cls := range []criticality.Class{criticality.Critical, criticality.Sheddable, criticality.CriticalPlus} {
		if got, want := g.refused(t, cls), criticality.SheddablePlus; got != want {
			t.Errorf("%v refused after two windows of overflow names %v, want %v", cls, got, want)
		}
	}
	close(g.release)
	close(g.short)
	for _, done := range admitted {
		if err := <-done; err != nil {
			t.Errorf("admitted call: %v", err)
		}
	}
}

// TestFirstComeFirstServedIsClassBlind: with FirstComeFirstServed a
// sheddable call takes the last slot as a critical one would, and Busy
// answers name no class.
func TestFirstComeFirstServedIsClassBlind(t *testing.T) {
	g := startClassGate(t, ShedConfig{MaxInFlight: 4, FirstComeFirstServed: true})
	var admitted []<-chan error
	for i := 1; i <= 3; i++ {
		admitted = append(admitted, g.admitted(t, criticality.CriticalPlus, i))
	}
	admitted = append(admitted, g.admitted(t, criticality.Sheddable, 4))
	for w := 0; w < 3; w++ {
		for _, cls := range []criticality.Class{criticality.CriticalPlus, criticality.Critical, criticality.Sheddable} {
			if got := g.refused(t, cls); got != 0 {
				t.Errorf("%v refused names %v, want none", cls, got)
			}
		}
		g.clk.Add(100 * time.Millisecond)
	}
	close(g.release)
	close(g.short)
	for _, done := range admitted {
		if err := <-done; err != nil {
			t.Errorf("admitted call: %v", err)
		}
	}
}

// TestAdaptiveShedByClass: the adaptive limit orders classes too. Fixed
// at 4 (MinLimit = MaxLimit), it refuses sheddable at the headroom and
// admits critical_plus into the last slot.
func TestAdaptiveShedByClass(t *testing.T) {
	g := startClassGate(t, ShedConfig{Adaptive: &shed.Config{MinLimit: 4, MaxLimit: 4}})
	var admitted []<-chan error
	for i := 1; i <= 3; i++ {
		admitted = append(admitted, g.admitted(t, criticality.Critical, i))
	}
	g.refused(t, criticality.Sheddable)
	admitted = append(admitted, g.admitted(t, criticality.CriticalPlus, 4))
	g.refused(t, criticality.CriticalPlus)
	close(g.release)
	close(g.short)
	for _, done := range admitted {
		if err := <-done; err != nil {
			t.Errorf("admitted call: %v", err)
		}
	}
}

// TestBusyNamesClassBeforeHint: the Busy answer of a limit that refuses a
// class wholesale names it before the pushback hint, which stays the last
// word; with FirstComeFirstServed it names none.
func TestBusyNamesClassBeforeHint(t *testing.T) {
	for _, fcfs := range []bool{false, true} {
		clk := clock.NewFake(time.Unix(1_700_000_000, 0))
		s, err := newShedder(ShedConfig{MaxInFlight: 4, FirstComeFirstServed: fcfs}, clk)
		if err != nil {
			t.Fatal(err)
		}
		m := s.forMethod("work")
		for range 4 {
			if _, _, err := m.admit(criticality.Critical, "caller"); err != nil {
				t.Fatalf("admit: %v", err)
			}
		}
		for _, c := range []criticality.Class{criticality.CriticalPlus, criticality.CriticalPlus, criticality.CriticalPlus, criticality.SheddablePlus} {
			if _, _, err := m.admit(c, "caller"); err == nil {
				t.Fatalf("admit %v over the limit: got nil, want Busy", c)
			}
		}
		clk.Add(100 * time.Millisecond)
		_, _, err = m.admit(criticality.Sheddable, "caller")
		var se tchannel.SystemError
		if !errors.As(err, &se) || se.Code() != tchannel.ErrCodeBusy {
			t.Fatalf("FirstComeFirstServed=%v: got %v, want Busy", fcfs, err)
		}
		p, rest := retryexec.PushbackFromMessage(se.Message())
		if p.Kind != retry.PushbackDelay {
			t.Errorf("FirstComeFirstServed=%v: pushback of %q: got %v, want %v", fcfs, se.Message(), p.Kind, retry.PushbackDelay)
		}
		want := criticality.Sheddable
		if fcfs {
			want = 0
		}
		if got, _ := refusingOf(rest); got != want {
			t.Errorf("FirstComeFirstServed=%v: %q names %v, want %v", fcfs, se.Message(), got, want)
		}
	}
}

// TestHeavyCallerRefusedFirstOnARealServer: on a server with MaxInFlight
// 8, a caller that sent far more than another while the limit was full is,
// in the next window, refused once 6 are in flight, while the other
// caller still gets the last two slots.
func TestHeavyCallerRefusedFirstOnARealServer(t *testing.T) {
	heavyThenLight(t, func(*classGate) {})
}

// TestCallerFloodOnARealServer: hundreds of invented caller names (a
// Sluice client names each call's caller with WithCallerName), sent while
// the limit is full, cannot hide a heavy caller or cut out a light one:
// they share the fixed caller table and its overflow bucket, and in the
// next window the heavy caller is refused at the headroom while the light
// one finds the last slots, as on a server without the flood
// (TestHeavyCallerRefusedFirstOnARealServer).
func TestCallerFloodOnARealServer(t *testing.T) {
	heavyThenLight(t, func(g *classGate) {
		flooder := g.caller(t, "flooder")
		ctx := ctxTimeout(t)
		for i := range 500 {
			_, err := flooder.CallRaw(ctx, "work", nil, nil, WithCallerName(fmt.Sprintf("invented-%d", i)))
			if ce := (*CallError)(nil); !errors.As(err, &ce) || ce.Code != codes.Busy {
				t.Fatalf("flood call %d: %v, want Busy: the limit is full", i, err)
			}
		}
	})
}

// heavyThenLight runs, on a server with MaxInFlight 8, a window in which a
// heavy caller fills the limit and is refused 20 times and a light one is
// refused twice, then meanwhile (the limit still full); and checks that in
// the next window the heavy caller is admitted only up to the headroom
// (6 in flight) while the light one gets the last two slots.
func heavyThenLight(t *testing.T, meanwhile func(g *classGate)) {
	g := startClassGate(t, ShedConfig{MaxInFlight: 8})
	heavy, light := g.caller(t, "heavy"), g.caller(t, "light")
	var short, admitted []<-chan error
	for i := 1; i <= 4; i++ {
		short = append(short, g.admittedAs(t, heavy, "short", criticality.Critical, i))
	}
	for i := 5; i <= 8; i++ {
		admitted = append(admitted, g.admittedAs(t, heavy, "work", criticality.Critical, i))
	}
	for range 20 {
		g.refusedAs(t, heavy, criticality.Critical)
	}
	for range 2 {
		g.refusedAs(t, light, criticality.Critical)
	}
	meanwhile(g)
	close(g.short)
	for _, done := range short {
		if err := <-done; err != nil {
			t.Fatalf("short call: %v", err)
		}
	}
	testwait.Until(t, "4 calls in flight", func() bool { return g.running.Load() == 4 })

	g.clk.Add(100 * time.Millisecond) // the window ends
	for i := 5; i <= 6; i++ {
		admitted = append(admitted, g.admittedAs(t, heavy, "work", criticality.Critical, i))
	}
	g.refusedAs(t, heavy, criticality.Critical) // at the headroom
	for i := 7; i <= 8; i++ {
		admitted = append(admitted, g.admittedAs(t, light, "work", criticality.Critical, i))
	}
	g.refusedAs(t, light, criticality.Critical) // at the limit
	close(g.release)
	for _, done := range admitted {
		if err := <-done; err != nil {
			t.Errorf("admitted call: %v", err)
		}
	}
}

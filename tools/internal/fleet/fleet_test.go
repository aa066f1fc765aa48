package fleet

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// testEnv makes this test binary a child that writes "listening ADDR",
// "event", "error oops" and then waits for its stdin to end; set to
// testBare, it writes "listening" alone, to testSilent nothing, to
// testChatty 100 error lines and 100 words after its listening line.
const (
	testEnv    = "SLUICE_FLEET_TEST"
	testBare   = "bare"
	testSilent = "silent"
	testChatty = "chatty"
)

func TestMain(m *testing.M) {
	if v := os.Getenv(testEnv); v != "" {
		out := &Lines{W: os.Stdout}
		switch v {
		case testSilent:
		case testBare:
			out.Line(Listening)
		case testChatty:
			out.Line(Listening, "127.0.0.1:1")
			for i := range 100 {
				out.Fail(fmt.Errorf("e%d", i))
				out.Line(fmt.Sprintf("w%d", i))
			}
		default:
			out.Line(Listening, "127.0.0.1:1", "multi\nline")
			out.Line("event")
			out.Fail(errors.New("oops"))
		}
		os.Stdin.Read(make([]byte, 1))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestChildWaitsForWords(t *testing.T) {
	events := make(chan string, 4)
	c, err := Start(testEnv+"=1", "fleet.TestMain", testwait.Limit, func(f []string) bool {
		if f[0] == "event" {
			events <- f[0]
			return true
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	if args := c.Seen(Listening); len(args) != 3 || c.Addr != "127.0.0.1:1" || args[1] != "multi;" {
		t.Fatalf("listening: %q at %q; want the address and the line's words", args, c.Addr)
	}
	testwait.Recv(t, events, "the event line")
	if err := c.Proc.Close(testwait.Limit); err != nil {
		t.Fatal(err)
	}
	_, err = c.Wait("never", "say never", testwait.Limit)
	if err == nil || !strings.Contains(err.Error(), "exited before it could say never") || !strings.Contains(err.Error(), "it said: oops") {
		t.Errorf("waiting for a word never written: %v, want the child's exit and its error line", err)
	}
}

func TestArrivals(t *testing.T) {
	start := time.Now()
	var scheds []time.Time
	n := arrivals(start, 1000, 5, nil, func(_ int, sched, at time.Time) {
		if at.Before(sched) {
			t.Errorf("arrival at %v, before its schedule %v", at, sched)
		}
		scheds = append(scheds, sched)
	})
	if n != 5 || len(scheds) != 5 || scheds[4].Sub(start) != 4*time.Millisecond {
		t.Errorf("%d arrivals, schedule %v; want 5, 1 ms apart", n, scheds)
	}
	stop := make(chan struct{})
	close(stop)
	if n := arrivals(time.Now().Add(time.Hour), 1, -1, stop, func(_ int, _, _ time.Time) {}); n != 0 {
		t.Errorf("%d arrivals after stop, want 0", n)
	}
}

// Load gathers what every call returned in time, and leaves out a call
// still out when the drain ends.
func TestLoad(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	got, hung, ended := Load(time.Now(), 1000, 4, nil, 50*time.Millisecond, func(i int, _, _ time.Time) int {
		if i == 3 {
			<-release
		}
		return i
	})
	slices.Sort(got)
	if hung != 1 || fmt.Sprint(got) != "[0 1 2]" {
		t.Errorf("Load = %v, %d hung; want [0 1 2], 1", got, hung)
	}
	if waited := time.Since(ended); waited < 50*time.Millisecond {
		t.Errorf("Load returned %v after the arrivals ended, want the drain, 50ms", waited)
	}
}

func TestClosersAndCodes(t *testing.T) {
	var order []int
	var c Closers
	c.Add(func() { order = append(order, 1) })
	c = append(c, func() error { order = append(order, 2); return errors.New("two") })
	if err := c.Close(); err == nil || fmt.Sprint(order) != "[2 1]" || c != nil {
		t.Errorf("Close: %v, order %v; want the error, last first, and the list emptied", err, order)
	}
	if got := Codes(map[string]int{"B": 2, "A": 2, "C": 5}, "%[2]d %[1]s"); got != "5 C, 2 A, 2 B" {
		t.Errorf("Codes = %q, want the most frequent first, ties by name", got)
	}
}

// A child that exits without listening is an error naming the hook.
func TestStartNamesTheHook(t *testing.T) {
	_, err := Start("SLUICE_FLEET_NOTHING=1", "fleet.Nothing", testwait.Limit, nil)
	if err == nil || !strings.Contains(err.Error(), "exited before it could listen") || !strings.Contains(err.Error(), "call fleet.Nothing first thing") {
		t.Errorf("Start of a child that does not serve: %v, want its exit and the hook named", err)
	}
}

// A listening line without an address is an error, not a panic.
func TestStartWantsAnAddress(t *testing.T) {
	_, err := Start(testEnv+"="+testBare, "fleet.TestMain", testwait.Limit, nil)
	if err == nil || !strings.Contains(err.Error(), "without its HOST:PORT") {
		t.Errorf("Start of a child listening nowhere: %v, want an error saying so", err)
	}
}

// A child that never reports fails Start within its limit, and is ended:
// it did not exit, so the error does not blame a missing hook.
func TestStartEndsASilentChild(t *testing.T) {
	began := time.Now()
	_, err := Start(testEnv+"="+testSilent, "fleet.TestMain", 100*time.Millisecond, nil)
	if err == nil || !strings.Contains(err.Error(), "did not listen within 100ms") || strings.Contains(err.Error(), "fleet.TestMain") {
		t.Errorf("Start of a silent child: %v, want its limit passed and no hook named", err)
	}
	if took := time.Since(began); took > exitLimit {
		t.Errorf("Start took %v, want the limit and the child's exit on its stdin's end, well within %v", took, exitLimit)
	}
}

// What a child writes is kept within bounds, however much it writes.
func TestChildKeepsBoundedLines(t *testing.T) {
	c, err := Start(testEnv+"="+testChatty, "fleet.TestMain", testwait.Limit, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Proc.Close(testwait.Limit); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) != maxKept || len(c.first) != maxWords || len(c.others) != maxKept {
		t.Errorf("kept %d errors, %d words, %d other lines; want %d, %d, %d", len(c.errs), len(c.first), len(c.others), maxKept, maxWords, maxKept)
	}
}

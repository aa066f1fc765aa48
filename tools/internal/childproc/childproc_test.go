package childproc

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"go.uber.org/goleak"
)

// testEnv makes this test binary one of the children below.
const testEnv = "SLUICE_CHILDPROC_TEST"

// TestMain runs the children the tests start: "echo" writes "ready", then
// each line of its stdin back with "got " before it, and exits when stdin
// ends; "gorace" writes its GORACE and exits; "stubborn" writes "ready" and never exits on its own.
func TestMain(m *testing.M) {
	switch os.Getenv(testEnv) {
	case "echo":
		fmt.Println("ready")
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			fmt.Println("got " + sc.Text())
		}
		fmt.Fprintln(os.Stderr, "echo: stdin ended")
		os.Exit(0)
	case "gorace":
		fmt.Println(os.Getenv("GORACE"))
		os.Exit(0)
	case "stubborn":
		fmt.Println("ready")
		// Not select{}: with no other goroutine the runtime would end the
		// process as deadlocked, which is exiting on its own.
		for {
			time.Sleep(time.Hour)
		}
	}
	goleak.VerifyTestMain(m)
}

// lines collects a child's output lines on a channel.
func lines() (chan string, func(string)) {
	c := make(chan string, 16)
	return c, func(l string) { c <- l }
}

func TestChildTalksAndExitsWithItsStdin(t *testing.T) {
	out, onLine := lines()
	var all strings.Builder // written by the child's stderr copier, read after its exit
	p, err := Start(Config{Env: testEnv + "=echo", OnLine: onLine, Stderr: &all})
	if err != nil {
		t.Fatal(err)
	}
	if l := testwait.Recv(t, out, "the child's first line"); l != "ready" {
		t.Fatalf("first line %q, want ready", l)
	}
	if err := p.Send("hello"); err != nil {
		t.Fatal(err)
	}
	if l := testwait.Recv(t, out, "the echo"); l != "got hello" {
		t.Fatalf("echo %q, want %q", l, "got hello")
	}
	if err := p.Close(testwait.Limit); err != nil {
		t.Fatal(err)
	}
	testwait.Recv(t, p.Exited(), "the child's exit")
	if !strings.Contains(p.Stderr(), "stdin ended") {
		t.Errorf("stderr %q, want the child's last words", p.Stderr())
	}
	if all.String() != p.Stderr() {
		t.Errorf("Config.Stderr got %q, want all the child wrote: %q", all.String(), p.Stderr())
	}
	if st := p.ProcessState(); st == nil || st.ExitCode() != 0 {
		t.Errorf("ProcessState %v, want exit status 0", st)
	}
	if err := p.Send("again"); err == nil {
		t.Error("Send after Close succeeded")
	}
}

func TestCloseKillsAChildThatDoesNotExit(t *testing.T) {
	out, onLine := lines()
	p, err := Start(Config{Env: testEnv + "=stubborn", OnLine: onLine})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Recv(t, out, "the child's first line")
	if st := p.ProcessState(); st != nil {
		t.Fatalf("ProcessState %v while the child runs, want nil", st)
	}
	start := time.Now()
	if err := p.Close(100 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Errorf("Close returned after %v, before the limit: the child exited on its own?", el)
	}
	testwait.Recv(t, p.Exited(), "the killed child's exit")
}

func TestStartNeedsEnv(t *testing.T) {
	if _, err := Start(Config{}); err == nil || !strings.Contains(err.Error(), "Config.Env") {
		t.Fatalf("Start without Env: %v, want an error naming Config.Env", err)
	}
}

// A child built with -race must exit at once, not after the race
// detector's default second.
func TestChildExitsWithoutTheRaceDetectorsSleep(t *testing.T) {
	out, onLine := lines()
	p, err := Start(Config{Env: testEnv + "=gorace", OnLine: onLine})
	if err != nil {
		t.Fatal(err)
	}
	if l := testwait.Recv(t, out, "the child's GORACE"); !strings.Contains(l, "atexit_sleep_ms=0") {
		t.Errorf("the child's GORACE is %q, want atexit_sleep_ms=0 in it", l)
	}
	if err := p.Close(testwait.Limit); err != nil {
		t.Fatal(err)
	}
}

// Memory reads a live process's resident and peak memory, and fails for
// a process that does not exist.
func TestMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	const size = 64 << 20
	b := make([]byte, size)
	for i := range b {
		b[i] = 1 // touched, so resident
	}
	rss, hwm, err := Memory(os.Getpid())
	runtime.KeepAlive(b)
	if err != nil {
		t.Fatal(err)
	}
	if rss < size || hwm < rss {
		t.Errorf("RSS %d, peak %d bytes; want RSS >= %d (a touched buffer) and peak >= RSS", rss, hwm, size)
	}
	if _, _, err := Memory(-1); err == nil {
		t.Error("Memory(-1) succeeded, want an error")
	}
}

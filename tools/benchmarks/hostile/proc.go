package hostile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/childproc"
)

// procExitLimit bounds the wait for a child process to exit once asked (its
// stdin closed and SIGTERM), and again once killed.
const procExitLimit = 10 * time.Second

// proc is a child process: its stdout lines go to a channel, its stderr to
// a file as well.
type proc struct {
	*childproc.Proc
	lines  chan string // stdout, closed once the process has exited
	stderr *stderrFile
}

// startProc starts a child as cfg says (but for OnLine and Stderr). Lines
// of its stdout are sent on p.lines, which the caller must drain (or the
// process blocks writing).
func startProc(cfg childproc.Config) (*proc, error) {
	errf, err := newStderrFile()
	if err != nil {
		return nil, err
	}
	p := &proc{lines: make(chan string, 1024), stderr: errf}
	cfg.OnLine = func(l string) { p.lines <- l }
	cfg.Stderr = errf.f
	if p.Proc, err = childproc.Start(cfg); err != nil {
		errf.close()
		return nil, err
	}
	go func() {
		<-p.Exited() // OnLine has had every line
		close(p.lines)
	}()
	return p, nil
}

// dead reports whether the process has exited.
func (p *proc) dead() bool {
	select {
	case <-p.Exited():
		return true
	default:
		return false
	}
}

// stop asks the process to end (SIGTERM, and its stdin closed), and kills
// it if it has not within procExitLimit. It returns an error only if it
// outlives SIGKILL. Its stderr is then gone.
func (p *proc) stop() error {
	defer p.stderr.close()
	if !p.dead() {
		p.Process().Signal(sigTerm) // a server does not read its stdin
	}
	return p.Close(procExitLimit)
}

// crash describes how the process died, if it died of a Go panic or fatal
// error: the panic's message and the first frame outside the runtime
// ("index out of range [4] with length 4 at checksum.go:45"). Otherwise
// it is its exit status.
func (p *proc) crash() string {
	if !p.dead() {
		return ""
	}
	if c := p.stderr.crash(); c != "" {
		return c
	}
	if st := p.ProcessState(); st != nil {
		return st.String()
	}
	return "exited"
}

// framePattern matches a stack frame's file line: "\t/path/file.go:123 +0x1f".
var framePattern = regexp.MustCompile(`^\t(\S+\.go):(\d+)`)

// panicOf finds a Go panic or fatal error in a process's stderr and
// returns its message and the first stack frame outside the runtime.
func panicOf(stderr io.Reader) string {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	msg := ""
	for sc.Scan() {
		l := sc.Text()
		if msg == "" {
			for _, prefix := range []string{"panic: ", "fatal error: "} {
				if strings.HasPrefix(l, prefix) {
					msg = strings.TrimSpace(l)
				}
			}
			continue
		}
		m := framePattern.FindStringSubmatch(l)
		if m == nil || strings.Contains(m[1], "/src/runtime/") {
			continue
		}
		file := m[1][strings.LastIndexByte(m[1], '/')+1:]
		return fmt.Sprintf("%s at %s:%s", msg, file, m[2])
	}
	return msg
}

// stderrFile is a child's standard error, kept in a temporary file: a
// crash's goroutine dump may run to megabytes, with the panic's message
// at its start, after whatever the child wrote before.
type stderrFile struct{ f *os.File }

func newStderrFile() (*stderrFile, error) {
	f, err := os.CreateTemp("", "sluice-hostile-stderr-")
	if err != nil {
		return nil, err
	}
	return &stderrFile{f}, nil
}

// read returns at most n bytes of the file from off (negative: from the
// end).
func (s *stderrFile) read(off int64, n int) string {
	if off < 0 {
		if fi, err := s.f.Stat(); err == nil {
			off = max(0, fi.Size()+off)
		}
	}
	b := make([]byte, n)
	k, _ := s.f.ReadAt(b, off)
	return string(b[:k])
}

// head is the start of what the child wrote.
func (s *stderrFile) head() string { return s.read(0, 64<<10) }

// last is the last line the child wrote.
func (s *stderrFile) last() string { return lastLine(s.read(-4096, 4096)) }

// crash is the panic the child died of, if any.
func (s *stderrFile) crash() string {
	return panicOf(io.NewSectionReader(s.f, 0, 1<<40))
}

// close removes the file.
func (s *stderrFile) close() {
	s.f.Close()
	os.Remove(s.f.Name())
}

// lastLine is the last non-empty line of s, for error messages.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// errNoChildHook is the error of a child that ran the test or program
// instead of its job.
var errNoChildHook = errors.New("the child exited before reporting: does the binary call hostile.RunChildIfAsked first thing in main (or TestMain)?")

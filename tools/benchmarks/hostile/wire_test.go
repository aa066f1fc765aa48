package hostile

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/internal/tframe"
)

// reassemble reads a call's frames back into its arguments, as a
// receiver does: a chunk that is not the first of its frame starts the
// next argument.
func reassemble(t *testing.T, frames [][]byte) [3][]byte {
	t.Helper()
	var args [3][]byte
	ai := 0
	for n, f := range frames {
		fr, err := tframe.Parse(f)
		if err != nil {
			t.Fatalf("frame %d: %v", n, err)
		}
		if want := n < len(frames)-1; fr.More != want {
			t.Fatalf("frame %d of %d: more fragments %v, want %v", n, len(frames), fr.More, want)
		}
		p := f[tframe.HeaderSize:]
		var chunks [][]byte
		if n == 0 {
			if fr.Type != tframe.CallReq {
				t.Fatalf("frame 0 is a %v", fr.Type)
			}
			p = p[1+4+tframe.TracingSize:]
			p = p[1+int(p[0]):] // service
			chunks = splitChunks(p, true)
		} else {
			chunks = splitChunks(p[1:], false)
		}
		for i, c := range chunks {
			if i > 0 {
				ai++
			}
			if ai >= len(args) {
				t.Fatalf("frame %d: more than three arguments", n)
			}
			args[ai] = append(args[ai], c...)
		}
	}
	if ai != 2 {
		t.Fatalf("%d arguments, want 3", ai+1)
	}
	return args
}

// callSpec.frames splits arguments as the protocol says, whatever their
// sizes: one ending exactly at a frame's end is closed by an empty chunk.
func TestCallSpecFrames(t *testing.T) {
	room := maxChunks(Service, callHeaders("raw")) - (2 + len(MethodEcho)) - 2 // for arg2's bytes in frame 0
	tests := []struct {
		name       string
		arg2, arg3 int
		fragment   int
	}{
		{"small", 3, 5, 0},
		{"empty", 0, 0, 0},
		{"arg2 fills frame 0", room, 10, 0},
		{"arg2 leaves 1 byte", room - 1, 10, 0},
		{"arg2 leaves 2 bytes", room - 2, 10, 0},
		{"arg2 leaves 3 bytes", room - 3, 10, 0},
		{"arg3 fills frame 0", 0, room - 2, 0},
		{"4 MB arg3", 7, 4_000_000, 0},
		{"1 MB arg2, 1 MB arg3", 1 << 20, 1 << 20, 0},
		{"small fragments", 300, 1000, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			arg2, arg3 := pattern(tc.arg2, 2), pattern(tc.arg3, 3)
			spec := callSpec{id: 5, scheme: "raw", arg2: arg2, arg3: arg3, fragment: tc.fragment}
			var frames [][]byte
			if err := spec.frames(func(f []byte, _ bool) error {
				frames = append(frames, bytes.Clone(f))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			args := reassemble(t, frames)
			if string(args[0]) != MethodEcho || !bytes.Equal(args[1], arg2) || !bytes.Equal(args[2], arg3) {
				t.Errorf("%d frames read back as %d, %d, %d bytes; want %d, %d, %d",
					len(frames), len(args[0]), len(args[1]), len(args[2]), len(MethodEcho), len(arg2), len(arg3))
			}
		})
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i) + seed
	}
	return b
}

// panicOf names a Go panic and the first frame outside the runtime.
func TestPanicOf(t *testing.T) {
	stderr := `sluice serve: debug endpoints on http://127.0.0.1:1 (/metrics)
panic: runtime error: index out of range [4] with length 4

goroutine 7 [running]:
github.com/uber/tchannel-go.ChecksumType.pool(...)
	/root/go/pkg/mod/github.com/uber/tchannel-go@v1.34.6/checksum.go:85
github.com/uber/tchannel-go.ChecksumType.New(0x4)
	/root/go/pkg/mod/github.com/uber/tchannel-go@v1.34.6/checksum.go:90 +0x1d
`
	want := "panic: runtime error: index out of range [4] with length 4 at checksum.go:85"
	if got := panicOf(strings.NewReader(stderr)); got != want {
		t.Errorf("panicOf = %q, want %q", got, want)
	}
	if got := panicOf(strings.NewReader("fatal error: out of memory\n")); got != "fatal error: out of memory" {
		t.Errorf("panicOf(fatal error) = %q", got)
	}
	if got := panicOf(strings.NewReader("nothing wrong\n")); got != "" {
		t.Errorf("panicOf(no panic) = %q, want empty", got)
	}
}

// WriteTable prints a row per figure, escaping Markdown's pipes.
func TestWriteTable(t *testing.T) {
	r := &Result{Attack: Checksum}
	r.Cases = []Case{{Name: "a|b", Survived: true, Closed: true}}
	r.caseFigures()
	r.Server.AliveAfter = true
	r.serverFigures()
	var b bytes.Buffer
	if err := WriteTable(&b, []*Result{r}, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| attack | figure | value |", `| checksum | a\|b | connection closed after 0.00ms |`, "| checksum | server | survived |"} {
		if !bytes.Contains(b.Bytes(), []byte(want)) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
}

// panicOf finds a Go panic or fatal error in a process's stderr and
// returns its message and the first stack frame outside the runtime.
func panicOf(stderr io.Reader) string {
	var w stderrWatch
	io.Copy(&w, stderr)
	return w.crash()
}

package hostile

import (
	"bytes"
	"strings"
	"testing"
)

// A child's stderr line that never ends, and a client's stdout past its
// bound, are kept bounded: the tail of the line, the head of the output.
func TestChildOutputBounded(t *testing.T) {
	var w stderrWatch
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for range 32 { // 2 MiB without a newline
		w.Write(chunk)
	}
	w.Write([]byte("end"))
	if got := w.last(); len(got) != maxStderrLine || !strings.HasSuffix(got, "end") {
		t.Errorf("the unended line kept %d bytes ending %q, want its last %d", len(got), got[max(0, len(got)-3):], maxStderrLine)
	}
	w.Write(append(bytes.Repeat([]byte("y"), 2*maxStderrLine), '\n'))
	if got := w.last(); len(got) != maxStderrLine {
		t.Errorf("the last line kept %d bytes, want %d", len(got), maxStderrLine)
	}

	var h headBuffer
	h.Write([]byte("{"))
	big := bytes.Repeat([]byte("z"), 1<<20)
	for range 20 {
		if n, err := h.Write(big); n != len(big) || err != nil {
			t.Fatalf("Write: %d, %v", n, err)
		}
	}
	if s := h.String(); len(s) != maxClientStdout || s[0] != '{' {
		t.Errorf("the output kept %d bytes, want the first %d", len(s), maxClientStdout)
	}
}

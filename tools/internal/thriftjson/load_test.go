//go:build linux || darwin || freebsd || netbsd || openbsd

package thriftjson

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/namedpipe"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// loadWithin loads path on a goroutine of its own, failing t if Load has
// not returned within testwait.Limit: a bad file must be an error at
// once, never a read that blocks.
func loadWithin(t *testing.T, path string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := Load(path)
		done <- err
	}()
	return testwait.Recv(t, done, "Load("+path+")")
}

func write(t *testing.T, file, text string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// nested returns a constant of n lists nested in one another, with its
// type, and a service.
func nested(n int) string {
	return "const " + strings.Repeat("list<", n) + "i32" + strings.Repeat(">", n) + " c = " +
		strings.Repeat("[", n) + strings.Repeat("]", n) + "\nservice S { void m() }\n"
}

// Files that are not regular files, files over the size bounds, too many
// files and brackets nested too deep are errors naming the file and the
// bound, from the IDL itself or from a file it includes.
func TestLoadBoundsLocalFiles(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	includes := func(name string) string { return fmt.Sprintf("include %q\nservice S { void m() }\n", name) }

	fifo := path("fifo.thrift")
	namedpipe.Make(t, fifo)
	write(t, path("includes-fifo.thrift"), includes("./fifo.thrift"))

	write(t, path("big.thrift"), strings.Repeat("#\n", MaxIDLFileBytes/2)+"#")
	write(t, path("includes-big.thrift"), includes("./big.thrift"))

	// Five files of 3.5 MiB of comments: each under the bound of a file,
	// together over that of an IDL.
	var sum strings.Builder
	for i := range 5 {
		write(t, path(fmt.Sprintf("part%d.thrift", i)), strings.Repeat("# part\n", (7<<19)/7))
		fmt.Fprintf(&sum, "include \"./part%d.thrift\"\n", i)
	}
	write(t, path("sum.thrift"), sum.String()+"service S { void m() }\n")

	// A chain of includes one file longer than the bound.
	for i := range MaxIDLFiles {
		write(t, path(fmt.Sprintf("chain%d.thrift", i)), fmt.Sprintf("include \"./chain%d.thrift\"\n", i+1))
	}
	write(t, path(fmt.Sprintf("chain%d.thrift", MaxIDLFiles)), "const i32 last = 1\n")

	write(t, path("deep.thrift"), "# a comment\n"+nested(MaxIDLDepth+1))
	write(t, path("includes-deep.thrift"), includes("./deep.thrift"))
	write(t, path("million.thrift"), "const list<i32> c = "+strings.Repeat("[", 1_000_000)+strings.Repeat("]", 1_000_000)+"\n")

	for _, tc := range []struct{ file, want string }{
		{fifo, fmt.Sprintf("%q is not a regular file", fifo)},
		{path("includes-fifo.thrift"), fmt.Sprintf("%q is not a regular file", fifo)},
		{dir, fmt.Sprintf("%q is not a regular file", dir)},
		{path("big.thrift"), fmt.Sprintf("%q is larger than 4194304 bytes (4 MiB), the most a Thrift IDL file may hold here", path("big.thrift"))},
		{path("includes-big.thrift"), fmt.Sprintf("%q is larger than 4194304 bytes", path("big.thrift"))},
		{path("sum.thrift"), fmt.Sprintf("the IDL and its includes hold more than 16777216 bytes (16 MiB, MaxIDLBytes) with %q", path("part4.thrift"))},
		{path("chain0.thrift"), "the IDL is made of more than 256 files (MaxIDLFiles)"},
		{path("deep.thrift"), fmt.Sprintf("%q nests brackets deeper than 64 (MaxIDLDepth) at line 2", path("deep.thrift"))},
		{path("includes-deep.thrift"), fmt.Sprintf("%q nests brackets deeper than 64", path("deep.thrift"))},
		{path("million.thrift"), fmt.Sprintf("%q nests brackets deeper than 64 (MaxIDLDepth) at line 1", path("million.thrift"))},
	} {
		err := loadWithin(t, tc.file)
		switch {
		case err == nil || !strings.Contains(err.Error(), tc.want):
			t.Errorf("Load(%s): %v, want an error containing %q", filepath.Base(tc.file), err, tc.want)
		case strings.Contains(err.Error(), "could not compile"):
			// The bound alone, not a compile error per include on the
			// way to the file that broke it.
			t.Errorf("Load(%s): %.300s..., want the bound's error alone", filepath.Base(tc.file), err)
		}
	}
}

// What the bounds allow loads: brackets nested MaxIDLDepth deep, and a
// chain of MaxIDLFiles files.
func TestLoadWithinBounds(t *testing.T) {
	dir := t.TempDir()
	deep := filepath.Join(dir, "deep.thrift")
	write(t, deep, nested(MaxIDLDepth))
	if err := loadWithin(t, deep); err != nil {
		t.Errorf("Load of brackets nested %d deep: %v", MaxIDLDepth, err)
	}
	for i := range MaxIDLFiles - 1 {
		write(t, filepath.Join(dir, fmt.Sprintf("chain%d.thrift", i)), fmt.Sprintf("include \"./chain%d.thrift\"\n", i+1))
	}
	write(t, filepath.Join(dir, fmt.Sprintf("chain%d.thrift", MaxIDLFiles-1)), "const i32 last = 1\n")
	if err := loadWithin(t, filepath.Join(dir, "chain0.thrift")); err != nil {
		t.Errorf("Load of a chain of %d files: %v", MaxIDLFiles, err)
	}
}

func TestCheckDepth(t *testing.T) {
	for _, tc := range []struct {
		src  string
		line int
		ok   bool
	}{
		{"{{}}", 1, true},
		{"{{{}}}", 1, false},
		{"{\n{\n[\n", 3, false},
		{"# {{{\n{}", 2, true},
		{"// {{{\n{}", 2, true},
		{"/* {{{\n{{{ */ {}", 2, true},
		{`"{{{" '[[[' "\"{{{"`, 1, true},
		{"}}}}{{", 1, true},
		{"'\n' {{{", 2, false},
		{"/* unterminated {{{", 1, true},
	} {
		line, ok := checkDepth([]byte(tc.src), 2)
		if ok != tc.ok || (!ok && line != tc.line) {
			t.Errorf("checkDepth(%q, 2) = %d, %v; want %d, %v", tc.src, line, ok, tc.line, tc.ok)
		}
	}
}

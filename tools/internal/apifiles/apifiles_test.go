package main

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommittedAPI is the check .ci/run makes with scripts/apicheck.sh:
// api/ holds exactly the exported API of the library's public packages.
func TestCommittedAPI(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("%s is not the repository's root: %v", root, err)
	}
	files, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	diff, err := compare(filepath.Join(root, "api"), files)
	if err != nil {
		t.Fatal(err)
	}
	if diff != "" {
		t.Errorf("%s\nthe exported API differs from api/ (above: - committed, + code); %s", diff, fixHint)
	}
}

// fixture declares one of each kind of feature.
const fixture = `package fix

import (
	"io"
	"time"
)

const Untyped = 1
const Str = "s"
const Long = "0123456789012345678901234567890123456789012345678901234567890123456789012345"
const Fast Mode = 2

type Mode int

func (m Mode) String() string { return "" }

var ErrX error
var Out chan<- []byte

func F(int, ...string) (io.Reader, error) { return nil, nil }
func G[T any, K comparable](T, map[K]T) K { var k K; return k }
func H(func(rune) bool, struct{ A int; b string }, interface{ Get() byte }) {}
func unexported() {}

type T struct {
	Shadow   string
	Duration time.Duration
	io.Reader
	*Other
	hidden
	private int
}

type hidden struct {
	Promoted int
	Shadow   int
	deeper
}

func (hidden) Hidden() int { return 0 }

type deeper struct{ Deep rune }

type Other struct{}

func (Other) Value()  {}
func (*Other) Ptr()   {}
func (*Other) quiet() {}

type I interface {
	io.Reader
	Close() error
}

type Empty interface{}

type Sealed interface {
	Public()
	private()
}

type Num interface{ ~int | ~float64 }

type Box[V any] struct{ Val V }

func (b *Box[V]) Get() V { return b.Val }

type Alias = Box[int]

type secret struct{ Visible int }
`

func TestFeatures(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "fix.go", fixture, 0)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: importer.Default()}
	pkg, err := conf.Check("example.com/fix", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `pkg example.com/fix, const Fast = 2
pkg example.com/fix, const Fast Mode
pkg example.com/fix, const Long = "01234567890123456789012345678901234567890123456789012345678901234567...  // "0123456789012345678901234567890123456789012345678901234567890123456789012345"
pkg example.com/fix, const Long ideal-string
pkg example.com/fix, const Str = "s"
pkg example.com/fix, const Str ideal-string
pkg example.com/fix, const Untyped = 1
pkg example.com/fix, const Untyped ideal-int
pkg example.com/fix, func F(int, ...string) (io.Reader, error)
pkg example.com/fix, func G[$0 interface{}, $1 comparable]($0, map[$1]$0) $1
pkg example.com/fix, func H(func(int32) bool, struct{ A int; b string }, interface{ Get() uint8 })
pkg example.com/fix, method (*Box[$0]) Get() $0
pkg example.com/fix, method (*Other) Ptr()
pkg example.com/fix, method (Mode) String() string
pkg example.com/fix, method (Other) Value()
pkg example.com/fix, method (T) Hidden() int
pkg example.com/fix, method (T) Ptr()
pkg example.com/fix, method (T) Read([]uint8) (int, error)
pkg example.com/fix, method (T) Value()
pkg example.com/fix, type Alias = Box[int]
pkg example.com/fix, type Box[$0 interface{}] struct
pkg example.com/fix, type Box[$0 interface{}] struct, Val $0
pkg example.com/fix, type Empty interface {}
pkg example.com/fix, type I interface { Close, Read }
pkg example.com/fix, type I interface, Close() error
pkg example.com/fix, type I interface, Read([]uint8) (int, error)
pkg example.com/fix, type Mode int
pkg example.com/fix, type Num interface {}
pkg example.com/fix, type Num interface, ~int | ~float64
pkg example.com/fix, type Other struct
pkg example.com/fix, type Sealed interface, Public()
pkg example.com/fix, type Sealed interface, unexported methods
pkg example.com/fix, type T struct
pkg example.com/fix, type T struct, Deep int32 // promoted
pkg example.com/fix, type T struct, Duration time.Duration
pkg example.com/fix, type T struct, Promoted int // promoted
pkg example.com/fix, type T struct, Shadow string
pkg example.com/fix, type T struct, embedded *Other
pkg example.com/fix, type T struct, embedded io.Reader
pkg example.com/fix, var ErrX error
pkg example.com/fix, var Out chan<- []uint8
`
	got := strings.Join(features(pkg), "\n") + "\n"
	if got != want {
		onlyWant, onlyGot := lineDiff(want, got)
		t.Errorf("features differ\nmissing:\n%s\nunexpected:\n%s\ngot, whole:\n%s", strings.Join(onlyWant, "\n"), strings.Join(onlyGot, "\n"), got)
	}
}

// TestWriteAndCompare writes a tree, changes the code's side and checks
// that compare reports each change and write makes api/ match again.
func TestWriteAndCompare(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "api")
	files := map[string][]byte{
		"busy.txt":          []byte("pkg m/busy, func New() int\npkg m/busy, type Config struct\n"),
		"leasing/old.txt":   []byte("pkg m/leasing/old, func Gone()\n"),
		"leasing/still.txt": []byte("pkg m/leasing/still, func Here()\n"),
	}
	if err := write(dir, files); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if diff, err := compare(dir, files); err != nil || diff != "" {
		t.Fatalf("compare right after write = %q, %v; want no difference", diff, err)
	}

	code := map[string][]byte{
		"busy.txt":          []byte("pkg m/busy, func New() (int, error)\npkg m/busy, type Config struct\n"),
		"leasing/still.txt": files["leasing/still.txt"],
		"shed.txt":          []byte("pkg m/shed, func New()\n"),
	}
	diff, err := compare(dir, code)
	if err != nil {
		t.Fatal(err)
	}
	want := `api/busy.txt:
-pkg m/busy, func New() int
+pkg m/busy, func New() (int, error)
api/leasing/old.txt: no such public package any more
-pkg m/leasing/old, func Gone()
api/shed.txt: missing (a new public package)
+pkg m/shed, func New()
`
	if diff != want {
		t.Errorf("compare =\n%s\nwant\n%s", diff, want)
	}

	if err := write(dir, code); err != nil {
		t.Fatal(err)
	}
	if diff, err := compare(dir, code); err != nil || diff != "" {
		t.Errorf("compare after rewriting = %q, %v; want no difference", diff, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "leasing", "old.txt")); !os.IsNotExist(err) {
		t.Errorf("leasing/old.txt: stat error %v, want it removed", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		t.Errorf("README.md: %v, want it kept", err)
	}

	// The same lines in another order are not the generator's output.
	if err := os.WriteFile(filepath.Join(dir, "busy.txt"), []byte("pkg m/busy, type Config struct\npkg m/busy, func New() (int, error)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if diff, _ := compare(dir, code); !strings.Contains(diff, "api/busy.txt:\n (the same lines, written differently") {
		t.Errorf("compare with busy.txt reordered = %q, want it reported", diff)
	}
}

// lineDiff returns the lines only in a and the lines only in b, each in
// its own text's order.
func lineDiff(a, b string) (onlyA, onlyB []string) {
	return only(a, b), only(b, a)
}

package chart

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func panels(t *testing.T, n int) []*plot.Plot {
	t.Helper()
	var ps []*plot.Plot
	for i := range n {
		p := plot.New()
		p.Title.Text = "panel " + string(rune('a'+i))
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: float64(i + 1)}})
		if err != nil {
			t.Fatal(err)
		}
		p.Add(l)
		ps = append(ps, p)
	}
	return ps
}

// Both formats, by the file's extension: a PNG image, or an SVG document
// holding every panel (three panels in rows of two leave one cell empty).
func TestWriteGrid(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ name, magic string }{
		{"c.png", "\x89PNG\r\n\x1a\n"},
		{"c.SVG", "<?xml"},
	} {
		path := filepath.Join(dir, tt.name)
		if err := WriteGrid(path, panels(t, 3), 2, 2*vg.Inch); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte(tt.magic)) {
			t.Errorf("%s starts %q, want %q", tt.name, b[:min(len(b), 8)], tt.magic)
		}
		if tt.magic == "<?xml" {
			for _, title := range []string{"panel a", "panel b", "panel c"} {
				if !bytes.Contains(b, []byte(title)) {
					t.Errorf("%s has no %q", tt.name, title)
				}
			}
		}
	}
}

func TestWriteGridErrors(t *testing.T) {
	dir := t.TempDir()
	if err := WriteGrid(filepath.Join(dir, "c.gif"), panels(t, 1), 1, vg.Inch); err == nil || !strings.Contains(err.Error(), "must end in .png or .svg") {
		t.Errorf("a .gif: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "c.gif")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused name left a file: %v", err)
	}
	if err := WriteGrid(filepath.Join(dir, "no", "such", "c.png"), panels(t, 1), 1, vg.Inch); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing directory: %v, want the file's creation to fail", err)
	}
}

// A chart is refused before any run draws it: a name that is not .png or
// .svg, or a directory that is missing or is a file.
func TestCheckPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{filepath.Join(dir, "c.png"), ""},
		{filepath.Join(dir, "c.SVG"), ""},
		{"c.png", ""},
		{filepath.Join(dir, "c.gif"), "must end in .png or .svg"},
		{filepath.Join(dir, "no", "c.png"), filepath.Join(dir, "no") + " is not a directory: stat "},
		{filepath.Join(file, "c.svg"), file + " is not a directory"},
	} {
		err := CheckPath(tt.path)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.path, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want %q", tt.path, err, tt.want)
		}
	}
	if err := CheckPath("/nonexistent/c.png"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing directory: %v, want fs.ErrNotExist", err)
	}
}

// Command apifiles writes the exported API of the library's public packages
// to api/, one text file per package, and checks that the committed files
// match the code, so that every change of the public surface shows in a
// review's diff.
//
// Usage, from the repository's root (scripts/apifiles.sh and
// scripts/apicheck.sh run these):
//
//	go run ./tools/internal/apifiles          # rewrite api/
//	go run ./tools/internal/apifiles -check   # exit 1 with the difference if api/ is stale
//
// The public packages are those of `go list ./...` in the root module
// without an internal, examples or doormanpb element, and not commands.
// Package github.com/sluice-rpc/sluice/leasing/server is written to
// api/leasing/server.txt. Each file holds one sorted line per exported
// feature, in the style of the Go project's api/ files:
//
//	pkg github.com/sluice-rpc/sluice/busy, func NewLimiter(Config) (*Limiter, error)
//	pkg github.com/sluice-rpc/sluice/busy, method (*Limiter) Allow() bool
//	pkg github.com/sluice-rpc/sluice/busy, type Config struct, Ceiling float64
//
// features (features.go) says what each kind of declaration gives. The
// generator reads compiled export data for linux/amd64 through `go list
// -export` and the standard library's go/importer, so it needs nothing
// beyond Go, and its output has no positions and no order but sorting.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// fixHint is the one line a failed check ends with.
const fixHint = "run scripts/apifiles.sh and commit api/"

func main() {
	check := flag.Bool("check", false, "compare api/ with the code instead of writing it; exit 1 with the difference")
	root := flag.String("root", ".", "the repository's root (where go.mod and api/ are)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "apifiles: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	files, err := generate(*root)
	if err != nil {
		fmt.Fprintf(os.Stderr, "apifiles: %v\n", err)
		os.Exit(1)
	}
	dir := filepath.Join(*root, "api")
	if *check {
		diff, err := compare(dir, files)
		if err != nil {
			fmt.Fprintf(os.Stderr, "apifiles: %v\n", err)
			os.Exit(1)
		}
		if diff != "" {
			fmt.Fprintf(os.Stderr, "%s\napifiles: the exported API differs from api/ (above: - committed, + code); %s\n", diff, fixHint)
			os.Exit(1)
		}
		fmt.Printf("apifiles: api/ matches the exported API of %d packages\n", len(files))
		return
	}
	if err := write(dir, files); err != nil {
		fmt.Fprintf(os.Stderr, "apifiles: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("apifiles: wrote the exported API of %d packages to %s\n", len(files), dir)
}

// generate returns the api files for the repository at root: the path of
// each relative to api/ ("leasing/server.txt"), and its content.
func generate(root string) (map[string][]byte, error) {
	mod, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	paths, err := publicPackages(root)
	if err != nil {
		return nil, err
	}
	pkgs, err := load(root, paths)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, pkg := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg.Path(), mod), "/")
		if rel == "" {
			rel = pkg.Name() // the module's root package, if it ever has one
		}
		var b bytes.Buffer
		for _, line := range features(pkg) {
			b.WriteString(line + "\n")
		}
		files[rel+".txt"] = b.Bytes()
	}
	return files, nil
}

// committed reads the .txt files under dir, by path relative to dir (with
// forward slashes). A missing dir is an empty set.
func committed(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == dir && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".txt") {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = data
		return nil
	})
	return files, err
}

// write makes the .txt files under dir exactly files: it writes each and
// removes any other .txt file (a package that is no longer public), and
// directories that this leaves empty. Other files (README.md) stay.
func write(dir string, files map[string][]byte) error {
	old, err := committed(dir)
	if err != nil {
		return err
	}
	for rel := range old {
		if _, ok := files[rel]; ok {
			continue
		}
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(rel))); err != nil {
			return err
		}
		// Remove the directories it leaves empty, up to dir.
		for d := filepath.Dir(filepath.Join(dir, filepath.FromSlash(rel))); d != filepath.Clean(dir); d = filepath.Dir(d) {
			if os.Remove(d) != nil {
				break // not empty
			}
		}
	}
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, files[rel], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// compare returns the difference between the .txt files under dir and
// files, per file, as lines removed (-, in dir only) and added (+, in the
// code only); "" when they are the same. Lines are a sorted set, so this
// is the whole difference, with no diff algorithm needed.
func compare(dir string, files map[string][]byte) (string, error) {
	old, err := committed(dir)
	if err != nil {
		return "", err
	}
	names := map[string]bool{}
	for rel := range old {
		names[rel] = true
	}
	for rel := range files {
		names[rel] = true
	}
	var out strings.Builder
	for _, rel := range slices.Sorted(maps.Keys(names)) {
		was, had := old[rel]
		now, has := files[rel]
		if bytes.Equal(was, now) && had == has {
			continue
		}
		switch {
		case !had:
			fmt.Fprintf(&out, "api/%s: missing (a new public package)\n", rel)
		case !has:
			fmt.Fprintf(&out, "api/%s: no such public package any more\n", rel)
		default:
			fmt.Fprintf(&out, "api/%s:\n", rel)
		}
		removed, added := lineDiff(string(was), string(now))
		for _, l := range removed {
			fmt.Fprintf(&out, "-%s\n", l)
		}
		for _, l := range added {
			fmt.Fprintf(&out, "+%s\n", l)
		}
		if len(removed) == 0 && len(added) == 0 {
			// Same lines, different bytes: order, blank lines or a missing
			// final newline, from an edit by hand.
			fmt.Fprintf(&out, " (the same lines, written differently: not the generator's output)\n")
		}
	}
	return out.String(), nil
}

// lineDiff returns the lines only in a and the lines only in b, each in
// its own text's order.
func lineDiff(a, b string) (onlyA, onlyB []string) {
	inA, inB := map[string]bool{}, map[string]bool{}
	for l := range strings.Lines(a) {
		inA[strings.TrimSuffix(l, "\n")] = true
	}
	for l := range strings.Lines(b) {
		inB[strings.TrimSuffix(l, "\n")] = true
	}
	for l := range strings.Lines(a) {
		if l := strings.TrimSuffix(l, "\n"); !inB[l] {
			onlyA = append(onlyA, l)
		}
	}
	for l := range strings.Lines(b) {
		if l := strings.TrimSuffix(l, "\n"); !inA[l] {
			onlyB = append(onlyB, l)
		}
	}
	return onlyA, onlyB
}

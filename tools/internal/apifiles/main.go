// Command apifiles writes the exported API of the library's public packages
// to api/ (leasing/server to api/leasing/server.txt), one sorted line per
// feature in the style of the Go project's api/ files, or with -check
// exits 1 with the difference when api/ is stale:
//
//	pkg github.com/sluice-rpc/sluice/busy, method (*Limiter) Allow() bool
//
// It reads compiled export data for linux/amd64 through `go list -export`
// and go/importer, so it needs nothing beyond Go.
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
	fail := func(err error) {
		if err != nil {
			fmt.Fprintf(os.Stderr, "apifiles: %v\n", err)
			os.Exit(1)
		}
	}
	files, err := generate(*root)
	fail(err)
	dir := filepath.Join(*root, "api")
	if !*check {
		fail(write(dir, files))
		fmt.Printf("apifiles: wrote the exported API of %d packages to %s\n", len(files), dir)
		return
	}
	diff, err := compare(dir, files)
	fail(err)
	if diff != "" {
		fmt.Fprintf(os.Stderr, "%s\napifiles: the exported API differs from api/ (above: - committed, + code); %s\n", diff, fixHint)
		os.Exit(1)
	}
	fmt.Printf("apifiles: api/ matches the exported API of %d packages\n", len(files))
}

// generate returns the api files for the repository at root, by path
// relative to api/.
func generate(root string) (map[string][]byte, error) {
	mod, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	paths, err := publicPackages(root, mod)
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

// committed reads the .txt files under dir, by slash path relative to
// dir; a missing dir is an empty set.
func committed(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(os.DirFS(dir), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			if rel == "." && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipDir
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(rel, ".txt") {
			return nil
		}
		files[rel], err = os.ReadFile(filepath.Join(dir, rel))
		return err
	})
	return files, err
}

// write makes the .txt files under dir exactly files, removing others and
// the directories this leaves empty.
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
// files, as lines removed (-, in dir only) and added (+); "" if none.
func compare(dir string, files map[string][]byte) (string, error) {
	old, err := committed(dir)
	if err != nil {
		return "", err
	}
	names := append(slices.Collect(maps.Keys(old)), slices.Collect(maps.Keys(files))...)
	slices.Sort(names)
	var out strings.Builder
	for _, rel := range slices.Compact(names) {
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
		removed, added := only(string(was), string(now)), only(string(now), string(was))
		for _, l := range removed {
			fmt.Fprintf(&out, "-%s\n", l)
		}
		for _, l := range added {
			fmt.Fprintf(&out, "+%s\n", l)
		}
		if len(removed) == 0 && len(added) == 0 { // edited by hand
			fmt.Fprintf(&out, " (the same lines, written differently: not the generator's output)\n")
		}
	}
	return out.String(), nil
}

// only returns the lines of a that b lacks.
func only(a, b string) []string {
	in := map[string]bool{}
	for l := range strings.Lines(b) {
		in[strings.TrimSuffix(l, "\n")] = true
	}
	var out []string
	for l := range strings.Lines(a) {
		if l := strings.TrimSuffix(l, "\n"); !in[l] {
			out = append(out, l)
		}
	}
	return out
}

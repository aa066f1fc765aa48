package main

import (
	"bytes"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The platform whose files the API is read from, so that every machine
// writes the same files.
const goos, goarch = "linux", "amd64"

// modulePath reads the module path from root/go.mod.
func modulePath(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for l := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", filepath.Join(root, "go.mod"))
}

// goCmd runs the go command in root for the pinned platform and returns
// its standard output.
func goCmd(root string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		shown := args
		if len(shown) > 6 {
			shown = append(slices.Clip(shown[:6]), fmt.Sprintf("... (%d more)", len(args)-6))
		}
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(shown, " "), err, stderr.Bytes())
	}
	return out, nil
}

// publicPackages lists the packages of root's own module, mod, that are not
// commands and have no internal, examples, doormanpb (generated) or
// testdata element.
func publicPackages(root, mod string) ([]string, error) {
	ownNonMain := fmt.Sprintf(`{{if and .Module (ne .Name "main")}}{{if eq .Module.Path %q}}{{.ImportPath}}{{end}}{{end}}`, mod)
	out, err := goCmd(root, "list", "-f", ownNonMain, "./...")
	if err != nil {
		return nil, err
	}
	var pkgs []string
	for _, path := range strings.Fields(string(out)) {
		if public(path) {
			pkgs = append(pkgs, path)
		}
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("go list ./... in %s: no public package of %s", root, mod)
	}
	slices.Sort(pkgs)
	return pkgs, nil
}

func public(path string) bool {
	for _, elem := range strings.Split(path, "/") {
		switch elem {
		case "internal", "examples", "doormanpb", "testdata":
			return false
		}
	}
	return true
}

// load reads each package's compiled export data, which `go list
// -export` builds for the packages and everything they import.
func load(root string, pkgs []string) ([]*types.Package, error) {
	args := append([]string{"list", "-deps", "-export", "-f", "{{if .Export}}{{.ImportPath}}\t{{.Export}}{{end}}"}, pkgs...)
	out, err := goCmd(root, args...)
	if err != nil {
		return nil, err
	}
	exports := map[string]string{}
	for line := range strings.Lines(string(out)) {
		path, file, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		if !ok {
			return nil, fmt.Errorf("go list -export: unexpected line %q", line)
		}
		exports[path] = file
	}
	lookup := func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	}
	// One importer, so that a type two packages share is one *types.Named.
	imp := importer.ForCompiler(token.NewFileSet(), "gc", lookup)
	var loaded []*types.Package
	for _, path := range pkgs {
		pkg, err := imp.Import(path)
		if err != nil {
			return nil, fmt.Errorf("reading the export data of %s: %v", path, err)
		}
		loaded = append(loaded, pkg)
	}
	return loaded, nil
}

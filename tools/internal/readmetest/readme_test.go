// Package readmetest keeps the repository's Markdown honest; it has only
// tests.
//
// TestGoBlocks builds every ```go fenced block of README.md and docs/*.md as
// a program of its own, inside this module (so that the go.work resolves its
// imports, the Prometheus client's included), and fails naming the file and
// line of a block that does not compile, does not pass go vet, or is not
// gofmt-formatted. Every such block must be a whole file, package clause and
// imports included: a newcomer copies them. A fragment, if one is ever
// needed, is fenced with another language (```go-fragment) and not built.
//
// TestLinks checks every relative link of README.md, docs/*.md,
// tools/benchmarks/README.md and examples/*/README.md: the file or directory
// it names exists, and its #anchor is a heading of the Markdown file it
// points at (GitHub's anchors: lower case, punctuation dropped, spaces as
// hyphens, -1, -2 ... for repeated headings).
//
// TestSlowTestsListed checks that CONTRIBUTING.md names every test behind
// the slow-test gate.
package readmetest

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// repoRoot returns the repository's root: three directories up from this
// package (tools/internal/readmetest).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"go.work", "README.md"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Fatalf("%s is not the repository's root: %v", root, err)
		}
	}
	return root
}

// block is one fenced code block of a Markdown file.
type block struct {
	lang string // the info string's first word: "go", "sh", ""
	line int    // the 1-based line of the block's first line of code
	code string
}

var fenceRE = regexp.MustCompile("^ {0,3}(```+|~~~+)\\s*([^`\\s]*)")

// parse splits a Markdown file into its fenced code blocks and the lines
// outside them (with their 1-based numbers), where headings and links live.
func parse(data string) (blocks []block, prose map[int]string) {
	prose = map[int]string{}
	lines := strings.Split(data, "\n")
	var cur *block
	var fence string
	var code []string
	for i, l := range lines {
		n := i + 1
		if cur == nil {
			if m := fenceRE.FindStringSubmatch(l); m != nil {
				cur = &block{lang: m[2], line: n + 1}
				fence, code = m[1], nil
				continue
			}
			prose[n] = l
			continue
		}
		if t := strings.TrimSpace(l); strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
			cur.code = strings.Join(code, "\n") + "\n"
			blocks = append(blocks, *cur)
			cur = nil
			continue
		}
		code = append(code, l)
	}
	return blocks, prose
}

// goBlockFiles are the Markdown files whose ```go blocks must build.
func goBlockFiles(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, docs...)
}

// Every ```go block of README.md and docs/*.md is a gofmt-formatted program
// that builds and passes go vet. A failure names the block's file and line:
// each program starts with a //line directive, so the compiler's and vet's
// positions are the Markdown file's.
func TestGoBlocks(t *testing.T) {
	root := repoRoot(t)
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH:", err)
	}
	dir, err := os.MkdirTemp(".", "_snippets") // in this module; "_" keeps it out of ./...
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	var pkgs []string
	where := map[string]string{} // package dir -> file:line, for messages
	for _, file := range goBlockFiles(t, root) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		blocks, _ := parse(string(data))
		for _, b := range blocks {
			if b.lang != "go" {
				continue
			}
			pos := fmt.Sprintf("%s:%d", rel, b.line)
			if !strings.HasPrefix(b.code, "package ") {
				t.Errorf("%s: a ```go block must be a whole program, starting with its package clause (fence a fragment as ```go-fragment)", pos)
				continue
			}
			if formatted, err := format.Source([]byte(b.code)); err != nil {
				t.Errorf("%s: does not parse: %v", pos, err)
				continue
			} else if !bytes.Equal(formatted, []byte(b.code)) {
				t.Errorf("%s: not gofmt-formatted; gofmt gives:\n%s", pos, formatted)
			}
			pkg := filepath.Join(dir, fmt.Sprintf("b%02d", len(pkgs)))
			if err := os.Mkdir(pkg, 0o755); err != nil {
				t.Fatal(err)
			}
			src := fmt.Sprintf("//line %s:%d\n%s", file, b.line, b.code) // an absolute path: go vet shows it as is
			if err := os.WriteFile(filepath.Join(pkg, "main.go"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			pkgs = append(pkgs, "./"+filepath.ToSlash(pkg))
			where["./"+filepath.ToSlash(pkg)] = pos
		}
	}
	if len(pkgs) == 0 {
		t.Fatal("no ```go block found in README.md or docs/*.md")
	}
	// One go vet for all: it type-checks each program as the compiler
	// would (imports resolved through the go.work) and runs vet's checks.
	cmd := exec.Command(goCmd, append([]string{"vet"}, pkgs...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		var list []string
		for _, p := range pkgs {
			list = append(list, fmt.Sprintf("  %s = %s", p, where[p]))
		}
		// vet names the files relative to this directory: ../../../README.md.
		msg := strings.ReplaceAll(string(out), filepath.Join("..", "..", "..")+string(filepath.Separator), "")
		t.Fatalf("go vet of the Markdown's Go blocks failed (positions are the Markdown files'): %v\n%s\nthe blocks:\n%s",
			err, msg, strings.Join(list, "\n"))
	}
	t.Logf("%d Go blocks build and pass go vet", len(pkgs))
}

// linkFiles are the Markdown files whose relative links are checked: those
// with Go blocks, CONTRIBUTING.md, CHANGELOG.md, the benchmarks' figures and
// the examples' READMEs.
func linkFiles(t *testing.T, root string) []string {
	t.Helper()
	files := goBlockFiles(t, root)
	more, err := filepath.Glob(filepath.Join(root, "examples", "*", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "CONTRIBUTING.md"), filepath.Join(root, "CHANGELOG.md"),
		filepath.Join(root, "tools", "benchmarks", "README.md"))
	return append(files, more...)
}

var (
	codeSpanRE = regexp.MustCompile("`+[^`]*`+")
	linkRE     = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	headingRE  = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	mdLinkRE   = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// slug is GitHub's anchor for a heading's text: the rendered text in lower
// case, without punctuation but hyphens and underscores, spaces as hyphens.
func slug(heading string) string {
	s := mdLinkRE.ReplaceAllString(heading, "$1")
	s = strings.NewReplacer("`", "", "*", "").Replace(s)
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// anchors returns the anchors of a Markdown file's headings, numbered as
// GitHub numbers repeated ones.
func anchors(data string) map[string]bool {
	_, prose := parse(data)
	seen := map[string]int{}
	out := map[string]bool{}
	for n := 1; n <= len(strings.Split(data, "\n")); n++ {
		l, ok := prose[n]
		if !ok {
			continue
		}
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := slug(m[2])
		if k := seen[a]; k > 0 {
			out[fmt.Sprintf("%s-%d", a, k)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// Every relative link of the Markdown names a file or directory of the
// repository, and every #anchor a heading of the file it points at.
func TestLinks(t *testing.T) {
	root := repoRoot(t)
	cache := map[string]map[string]bool{}
	anchorsOf := func(file string) (map[string]bool, error) {
		if a, ok := cache[file]; ok {
			return a, nil
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		cache[file] = anchors(string(data))
		return cache[file], nil
	}
	checked := 0
	for _, file := range linkFiles(t, root) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		_, prose := parse(string(data))
		for n := 1; n <= len(strings.Split(string(data), "\n")); n++ {
			l, ok := prose[n]
			if !ok {
				continue
			}
			for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(l, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
					if r, err := filepath.Rel(root, dest); err != nil || strings.HasPrefix(r, "..") {
						t.Errorf("%s:%d: link %q leaves the repository", rel, n, target)
						continue
					}
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %q: no such file or directory", rel, n, target)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: link %q: an anchor into a file that is not Markdown", rel, n, target)
					continue
				}
				as, err := anchorsOf(dest)
				if err != nil {
					t.Errorf("%s:%d: link %q: %v", rel, n, target, err)
					continue
				}
				if !as[anchor] {
					t.Errorf("%s:%d: link %q: no heading with anchor #%s in %s", rel, n, target, anchor, filepath.Base(dest))
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: is the parser broken?")
	}
	t.Logf("%d relative links checked", checked)
}

// The anchors follow GitHub's rules on the headings this repository has.
func TestSlug(t *testing.T) {
	for _, tt := range []struct{ heading, want string }{
		{"Quick start", "quick-start"},
		{"Hostile peers (tools/benchmarks/hostile, sluice hostile)", "hostile-peers-toolsbenchmarkshostile-sluice-hostile"},
		{"Live state: `Channel.Debug` and its JSON", "live-state-channeldebug-and-its-json"},
		{"When things break: connections, dead peers, deadlines (peer/, channel/)", "when-things-break-connections-dead-peers-deadlines-peer-channel"},
		{"Server-side cost (BenchmarkRawServer*, BenchmarkThriftServer*)", "server-side-cost-benchmarkrawserver-benchmarkthriftserver"},
		{"A flood of 1 M resource ids", "a-flood-of-1-m-resource-ids"},
	} {
		if got := slug(tt.heading); got != tt.want {
			t.Errorf("slug(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
	got := anchors("# A\n\n```yaml\n# not a heading\n```\n## A\n## B\n")
	for _, a := range []string{"a", "a-1", "b"} {
		if !got[a] {
			t.Errorf("anchors: no %q in %v", a, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("anchors: a comment inside a code block taken for a heading: %v", got)
	}
}

// TestSlowTestsListed checks that CONTRIBUTING.md names every test behind
// the slow-test gate (a test function that calls slowtest.Skip), as
// scripts/slowtests.sh finds them: a slow test nobody knows of is one
// nobody runs by hand.
func TestSlowTestsListed(t *testing.T) {
	root := repoRoot(t)
	// The call, spelt so that this file does not contain it.
	call := "slowtest" + ".Skip(t"
	out, err := exec.Command("git", "-C", root, "grep", "-lF", call, "--", "*_test.go").Output()
	if err != nil {
		t.Fatalf("git grep: %v", err)
	}
	contributing, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	fn := regexp.MustCompile(`^func (Test\w*)\(`)
	found := 0
	for _, file := range strings.Fields(string(out)) {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		var current string
		for _, line := range strings.Split(string(data), "\n") {
			if m := fn.FindStringSubmatch(line); m != nil {
				current = m[1]
			}
			if !strings.Contains(line, call) || current == "" {
				continue
			}
			found++
			if !bytes.Contains(contributing, []byte("`"+current+"`")) {
				t.Errorf("%s: %s is behind the slow-test gate but CONTRIBUTING.md's list of slow tests does not name it", file, current)
			}
		}
	}
	if found == 0 {
		t.Fatal("found no test that calls slowtest.Skip: has the gate moved?")
	}
}

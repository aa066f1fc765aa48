// Package clitest holds what the tests of sluice (package cli) and of
// sluice-lab share: the exit-code cases of testdata/exitcodes.txt
// (scripts/exitcodes.sh runs them against built binaries) and the check of
// a command's help.
package clitest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A Case is a line of the file: the arguments, the exit code wanted, and
// whether the line is sluice-lab's.
type Case struct {
	Line int
	Lab  bool
	Want int
	Args []string
}

// ExitCodes reads the cases of path, replacing the words of subst ($PEER, ...)
// in the arguments.
func ExitCodes(path string, subst map[string]string) ([]Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pairs []string
	for k, v := range subst {
		pairs = append(pairs, k, v)
	}
	r := strings.NewReplacer(pairs...)
	var cases []Case
	for i, line := range strings.Split(string(data), "\n") {
		words := strings.Fields(line) // a CRLF file's \r is space too
		if len(words) == 0 || strings.HasPrefix(line, "#") {
			continue
		}
		n := i + 1
		c := Case{Line: n}
		if words[0] == "lab" {
			c.Lab, words = true, words[1:]
		}
		if len(words) == 0 {
			return nil, fmt.Errorf("%s:%d: no exit code", path, n)
		}
		if c.Want, err = strconv.Atoi(words[0]); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		for _, a := range words[1:] {
			c.Args = append(c.Args, r.Replace(a))
		}
		cases = append(cases, c)
	}
	return cases, nil
}

// CheckHelp checks that run, asked for the help of a command (args end
// with -h or --help, or start with help), prints it on stdout with exit 0:
// a usage line naming program and the command, a description, its flags
// (wantFlags) or its subcommands, and examples; and nothing on stderr.
func CheckHelp(t *testing.T, run func(args []string, stdout, stderr io.Writer) int, program string, args []string, wantFlags bool) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	s := out.String()
	name := strings.TrimSpace(program + " " + strings.Join(args[:len(args)-1], " "))
	if args[0] == "help" {
		name = strings.TrimSpace(program + " " + strings.Join(args[1:], " "))
	}
	if code != 0 || errOut.Len() > 0 || !strings.HasPrefix(s, "usage: "+name) || !strings.Contains(s, "\nExamples:\n  "+program+" ") {
		t.Errorf("%s %q: exit %d, stderr %q; want exit 0 and help on stdout:\n%s", program, args, code, errOut.String(), s)
		return
	}
	// A description: a paragraph between the usage lines and the list.
	if para := strings.SplitN(s, "\n\n", 3); len(para) < 3 || len(para[1]) < 80 {
		t.Errorf("%s %q: no description:\n%s", program, args, s)
	}
	list := "\nCommands:\n"
	if wantFlags {
		list = "\nFlags:\n  -h, --help"
	}
	if !strings.Contains(s, list) {
		t.Errorf("%s %q: help lacks %q:\n%s", program, args, list, s)
	}
}

var (
	snakeKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	dataKey  = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
)

// BadKeys returns the keys of v (a decoded JSON report), at any depth,
// that are neither snake_case nor data: Go field names such as
// "Algorithm" or "Config".
func BadKeys(v any) []string { return badKeys(v, "") }

func badKeys(v any, path string) []string {
	var bad []string
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if !snakeKey.MatchString(k) && !dataKey.MatchString(k) {
				bad = append(bad, path+"."+k)
			}
			bad = append(bad, badKeys(e, path+"."+k)...)
		}
	case []any:
		for i, e := range v {
			bad = append(bad, badKeys(e, path+"["+strconv.Itoa(i)+"]")...)
		}
	}
	return bad
}

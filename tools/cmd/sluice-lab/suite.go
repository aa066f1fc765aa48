package main

import (
	"fmt"
	"io"

	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
)

// suite is the command shape faults and hostile share: a --LIST of items
// to make or all, --ci, --markdown and -o json; progress on stderr; the
// report as a table or one JSON object (cli.FlagSet.ReportMade: on an
// interrupt what was made so far, and exit 0).
type suite struct {
	*cli.FlagSet
	list         string // its list flag ("scenarios")
	items        *string
	ci, markdown *bool
	output       func([]string) (bool, int, bool)
	asJSON       bool
	stderr       io.Writer
}

// newSuite starts `sluice-lab NAME`'s flags; help's %s lists names, the
// items --LIST picks.
func newSuite[T ~string](name string, help cli.Help, names []T, list, listUsage, ciUsage string, stdout, stderr io.Writer) *suite {
	help.About = fmt.Sprintf(help.About, benchrun.Names(names))
	s := &suite{FlagSet: cli.NewFlagSet("sluice-lab "+name, help, stdout, stderr), list: list, stderr: stderr}
	s.items, s.ci = s.String(list, "all", listUsage), s.Bool("ci", false, ciUsage)
	s.markdown = s.Bool("markdown", false, "print the table as Markdown")
	s.output = cli.AddOutputFlag(s.FlagSet, false).Parse
	return s
}

// parseSuite parses args, then --LIST by parseList; when ok is false the
// command exits with code (help printed, or a usage error).
func parseSuite[L any](s *suite, args []string, parseList func(string) (L, error)) (list L, code int, ok bool) {
	if s.asJSON, code, ok = s.output(args); !ok {
		return list, code, false
	}
	if s.asJSON && *s.markdown {
		return list, s.UsageError("--markdown is a table's; drop it or -o json"), false
	}
	var err error
	if list, err = parseList(*s.items); err != nil {
		return list, s.UsageError("--%s: %v", s.list, err), false
	}
	return list, cli.ExitOK, true
}

// progress prints a line of the plan or progress on stderr.
func (s *suite) progress(format string, a ...any) { fmt.Fprintf(s.stderr, format+"\n", a...) }

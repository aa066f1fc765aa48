package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// The exit codes of every command, as yab's and most Unix tools'.
const (
	ExitOK    = 0 // done; for call, the call succeeded
	ExitFail  = 1 // a call, a run or a server failed
	ExitUsage = 2 // a bad flag, value or command: nothing was done
)

// Help is what `sluice help CMD` prints about a command besides its flags.
type Help struct {
	Synopsis string // usage lines, the first after "usage: "
	About    string // what the command does, a paragraph or more
	Examples string // example command lines, one a line, # comments allowed
}

// FlagSet is a command's flags and help. It prints help itself: on stdout
// with exit 0 when asked for; on a usage error, the error and where help
// is, with exit 2.
type FlagSet struct {
	*flag.FlagSet
	help           Help
	stdout, stderr io.Writer
	short, long    map[string]string // long name -> its one-letter alias, and back
}

// NewFlagSet returns the flags of the command name, whose help is help.
func NewFlagSet(name string, help Help, stdout, stderr io.Writer) *FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned and printed by parse
	fs.Usage = func() {}
	return &FlagSet{FlagSet: fs, help: help, stdout: stdout, stderr: stderr,
		short: map[string]string{}, long: map[string]string{}}
}

// alias makes -short another name of the flag --long (yab's -p, --peer).
func (f *FlagSet) alias(short, long string) {
	fl := f.Lookup(long)
	f.Var(fl.Value, short, fl.Usage)
	f.short[long], f.long[short] = short, long
}

// ParseArgs parses args; on false the command exits with the code: 0
// after the help asked for, 2 after a usage error. A leftover word is an
// error, not where parsing silently stops.
func (f *FlagSet) ParseArgs(args []string) (int, bool) {
	_, code, ok := f.parseWords(args, 0)
	return code, ok
}

// parseWords is ParseArgs also taking up to max words among the flags
// (yab's `SERVICE METHOD`), returned in order.
func (f *FlagSet) parseWords(args []string, max int) ([]string, int, bool) {
	var words []string
	for {
		err := f.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			f.printHelp(f.stdout)
			return nil, ExitOK, false
		case err != nil:
			return nil, f.UsageError("%v", err), false
		case f.NArg() == 0:
			return words, 0, true
		case max == 0:
			return nil, f.UsageError("unexpected argument %q (flags only)", f.Arg(0)), false
		case len(words) == max:
			return nil, f.UsageError("unexpected argument %q (at most %d words besides the flags)", f.Arg(0), max), false
		}
		words = append(words, f.Arg(0))
		args = f.Args()[1:]
	}
}

// UsageError prints a usage error and where help is, and returns 2.
func (f *FlagSet) UsageError(format string, a ...any) int {
	fmt.Fprintf(f.stderr, "%s: %s\nRun '%s -h' for help.\n", f.Name(), message(format, a...), f.Name())
	return ExitUsage
}

// Failure prints a failure and returns 1.
func (f *FlagSet) Failure(format string, a ...any) int {
	fmt.Fprintf(f.stderr, "%s: %s\n", f.Name(), message(format, a...))
	return ExitFail
}

// message formats an error line's text without the library's "sluice: "
// prefix, which would follow the command's name.
func message(format string, a ...any) string {
	return strings.TrimPrefix(fmt.Sprintf(format, a...), "sluice: ")
}

// IsSet reports whether the flag named name (long) was given.
func (f *FlagSet) IsSet(name string) bool {
	given := false
	f.Visit(func(fl *flag.Flag) { given = given || fl.Name == name || f.short[name] == fl.Name })
	return given
}

func (f *FlagSet) printHelp(w io.Writer) {
	printHelp(w, f.help, func(w io.Writer) {
		fmt.Fprintln(w, "Flags:")
		f.printFlags(w)
	})
}

// printHelp prints usage, description, what middle prints (flags or
// subcommands) and examples.
func printHelp(w io.Writer, h Help, middle func(io.Writer)) {
	prefix := "usage: "
	for _, l := range strings.Split(strings.TrimSpace(h.Synopsis), "\n") {
		fmt.Fprintf(w, "%s%s\n", prefix, strings.TrimSpace(l))
		prefix = "       "
	}
	fmt.Fprintf(w, "\n%s\n\n", strings.TrimSpace(h.About))
	middle(w)
	if h.Examples != "" {
		fmt.Fprintln(w, "\nExamples:")
		for _, l := range strings.Split(strings.TrimSpace(h.Examples), "\n") {
			fmt.Fprintf(w, "  %s\n", strings.TrimSpace(l))
		}
	}
}

// printFlags lists the flags in name order, each with its alias, its
// argument's name and its default when not the zero value.
func (f *FlagSet) printFlags(w io.Writer) {
	rows := [][2]string{{"-h, --help", "print this help"}}
	f.VisitAll(func(fl *flag.Flag) {
		if f.long[fl.Name] != "" {
			return
		}
		arg, usage := flag.UnquoteUsage(fl)
		left := "    --" + fl.Name
		if s, ok := f.short[fl.Name]; ok {
			left = "-" + s + ", --" + fl.Name
		}
		if arg != "" {
			left += " " + arg
		}
		switch fl.DefValue {
		case "", "0", "false", "0s":
		default:
			usage += fmt.Sprintf(" (default %s)", fl.DefValue)
		}
		rows = append(rows, [2]string{left, usage})
	})
	writeRows(w, "  ", rows, 30)
}

// writeRows writes two columns after indent, the first padded to the
// widest of those at most maxLeft long; a longer one gets a line of its own.
func writeRows(w io.Writer, indent string, rows [][2]string, maxLeft int) {
	width := 0
	for _, r := range rows {
		if len(r[0]) <= maxLeft {
			width = max(width, len(r[0]))
		}
	}
	for _, r := range rows {
		if len(r[0]) > width {
			fmt.Fprintf(w, "%s%s\n%s%*s  %s\n", indent, r[0], indent, width, "", r[1])
		} else {
			fmt.Fprintf(w, "%s%-*s  %s\n", indent, width, r[0], r[1])
		}
	}
}

// command is a leaf that parses flags, or a group of subcommands (subs).
type command struct {
	name    string
	summary string // a leaf's line in help
	run     func(args []string, stdout, stderr io.Writer) int
	subs    []command
}

// leaves lists every runnable command under subs: its words ("sim shed")
// and its summary.
func leaves(subs []command) [][2]string {
	var rows [][2]string
	for _, c := range subs {
		if len(c.subs) == 0 {
			rows = append(rows, [2]string{c.name, c.summary})
		}
		for _, l := range leaves(c.subs) {
			rows = append(rows, [2]string{c.name + " " + l[0], l[1]})
		}
	}
	return rows
}

// writeCommands writes every command under g, one a line, after indent.
func (g group) writeCommands(w io.Writer, indent string) {
	writeRows(w, indent, leaves(g.subs), math.MaxInt)
}

// UntilInterrupted turns a command that runs until its context ends into
// one that runs until SIGINT or SIGTERM; a second signal kills as usual.
func UntilInterrupted(run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) func(args []string, stdout, stderr io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return run(ctx, args, stdout, stderr)
	}
}

// group is a command made of subcommands: `NAME SUB [flags]`.
type group struct {
	name string // "sluice sim"
	help Help
	subs []command
}

// run dispatches args to a subcommand; "help SUB" is "SUB -h".
func (g group) run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "%s: missing command\n", g.name)
		g.printHelp(stderr)
		return ExitUsage
	}
	switch {
	case args[0] == "-h" || args[0] == "-help" || args[0] == "--help", args[0] == "help" && len(args) == 1:
		g.printHelp(stdout)
		return ExitOK
	case args[0] == "help":
		return g.run(append(slices.Clone(args[1:]), "-h"), stdout, stderr)
	}
	for _, c := range g.subs {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\nRun '%s -h' for help.\n", g.name, args[0], g.name)
	return ExitUsage
}

func (g group) printHelp(w io.Writer) {
	printHelp(w, g.help, func(w io.Writer) {
		fmt.Fprintln(w, "Commands:")
		g.writeCommands(w, "  ")
		fmt.Fprintf(w, "\nRun '%s help COMMAND' or '%s COMMAND -h' for a command's description, flags and examples.\n", g.name, g.name)
	})
}

// lockedWriter serialises writes from several goroutines: see Locked.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Locked returns w made safe for writes from several goroutines at once.
func Locked(w io.Writer) io.Writer { return &lockedWriter{w: w} }

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// OutputJSONHelp says what -o json prints, for the commands' help.
const OutputJSONHelp = `-o json prints the report as one JSON object on one line: snake_case keys,
durations in milliseconds (keys ending in _ms), enums by name, null where
there is no value (quantiles of no call, a rate not set).`

// outputFlag is -o/--output of the commands with a report: table or
// json, with the deprecated -o text (bench) and --json (sim shed, sim
// doorman).
type outputFlag struct {
	fs     *FlagSet
	format string
	json   bool // --json, where the command had it
}

// AddOutputFlag defines -o/--output on fs, and --json too when legacyJSON.
func AddOutputFlag(fs *FlagSet, legacyJSON bool) *outputFlag {
	o := &outputFlag{fs: fs}
	fs.StringVar(&o.format, "output", "table", "the report's `FORMAT`: table, for people, or json, one JSON object on one line (\"text\": table, deprecated)")
	fs.alias("o", "output")
	if legacyJSON {
		fs.BoolVar(&o.json, "json", false, "deprecated: the same as -o json")
	}
	return o
}

// Check validates the flag and reports whether the report is JSON; an
// error is a usage error.
func (o *outputFlag) Check() (asJSON bool, err error) {
	switch o.format {
	case "table", "text":
		if o.json && o.fs.IsSet("output") {
			return false, fmt.Errorf("--json and -o %s disagree; give -o json or -o table", o.format)
		}
		return o.json, nil
	case "json":
		return true, nil
	}
	return false, fmt.Errorf("-o/--output is %q, must be table or json", o.format)
}

// Parse parses args as ParseArgs does, then checks the flag: ok false
// with the exit code, else whether the report is JSON.
func (o *outputFlag) Parse(args []string) (asJSON bool, code int, ok bool) {
	if code, ok := o.fs.ParseArgs(args); !ok {
		return false, code, false
	}
	asJSON, err := o.Check()
	if err != nil {
		return false, o.fs.UsageError("%v", err), false
	}
	return asJSON, ExitOK, true
}

// WriteJSON writes v on stdout as one line of JSON, and returns the exit
// code. The report types carry OutputJSONHelp's convention in their json
// tags, millis.Duration and pointers for what may be null.
func (f *FlagSet) WriteJSON(v any) int {
	if err := json.NewEncoder(f.stdout).Encode(v); err != nil {
		return f.Failure("%v", err)
	}
	return ExitOK
}

// reportRun is ReportMade for a bench mode's run with one result, res,
// which a failure but an interruption leaves unprinted.
func (f *FlagSet) reportRun(ctx context.Context, res interface{ WriteTable(io.Writer) error }, err error, asJSON bool, items string) int {
	if err != nil && ctx.Err() == nil {
		return f.Failure("%v", err)
	}
	return f.ReportMade(ctx, 1, err, asJSON, func() any { return res }, res.WriteTable, items)
}

// ReportMade prints the n items a run that ended with err made, if any, as
// Report does. It returns ExitOK, also when ctx ended the run (it then says
// on stderr that the items made so far are above), and a failure when the
// run failed otherwise or nothing could be printed.
func (f *FlagSet) ReportMade(ctx context.Context, n int, err error, asJSON bool, report func() any, table func(io.Writer) error, items string) int {
	if n > 0 {
		if code := f.Report(report(), asJSON, table, "", nil); code != ExitOK {
			return code
		}
	}
	switch {
	case err != nil && ctx.Err() != nil:
		fmt.Fprintf(f.stderr, "%s: interrupted; the %s made so far are above\n", f.Name(), items)
	case err != nil:
		return f.Failure("%v", err)
	}
	return ExitOK
}

// Report prints a run's result res as JSON with asJSON, else table's
// rows; then, with chartPath, draws it with chart and says where (not with
// JSON). It returns the exit code.
func (f *FlagSet) Report(res any, asJSON bool, table func(io.Writer) error, chartPath string, chart func(string) error) int {
	if asJSON {
		if code := f.WriteJSON(res); code != ExitOK {
			return code
		}
	} else if err := table(f.stdout); err != nil {
		return f.Failure("%v", err)
	}
	if chartPath == "" {
		return ExitOK
	}
	if err := chart(chartPath); err != nil {
		return f.Failure("chart: %v", err)
	}
	if !asJSON {
		fmt.Fprintf(f.stdout, "\nchart: %s\n", chartPath)
	}
	return ExitOK
}

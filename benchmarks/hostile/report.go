package hostile

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes every result's figures, one row each (attack, figure,
// value), as aligned text or, when markdown is set, as a Markdown table.
// Problems the harness met are rows of their own ("PROBLEM").
func WriteTable(w io.Writer, rs []*Result, markdown bool) error {
	rows := [][]string{{"attack", "figure", "value"}}
	for _, r := range rs {
		for _, f := range r.Figures {
			rows = append(rows, []string{string(r.Attack), f.Name, f.Value})
		}
		for _, p := range r.Problems {
			rows = append(rows, []string{string(r.Attack), "PROBLEM", p})
		}
		rows = append(rows, []string{string(r.Attack), "elapsed", sec(r.Elapsed)})
	}
	if markdown {
		var b strings.Builder
		for i, row := range rows {
			for j := range row {
				row[j] = strings.ReplaceAll(row[j], "|", `\|`)
			}
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
			if i == 0 {
				b.WriteString("|" + strings.Repeat("---|", len(row)) + "\n")
			}
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, row := range rows {
		if i > 0 && row[0] != rows[i-1][0] {
			fmt.Fprintln(tw, "\t\t")
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

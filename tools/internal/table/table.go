// Package table writes the result tables of the suites' commands: rows of
// cells, as aligned text or as a Markdown table.
package table

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Write writes rows, the first the header: as a Markdown table, or as
// aligned columns, with groups a blank line where the first cell changes.
func Write(w io.Writer, rows [][]string, markdown, groups bool) error {
	if markdown {
		var b strings.Builder
		for i, row := range rows {
			cells := make([]string, len(row))
			for j, c := range row {
				cells[j] = strings.ReplaceAll(c, "|", `\|`)
			}
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
			if i == 0 {
				b.WriteString("|" + strings.Repeat("---|", len(row)) + "\n")
			}
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, row := range rows {
		if groups && i > 0 && row[0] != rows[i-1][0] {
			fmt.Fprintln(tw, strings.Repeat("\t", len(row)-1))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

package hostile

import (
	"io"

	"github.com/sluice-rpc/sluice/tools/internal/table"
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
		rows = append(rows, []string{string(r.Attack), "elapsed", sec(r.Elapsed.D())})
	}
	return table.Write(w, rows, markdown, true)
}

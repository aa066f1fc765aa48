package table

import (
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	rows := [][]string{{"a", "b"}, {"x", "1|2"}, {"x", "3"}, {"y", "4"}}
	var md strings.Builder
	if err := Write(&md, rows, true, false); err != nil {
		t.Fatal(err)
	}
	if want := "| a | b |\n|---|---|\n| x | 1\\|2 |\n| x | 3 |\n| y | 4 |\n"; md.String() != want {
		t.Errorf("markdown:\n%s\nwant:\n%s", md.String(), want)
	}
	if rows[1][1] != "1|2" {
		t.Error("Write changed its rows")
	}
	var txt strings.Builder
	if err := Write(&txt, rows, false, true); err != nil {
		t.Fatal(err)
	}
	// Groups: the header is a group of its own.
	if want := "a  b\n   \nx  1|2\nx  3\n   \ny  4\n"; txt.String() != want {
		t.Errorf("text:\n%q\nwant:\n%q", txt.String(), want)
	}
}

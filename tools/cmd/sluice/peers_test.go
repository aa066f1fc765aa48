package main

import (
	"slices"
	"strings"
	"testing"
)

// A peer list in each of yab's shapes; a bad entry is named by its line.
func TestParsePeerList(t *testing.T) {
	want := []string{"127.0.0.1:4040", "localhost:4041", "[::1]:4042"}
	for _, tc := range []struct{ name, text string }{
		{"lines", "127.0.0.1:4040\n\n# a comment\n  localhost:4041   # trailing comment\n[::1]:4042\n"},
		{"json", `["127.0.0.1:4040", "localhost:4041",` + "\n" + `"[::1]:4042"]`},
		{"yaml", "# peers\n- 127.0.0.1:4040\n- localhost:4041\n- '[::1]:4042'\n"},
	} {
		got, err := parsePeerList([]byte(tc.text))
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, want)
		}
	}
	for _, tc := range []struct{ name, text, want string }{
		{"bad line", "127.0.0.1:4040\n\nnohost\n", `line 3: peer: bad host:port "nohost"`},
		{"bad port", "127.0.0.1:4040\n127.0.0.1:0\n", `line 2: peer: bad host:port "127.0.0.1:0"`},
		{"bad json entry", "[\n  \"127.0.0.1:4040\",\n  \"127.0.0.1:99999\"\n]", `line 3: peer: bad host:port "127.0.0.1:99999"`},
		{"json number", "[\"127.0.0.1:4040\",\n 4041]", `line 2: want a "host:port" string`},
		{"bad yaml entry", "- 127.0.0.1:4040\n- nohost\n", `line 2: peer: bad host:port "nohost"`},
		{"yaml nested", "- 127.0.0.1:4040\n- [127.0.0.1:4041]\n", `line 2: want a "host:port" string`},
		{"empty json", "[]", "the list is empty"},
		{"empty", "\n# nothing\n", "no peers in the file"},
		{"mapping", "peers: 127.0.0.1:4040\n", `line 1: peer: bad host:port "peers: 127.0.0.1:4040"`},
	} {
		if _, err := parsePeerList([]byte(tc.text)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

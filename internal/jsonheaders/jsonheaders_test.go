package jsonheaders

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"
)

// encode is what Append must match.
func encode(t testing.TB, h map[string]string) []byte {
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAppend(t *testing.T) {
	many := map[string]string{}
	for i := range maxSorted + 1 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for _, tc := range []struct {
		name  string
		h     map[string]string
		plain bool
	}{
		{"nil", nil, true},
		{"empty", map[string]string{}, true},
		{"one", map[string]string{"who": "me"}, true},
		{"sorted", map[string]string{"b": "2", "a": "1", "c": "", "": "x", "A": "0"}, true},
		{"printable", map[string]string{"k": " !#$%'()*+,-./09:;=?@AZ[]^_`az{|}~"}, true},
		{"quote", map[string]string{"k": `a"b`}, false},
		{"backslash", map[string]string{`a\b`: "v"}, false},
		{"html", map[string]string{"k": "<a href='x'>&</a>"}, false},
		{"lt", map[string]string{"k": "<"}, false},
		{"gt", map[string]string{">": "v"}, false},
		{"amp", map[string]string{"k": "a&b"}, false},
		{"control", map[string]string{"k": "a\nb"}, false},
		{"delete", map[string]string{"k": "\x7f"}, false},
		{"utf-8", map[string]string{"k": "é"}, false},
		{"invalid utf-8", map[string]string{"k": "\xff"}, false},
		{"16 entries", func() map[string]string { m := maps.Clone(many); delete(m, "k"); return m }(), true},
		{"17 entries", many, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("prefix")
			got, ok := Append(dst, tc.h)
			if ok != tc.plain {
				t.Fatalf("Append(%q) ok = %v, want %v", tc.h, ok, tc.plain)
			}
			if !ok {
				if string(got) != "prefix" {
					t.Fatalf("Append(%q) not plain changed dst to %q", tc.h, got)
				}
				return
			}
			if want := "prefix" + string(encode(t, tc.h)); string(got) != want {
				t.Fatalf("Append(%q) = %q, want %q (encoding/json)", tc.h, got, want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in    string
		plain bool
	}{
		{`{}`, true},
		{` { } `, true},
		{`{"who":"me"}`, true},
		{"\t{ \"a\" :\r\n\"1\" , \"b\":\"\" ,\"\":\"x\"}\n", true},
		{`{"a":"1","a":"2"}`, true},
		{`{"k":"<&>"}`, true},
		{`null`, false},
		{``, false},
		{`   `, false},
		{`{`, false},
		{`{"a"`, false},
		{`{"a":`, false},
		{`{"a":"1"`, false},
		{`{"a":"1",}`, false},
		{`{"a":"1"}x`, false},
		{`{"a":"1"}{}`, false},
		{`{"a" "1"}`, false},
		{`{"a":1}`, false},
		{`{"a":null}`, false},
		{`{"a":["1"]}`, false},
		{`{a:"1"}`, false},
		{`{"a":"x\ny"}`, false},
		{`{"a":"\u0041"}`, false},
		{`{"a":"\""}`, false},
		{`{"a":"é"}`, false},
		{"{\"a\":\"\xff\"}", false},
		{`{"a":"1"`, false},
		{`[]`, false},
		{`"a"`, false},
	} {
		got, ok := Parse([]byte(tc.in))
		if ok != tc.plain {
			t.Errorf("Parse(%q) ok = %v, want %v", tc.in, ok, tc.plain)
		}
		checkParse(t, tc.in, got, ok)
	}
}

// checkParse checks what Parse returned for in against encoding/json.
func checkParse(t testing.TB, in string, got map[string]string, ok bool) {
	t.Helper()
	if !ok {
		if got != nil {
			t.Errorf("Parse(%q) not plain returned %q, want nil", in, got)
		}
		return
	}
	var want map[string]string
	if err := json.Unmarshal([]byte(in), &want); err != nil {
		t.Errorf("Parse(%q) = %q, but encoding/json fails: %v", in, got, err)
		return
	}
	if !maps.Equal(got, want) || (got == nil) != (want == nil) {
		t.Errorf("Parse(%q) = %#v, want %#v (encoding/json)", in, got, want)
	}
}

// The plain cases of both functions agree with encoding/json on any input.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{}`, `{"who":"me"}`, ` {"a" : "1", "b":""} `, `{"a":"1",}`, `null`, `{"a":"\n"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := Parse(b)
		checkParse(t, string(b), got, ok)
	})
}

func FuzzAppend(f *testing.F) {
	f.Add("who", "me", "b", "")
	f.Add("<", ">", "\n", "é")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		h := map[string]string{k1: v1, k2: v2}
		got, ok := Append(nil, h)
		if !ok {
			return
		}
		if want := encode(t, h); !bytes.Equal(got, want) {
			t.Errorf("Append(%q) = %q, want %q (encoding/json)", h, got, want)
		}
		back, ok := Parse(got)
		if !ok || !maps.Equal(back, h) {
			t.Errorf("Parse(Append(%q)) = %q, %v", h, back, ok)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	in := []byte(`{"who":"me","cn":"caller","rk":"shard-17"}`)
	b.Run("jsonheaders", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := Parse(in); !ok {
				b.Fatal("not plain")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var h map[string]string
			if err := json.Unmarshal(in, &h); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkAppend(b *testing.B) {
	h := map[string]string{"seen": "me", "cn": "caller"}
	buf := make([]byte, 0, 256)
	b.Run("jsonheaders", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := Append(buf[:0], h); !ok {
				b.Fatal("not plain")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(h); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Package jsonheaders reads and writes the headers of a TChannel JSON call,
// a JSON object of strings, without reflection, when every key and value is
// plain: printable ASCII that JSON writes as it is. Headers almost always
// are. For anything else it reports !ok and the caller uses encoding/json,
// whose output (and, for malformed input, whose error) the plain case
// matches byte for byte.
package jsonheaders

import (
	"slices"
)

// maxSorted is the most headers Append sorts on the stack; more are left
// to encoding/json.
const maxSorted = 16

// Append appends h to dst as json.Marshal writes it (keys in order;
// "null" for a nil map) and reports true, or returns dst unchanged and
// false if a key or value is not plain or h has more than 16 entries.
func Append(dst []byte, h map[string]string) ([]byte, bool) {
	if h == nil {
		return append(dst, "null"...), true
	}
	if len(h) > maxSorted {
		return dst, false
	}
	var arr [maxSorted]string
	keys := arr[:0]
	for k, v := range h {
		if !plainOut(k) || !plainOut(v) {
			return dst, false
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, k...)
		out = append(out, `":"`...)
		out = append(out, h[k]...)
		out = append(out, '"')
	}
	return append(out, '}'), true
}

// plainOut reports whether encoding/json writes s between quotes as it
// is: printable ASCII but '"' and '\', and but '<', '>' and '&', which it
// escapes for HTML.
func plainOut(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !plainIn(c) || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// plainIn reports whether c stands for itself inside a JSON string:
// printable ASCII but '"' and '\'.
func plainIn(c byte) bool { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\' }

// Parse decodes b, a JSON object, as encoding/json decodes it into a nil
// map[string]string, and reports true; or returns nil and false if b is
// anything else (null, malformed, a value that is not a string) or a key
// or value is not plain (an escape, a control character, non-ASCII).
func Parse(b []byte) (map[string]string, bool) {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return nil, false
	}
	h := make(map[string]string)
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		if skipSpace(b, i+1) != len(b) {
			return nil, false
		}
		return h, true
	}
	for {
		k, j, ok := plainString(b, i)
		if !ok {
			return nil, false
		}
		if i = skipSpace(b, j); i == len(b) || b[i] != ':' {
			return nil, false
		}
		v, j, ok := plainString(b, skipSpace(b, i+1))
		if !ok {
			return nil, false
		}
		h[k] = v
		if i = skipSpace(b, j); i == len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
			continue
		case '}':
			if skipSpace(b, i+1) != len(b) {
				return nil, false
			}
			return h, true
		}
		return nil, false
	}
}

// plainString reads the plain JSON string that starts at b[i], and
// returns it and the index after it.
func plainString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return string(b[i+1 : j]), j + 1, true
		case !plainIn(c):
			return "", j, false
		}
	}
	return "", len(b), false
}

// skipSpace returns the index of the first byte of b from i on that is
// not JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

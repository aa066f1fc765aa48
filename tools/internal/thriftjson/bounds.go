package thriftjson

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Thrift's binary protocol type codes.
const (
	tStop   = 0
	tBool   = 2
	tI8     = 3
	tDouble = 4
	tI16    = 6
	tI32    = 8
	tI64    = 10
	tBinary = 11
	tStruct = 12
	tMap    = 13
	tSet    = 14
	tList   = 15
)

// maxValues bounds the values in an answer (fields, elements, keys and
// values at any depth): thriftrw decodes each into memory, and a hostile
// 64 MiB answer of 4-byte fields took 15 s and 8.1 GiB without it.
const maxValues = 1 << 20

// maxText bounds the JSON text of an answer's strings, binaries and map
// keys, escapes and base64 counted: room for a 64 MiB binary (85 MiB of
// base64), not for a string escaped to six times its size.
const maxText = 96 << 20

var (
	errShort   = errors.New("the bytes end inside a value")
	errTooDeep = fmt.Errorf("nested deeper than %d", maxDepth)
	errTooMany = fmt.Errorf("more than %d values, the most an answer may hold", maxValues)
	// errRepeated: which of a repeated field to keep is anybody's guess.
	errRepeated = errors.New("a struct repeats field")
)

// checkBounds walks b, a struct in Thrift's binary protocol, without
// decoding it, and refuses one cut short, nested deeper than maxDepth,
// holding more than maxValues values, or repeating a field ID. Its loops
// are bounded by len(b): each count is checked against the bytes left
// before it is looped over.
func checkBounds(b []byte) error {
	var w walker
	if err := w.add(1); err != nil {
		return err
	}
	n, err := w.skipValue(b, tStruct, 0)
	if err == nil && n != len(b) {
		err = fmt.Errorf("%d bytes after the struct", len(b)-n)
	}
	return err
}

// walker is the state of one checkBounds walk.
type walker struct {
	values int // counted before they are walked
	// ids holds the field IDs of the structs open, outermost first;
	// seen[d] has a bit set for each ID of the struct open at depth d.
	ids  []uint16
	seen [maxDepth]*[1 << 16 / 64]uint64
}

// add counts n more values, and refuses them past maxValues.
func (w *walker) add(n int) error {
	if n > maxValues-w.values {
		return errTooMany
	}
	w.values += n
	return nil
}

// fixedSize is the size of a value of type t that holds no other, or 0.
func fixedSize(t byte) int {
	switch t {
	case tBool, tI8:
		return 1
	case tI16:
		return 2
	case tI32:
		return 4
	case tI64, tDouble:
		return 8
	}
	return 0
}

// skipValue returns the length of the value of type t at the start of b.
func (w *walker) skipValue(b []byte, t byte, depth int) (int, error) {
	if n := fixedSize(t); n > 0 {
		if len(b) < n {
			return 0, errShort
		}
		return n, nil
	}
	switch {
	case t == tBinary:
		size, err := count(b, 0, 1)
		return 4 + size, err
	case t != tStruct && t != tMap && t != tSet && t != tList:
		return 0, fmt.Errorf("unknown Thrift type %d", t)
	case depth >= maxDepth:
		return 0, errTooDeep
	case t == tStruct:
		return w.skipStruct(b, depth)
	}
	nt := 1 // the types of a container's items: a map's are key and value
	if t == tMap {
		nt = 2
	}
	if len(b) < nt {
		return 0, errShort
	}
	types := b[:nt]
	size, fixed := 0, true // an item's, and whether all its types are fixed
	for _, et := range types {
		size += fixedSize(et)
		fixed = fixed && fixedSize(et) > 0
	}
	n, err := count(b, nt, max(1, size))
	if err != nil {
		return 0, err
	}
	if err := w.add(nt * n); err != nil {
		return 0, err
	}
	off := nt + 4
	if fixed {
		return off + n*size, nil
	}
	for range n {
		for _, et := range types {
			m, err := w.skipValue(b[off:], et, depth+1)
			if err != nil {
				return 0, err
			}
			off += m
		}
	}
	return off, nil
}

// skipStruct returns the length of the struct at the start of b, at depth.
func (w *walker) skipStruct(b []byte, depth int) (int, error) {
	seen := w.seen[depth]
	if seen == nil {
		seen = new([1 << 16 / 64]uint64)
		w.seen[depth] = seen
	}
	start := len(w.ids)
	defer func() {
		for _, id := range w.ids[start:] {
			seen[id/64] &^= 1 << (id % 64)
		}
		w.ids = w.ids[:start]
	}()
	off := 0
	for {
		if off >= len(b) {
			return 0, errShort
		}
		ft := b[off]
		if ft == tStop {
			return off + 1, nil
		}
		if off+3 > len(b) { // type, i16 field id
			return 0, errShort
		}
		id := binary.BigEndian.Uint16(b[off+1:])
		if seen[id/64]&(1<<(id%64)) != 0 {
			return 0, fmt.Errorf("%w %d", errRepeated, int16(id))
		}
		seen[id/64] |= 1 << (id % 64)
		w.ids = append(w.ids, id)
		if err := w.add(1); err != nil {
			return 0, err
		}
		off += 3
		n, err := w.skipValue(b[off:], ft, depth+1)
		if err != nil {
			return 0, err
		}
		off += n
	}
}

// count reads the i32 count at b[at:] of items of at least minSize bytes,
// and refuses one the bytes after it cannot hold.
func count(b []byte, at, minSize int) (int, error) {
	if len(b) < at+4 {
		return 0, errShort
	}
	n := int(int32(binary.BigEndian.Uint32(b[at:])))
	if n < 0 {
		return 0, fmt.Errorf("a negative count (%d)", n)
	}
	if n > (len(b)-at-4)/minSize {
		return 0, fmt.Errorf("a count of %d that the %d bytes left cannot hold", n, len(b)-at-4)
	}
	return n, nil
}

// textSize returns the bytes of JSON text encoding/json writes for the
// strings, binaries and map keys in v; past limit it stops early.
func textSize(v any, limit int) int {
	n := 0
	switch v := v.(type) {
	case string:
		n = quotedSize(v)
	case []byte:
		n = 2 + base64.StdEncoding.EncodedLen(len(v))
	case []any:
		for i := 0; i < len(v) && n <= limit; i++ {
			n += textSize(v[i], limit-n)
		}
	case map[string]any:
		for k, x := range v {
			if n > limit {
				break
			}
			n += quotedSize(k)
			n += textSize(x, limit-n)
		}
	}
	return n
}

// quotedSize is the length of s as encoding/json quotes it, HTML escaped
// and each byte that is not UTF-8 written as \ufffd.
func quotedSize(s string) int {
	n := 2
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
			n += 2
		case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029' || r == utf8.RuneError && size == 1:
			n += 6
		default:
			n += size
		}
	}
	return n
}

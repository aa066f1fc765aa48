package thriftjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// field is a struct field's header in Thrift's binary protocol.
func field(t byte, id int16) []byte {
	return binary.BigEndian.AppendUint16([]byte{t}, uint16(id))
}

// list is a list's header: its elements' type and their count.
func list(et byte, n int) []byte {
	return binary.BigEndian.AppendUint32([]byte{et}, uint32(n))
}

// cat joins byte slices.
func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// allocated returns the bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A hostile server's answer of many small values is refused before
// thriftrw decodes it, allocating little: decoded, each value would cost
// about 88 bytes in thriftrw and a JSON value after. The reviewer's 64 MiB
// answer of field 0 repeated allocated 8.1 GiB; a million repeats (4 MiB),
// 335 MB.
func TestAnswerOfTooManyValuesIsRefused(t *testing.T) {
	echo, err := load(t).Method("Shapes::echo")
	require.NoError(t, err)
	health := Health()

	// A struct of 65,536 bool fields, all the IDs there are: n of them
	// in a list is 65,536n values in 262 KB each.
	var wide []byte
	for id := range 1 << 16 {
		wide = append(wide, field(tBool, int16(id))...)
		wide = append(wide, 1)
	}
	wide = append(wide, tStop)
	var wides []byte
	for range 17 {
		wides = append(wides, wide...)
	}
	// 1,025 lists of 1,024 bytes: no count over the cap, their sum is.
	var lists []byte
	for range 1025 {
		lists = append(lists, list(tI8, 1024)...)
		lists = append(lists, make([]byte, 1024)...)
	}

	for _, c := range []struct {
		name   string
		m      *Method
		answer []byte
		want   string
	}{
		{"field 0 repeated", health, append(bytes.Repeat(cat(field(tStruct, 0), []byte{tStop}), 1<<20), tStop),
			"Meta::health: the answer is not a Thrift struct: a struct repeats field 0"},
		{"a field repeated deeper", echo, cat(field(tStruct, 0), field(tI8, 10), []byte{1}, field(tI16, 11), []byte{0, 1}, field(tI8, 10), []byte{2, tStop, tStop}),
			"a struct repeats field 10"},
		{"one count over the cap", echo, cat(field(tList, 0), list(tStruct, maxValues), make([]byte, maxValues), []byte{tStop}),
			"Shapes::echo: the answer: more than 1048576 values, the most an answer may hold"},
		{"lists whose sum is over the cap", echo, cat(field(tList, 0), list(tList, 1025), lists, []byte{tStop}),
			"more than 1048576 values"},
		{"structs whose fields are over the cap", echo, cat(field(tList, 0), list(tStruct, 17), wides, []byte{tStop}),
			"more than 1048576 values"},
	} {
		var err error
		n := allocated(func() { _, err = c.m.Answer(c.answer) })
		assert.ErrorContains(t, err, c.want, c.name)
		assert.Less(t, n, uint64(1<<20), "%s: %d bytes allocated to refuse %d", c.name, n, len(c.answer))
	}
}

// The walk counts every value, container elements as well as fields, up to
// the cap exactly, and lets each struct use the field IDs its parent and
// its siblings use.
func TestCheckBounds(t *testing.T) {
	// The answer struct, its field 0, and n elements of a list.
	listOf := func(n int) []byte { return cat(field(tList, 0), list(tI8, n), make([]byte, n), []byte{tStop}) }
	mapOf := func(n int) []byte {
		return cat(field(tMap, 0), []byte{tI8, tI8}, binary.BigEndian.AppendUint32(nil, uint32(n)), make([]byte, 2*n), []byte{tStop})
	}
	point := func(ids ...int16) []byte {
		var b []byte
		for _, id := range ids {
			b = append(b, field(tI32, id)...)
			b = append(b, 0, 0, 0, 1)
		}
		return append(b, tStop)
	}
	for _, c := range []struct {
		name   string
		answer []byte
		want   string
	}{
		{"a list at the cap", listOf(maxValues - 2), ""},
		{"a list one over", listOf(maxValues - 1), "more than 1048576 values"},
		{"a map's keys and values at the cap", mapOf((maxValues - 2) / 2), ""},
		{"a map's keys and values one over", mapOf((maxValues-2)/2 + 1), "more than 1048576 values"},
		{"siblings with the same IDs", cat(field(tList, 0), list(tStruct, 3), point(1, 2), point(2, 1), point(1), []byte{tStop}), ""},
		{"a child with its parent's IDs", cat(field(tStruct, 1), point(1, 2), field(tStruct, 2), point(2, 1), []byte{tStop}), ""},
		{"a sibling repeating an ID", cat(field(tList, 0), list(tStruct, 2), point(1, 2), point(2, 1, 2), []byte{tStop}), "a struct repeats field 2"},
		{"a negative ID repeated", cat(point(-1, 3, -1)), "a struct repeats field -1"},
	} {
		err := checkBounds(c.answer)
		if c.want == "" {
			assert.NoError(t, err, c.name)
		} else {
			assert.ErrorContains(t, err, c.want, c.name)
		}
	}
}

// quotedSize and textSize count what encoding/json writes, byte for byte:
// every byte alone, escapes, HTML, runes of every length, U+2028, bytes
// that are not UTF-8, and random strings.
func TestTextSizeIsWhatJSONWrites(t *testing.T) {
	var cases []string
	for b := range 256 {
		cases = append(cases, string([]byte{byte(b)}), "a"+string([]byte{byte(b)})+"z")
	}
	cases = append(cases, "", "é", "€", "😀", "\u2028", "\u2029", "\xe2\x82", "\xff\xfe", "\xed\xa0\x80", "<a href=\"x\">&amp;</a>", "tab\there\r\n")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, len(want), quotedSize(s), "%q", s)
	}

	v := map[string]any{
		"k<":  []any{"a\x01", []byte{1, 2, 3, 4}, map[string]any{"\u2028": []byte{}}},
		"num": json.Number("12"),
		"b":   []byte("hello"),
	}
	want := 0
	for _, s := range []any{"k<", "a\x01", []byte{1, 2, 3, 4}, "\u2028", []byte{}, "num", "b", []byte("hello")} {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		want += len(b)
	}
	assert.Equal(t, want, textSize(v, 1<<30))
	assert.Greater(t, textSize(v, 3), 3, "a sum past the limit")
}

// An answer whose strings would print as more than maxText of JSON is
// refused before encoding/json escapes them: 17 MiB of control characters
// escape to 102 MiB. 1 MiB of them prints.
func TestAnswerOfTooMuchTextIsRefused(t *testing.T) {
	echo, err := load(t).Method("Shapes::echo")
	require.NoError(t, err)
	shapeNamed := func(name []byte) []byte {
		return cat(field(tStruct, 0), field(tBinary, 1), binary.BigEndian.AppendUint32(nil, uint32(len(name))), name, []byte{tStop, tStop})
	}

	big := shapeNamed(bytes.Repeat([]byte{1}, 17<<20))
	var a *Answer
	n := allocated(func() { a, err = echo.Answer(big) })
	assert.Nil(t, a)
	assert.EqualError(t, err, "Shapes::echo: the answer: its strings print as more than 96 MiB of JSON, the most an answer may")
	// Printing it would allocate about 1 GB; thriftrw's decoding, which
	// comes first, copies it a few times (8x under the race detector,
	// where sync.Pool keeps little).
	assert.Less(t, n, uint64(256<<20), "%d bytes allocated to refuse %d", n, len(big))

	a, err = echo.Answer(shapeNamed(bytes.Repeat([]byte{1}, 1<<20)))
	require.NoError(t, err)
	assert.Greater(t, len(a.JSON), 6<<20)
}

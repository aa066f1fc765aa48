package thriftjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/thriftrw/protocol/binary"
	"go.uber.org/thriftrw/wire"
)

func load(t *testing.T) *IDL {
	t.Helper()
	d, err := Load("testdata/svc.thrift")
	require.NoError(t, err)
	return d
}

// answerOf wraps a request's argument struct as the answer's result, as a
// server echoing its argument would: field 1 of the request becomes field
// 0 of the answer.
func answerOf(t *testing.T, req []byte) []byte {
	t.Helper()
	w, err := binary.Default.Decode(bytes.NewReader(req), wire.TStruct)
	require.NoError(t, err)
	f := w.GetStruct().Fields
	require.Len(t, f, 1)
	var buf bytes.Buffer
	require.NoError(t, binary.Default.Encode(wire.NewValueStruct(wire.Struct{Fields: []wire.Field{{ID: 0, Value: f[0].Value}}}), &buf))
	return buf.Bytes()
}

func TestRoundTripEveryType(t *testing.T) {
	m, err := load(t).Method("Shapes::echo")
	require.NoError(t, err)
	in := `{"s": {"name": "tri", "points": [{"x": 1, "y": -2}, {"x": 3}],
	  "colors": ["RED", 2], "sizes": {"a": 9007199254740993}, "labels": {"7": "seven"},
	  "blob": "hi", "at": 1700000000000, "ratio": 0.5, "closed": true, "tiny": -8, "small": 300,
	  "inner": {"name": "in"}}}`
	req, err := m.Request([]byte(in))
	require.NoError(t, err)
	a, err := m.Answer(answerOf(t, req))
	require.NoError(t, err)
	assert.Empty(t, a.Exception)
	// As yab prints: enums by name, binary as base64, non-string map keys
	// as their JSON text, i64 exact.
	want := `{"result": {"name": "tri", "points": [{"x": 1, "y": -2}, {"x": 3}],
	  "colors": ["RED", "GREEN"], "sizes": {"a": 9007199254740993}, "labels": {"7": "seven"},
	  "blob": "aGk=", "at": 1700000000000, "ratio": 0.5, "closed": true, "tiny": -8, "small": 300,
	  "inner": {"name": "in"}}}`
	assert.JSONEq(t, want, string(a.JSON))
	assert.True(t, strings.HasPrefix(string(a.JSON), "{\n  \"result\""), "indented by two spaces: %s", a.JSON)
	assert.Contains(t, string(a.JSON), "9007199254740993", "an i64 beyond 2^53 stays exact")
}

func TestInheritedAndIncludedMethods(t *testing.T) {
	d := load(t)
	m, err := d.Method("Shapes::ping")
	require.NoError(t, err, "a method of the service it extends, from an included file")
	req, err := m.Request(nil)
	require.NoError(t, err)
	assert.Equal(t, []byte{0}, req, "no arguments: an empty struct")
	assert.Equal(t, []string{"Base::ping", "Shapes::echo", "Shapes::fire", "Shapes::ping", "Shapes::put"}, d.Methods())
}

func TestException(t *testing.T) {
	m, err := load(t).Method("Shapes::put")
	require.NoError(t, err)
	missing := wire.NewValueStruct(wire.Struct{Fields: []wire.Field{{ID: 1, Value: wire.NewValueString("x")}}})
	var buf bytes.Buffer
	require.NoError(t, binary.Default.Encode(wire.NewValueStruct(wire.Struct{Fields: []wire.Field{{ID: 1, Value: missing}}}), &buf))
	a, err := m.Answer(buf.Bytes())
	require.NoError(t, err)
	assert.JSONEq(t, `{"missing": {"what": "x"}}`, string(a.JSON))
	assert.Equal(t, "missing", a.Exception)
	assert.Equal(t, "Missing", a.ExceptionType)

	a, err = m.Answer([]byte{0})
	require.NoError(t, err)
	assert.Equal(t, "{}", string(a.JSON), "a void method's success")

	// ExceptionType reads the same name from the field's header alone.
	assert.Equal(t, "Missing", m.ExceptionType(buf.Bytes()))
	for _, b := range [][]byte{{0}, nil, {12, 0}, {12, 0, 9}, {12, 0, 0}} { // void, empty, short, undeclared id 9, the result (id 0)
		assert.Equal(t, "", m.ExceptionType(b), "%v", b)
	}
}

func TestRequestErrorsNameWhatIsWrong(t *testing.T) {
	d := load(t)
	echo, _ := d.Method("Shapes::echo")
	put, _ := d.Method("Shapes::put")
	for _, c := range []struct {
		m          *Method
		body, want string
	}{
		{echo, `{"s": {"nam": "x"}}`, `no field "nam" (fields: name, points,`},
		{echo, `{"t": {}}`, `the arguments: no field "t" (fields: s)`},
		{echo, `{"s": {}}`, `the required field "name" is missing`},
		{put, `{}`, `the required field "name" is missing`},
		{echo, `{"s": {"name": 1}}`, `s.name: want a string, got a number`},
		{echo, `{"s": {"name": "a", "tiny": 300}}`, `s.tiny: "300" is not an i8`},
		{echo, `{"s": {"name": "a", "colors": ["BLUE"]}}`, `Color has no item "BLUE" (items: RED, GREEN)`},
		{echo, `{"s": {"name": "a", "points": {}}}`, `want a JSON list, got an object`},
		{echo, `{"s": {"name": "a", "labels": {"x": "y"}}}`, `s.labels key "x": "x" is not an i32`},
		{echo, `[1]`, `the arguments: want a JSON object, got a list`},
		{echo, `{"s": `, `the request is not JSON`},
		{echo, `{} {}`, `more than one JSON value`},
		{echo, `{"s":` + strings.Repeat(`{"name":"a","inner":`, 70) + `{"name":"z"}` + strings.Repeat(`}`, 71), `nested deeper than 64`},
	} {
		_, err := c.m.Request([]byte(c.body))
		if assert.Error(t, err, c.body) {
			assert.Contains(t, err.Error(), c.want, c.body)
		}
	}
}

func TestMethodLookupErrors(t *testing.T) {
	d := load(t)
	for name, want := range map[string]string{
		"echo":         `a Thrift method is named Service::method; this IDL has Base::ping, Shapes::echo`,
		"Nope::echo":   `the IDL has no service "Nope"`,
		"Shapes::Echo": `service Shapes has no method "Echo"; it has Shapes::echo, Shapes::fire, Shapes::ping, Shapes::put`,
		"Shapes::":     `Service::method`,
	} {
		_, err := d.Method(name)
		if assert.Error(t, err, name) {
			assert.Contains(t, err.Error(), want, name)
		}
	}
	_, err := Load("testdata/nope.thrift")
	assert.ErrorContains(t, err, "no such file")
}

func TestAnswerErrors(t *testing.T) {
	d := load(t)
	echo, _ := d.Method("Shapes::echo")
	put, _ := d.Method("Shapes::put")
	enc := func(fields ...wire.Field) []byte {
		var buf bytes.Buffer
		require.NoError(t, binary.Default.Encode(wire.NewValueStruct(wire.Struct{Fields: fields}), &buf))
		return buf.Bytes()
	}
	_, err := echo.Answer(enc(wire.Field{ID: 0, Value: wire.NewValueString("x")}))
	assert.ErrorContains(t, err, "want Shape")
	_, err = put.Answer(enc(wire.Field{ID: 0, Value: wire.NewValueString("x")}))
	assert.ErrorContains(t, err, "is void but the answer has a result")
	_, err = put.Answer(enc(wire.Field{ID: 9, Value: wire.NewValueString("x")}))
	assert.ErrorContains(t, err, "field 9, which is neither the result nor a declared exception")
	_, err = echo.Answer([]byte{12, 0})
	assert.ErrorContains(t, err, "not a Thrift struct")
	fire, _ := d.Method("Shapes::fire")
	_, err = fire.Answer([]byte{0})
	assert.ErrorContains(t, err, "oneway")

	// A hostile answer nested without end is refused, not recursed into.
	v := wire.NewValueStruct(wire.Struct{})
	for range 200 {
		v = wire.NewValueStruct(wire.Struct{Fields: []wire.Field{{ID: 12, Value: v}}})
	}
	_, err = echo.Answer(enc(wire.Field{ID: 0, Value: v}))
	assert.ErrorContains(t, err, "nested deeper than 64")

	// Nor one nested two million deep (8 MB), which thriftrw's decoder,
	// recursing, would not survive: the nesting is checked before.
	deep := bytes.Repeat([]byte{12, 0, 0}, 2<<20)
	deep = append(deep, bytes.Repeat([]byte{0}, 2<<20+1)...)
	_, err = echo.Answer(deep)
	assert.ErrorContains(t, err, "nested deeper than 64")
	// Counts the bytes cannot hold are refused without a loop over them.
	_, err = echo.Answer([]byte{15, 0, 0, 12, 0x7f, 0xff, 0xff, 0xff})
	assert.ErrorContains(t, err, "a count of 2147483647 that the 0 bytes left cannot hold")
	_, err = echo.Answer([]byte{0, 1})
	assert.ErrorContains(t, err, "1 bytes after the struct")
}

func TestHealth(t *testing.T) {
	m := Health()
	assert.Equal(t, "Meta::health", m.Name)
	req, err := m.Request([]byte(`{}`))
	require.NoError(t, err)
	assert.Equal(t, []byte{0}, req)
	status := wire.NewValueStruct(wire.Struct{Fields: []wire.Field{{ID: 1, Value: wire.NewValueBool(true)}}})
	var buf bytes.Buffer
	require.NoError(t, binary.Default.Encode(wire.NewValueStruct(wire.Struct{Fields: []wire.Field{{ID: 0, Value: status}}}), &buf))
	a, err := m.Answer(buf.Bytes())
	require.NoError(t, err)
	ok, msg, err := Healthy(a)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Empty(t, msg)
	var v map[string]any
	require.NoError(t, json.Unmarshal(a.JSON, &v))
}

// Package thriftjson turns JSON into Thrift calls and Thrift answers back
// into JSON through an IDL compiled at run time by thriftrw: what `sluice
// call -t` and `sluice bench -t` send and print (arg3, a bare struct in
// the Binary protocol).
//
// The JSON forms are yab's: a struct is an object keyed by field name; an
// answer is {"result": VALUE}, {} for a void method, or {"NAME": {...}}
// for the declared exception NAME; enums are names ("Enum(7)" when
// unknown); binary prints as base64; a map with non-string keys is keyed
// by each key's JSON text. A request may also give an enum by number, a
// binary as a string, and a map as a list of {"key": K, "value": V}.
package thriftjson

import (
	"bytes"
	binary2 "encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/thriftrw/compile"
	"go.uber.org/thriftrw/protocol/binary"
	"go.uber.org/thriftrw/wire"
)

// IDL is a compiled Thrift file and the files it includes.
type IDL struct {
	mod *compile.Module
}

// Load compiles the Thrift file at path, with its includes, each read as
// untrusted input within the MaxIDL bounds.
func Load(path string) (*IDL, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("thrift IDL: %w", err)
	}
	files := &idlFS{}
	mod, err := compile.Compile(path, compile.NonStrict(), compile.Filesystem(files))
	if files.err != nil {
		err = files.err
	}
	if err != nil {
		return nil, fmt.Errorf("thrift IDL %s: %w", path, err)
	}
	return &IDL{mod: mod}, nil
}

// Method finds a method by its TChannel name, "Service::method",
// inherited methods under the inheriting service's name.
func (d *IDL) Method(name string) (*Method, error) {
	svcName, fn, ok := strings.Cut(name, "::")
	if !ok || svcName == "" || fn == "" {
		return nil, fmt.Errorf("method %q: a Thrift method is named Service::method; this IDL has %s", name, d.list())
	}
	svc, ok := d.services()[svcName]
	if !ok {
		return nil, fmt.Errorf("method %q: the IDL has no service %q; it has %s", name, svcName, d.list())
	}
	for s := svc; s != nil; s = s.Parent {
		if spec, ok := s.Functions[fn]; ok {
			return &Method{Name: name, spec: spec}, nil
		}
	}
	return nil, fmt.Errorf("method %q: service %s has no method %q; it has %s", name, svcName, fn, strings.Join(methodsOf(svc), ", "))
}

// Methods lists the IDL's methods by TChannel name, sorted.
func (d *IDL) Methods() []string {
	var all []string
	for _, svc := range d.services() {
		all = append(all, methodsOf(svc)...)
	}
	slices.Sort(all)
	return all
}

// services returns the services of the file and its includes by name, the
// first found of a name.
func (d *IDL) services() map[string]*compile.ServiceSpec {
	svcs := map[string]*compile.ServiceSpec{}
	d.mod.Walk(func(m *compile.Module) error {
		for name, svc := range m.Services {
			if _, ok := svcs[name]; !ok {
				svcs[name] = svc
			}
		}
		return nil
	})
	return svcs
}

func methodsOf(svc *compile.ServiceSpec) []string {
	var names []string
	for s := svc; s != nil; s = s.Parent {
		for fn := range s.Functions {
			names = append(names, svc.Name+"::"+fn)
		}
	}
	slices.Sort(names)
	return names
}

func (d *IDL) list() string {
	m := d.Methods()
	switch {
	case len(m) == 0:
		return "no services"
	case len(m) > 10:
		return strings.Join(m[:10], ", ") + fmt.Sprintf(" and %d more", len(m)-10)
	}
	return strings.Join(m, ", ")
}

// Method is one method of an IDL: it encodes requests and decodes answers.
type Method struct {
	// Name is the TChannel method name, "Service::method".
	Name string
	spec *compile.FunctionSpec
}

// maxDepth bounds the nesting of a request's and an answer's values.
const maxDepth = 64

// Request encodes body, a JSON object of the arguments by name ("" or
// null for none), as the method's argument struct: arg3 of a call.
func (m *Method) Request(body []byte) ([]byte, error) {
	v, err := decodeJSON(body)
	if err != nil {
		return nil, fmt.Errorf("%s: the request is not JSON: %w", m.Name, err)
	}
	if v == nil {
		v = map[string]any{}
	}
	st, err := toStruct(compile.FieldGroup(m.spec.ArgsSpec), v, "", 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Name, err)
	}
	var buf bytes.Buffer
	if err := binary.Default.Encode(wire.NewValueStruct(st), &buf); err != nil {
		return nil, fmt.Errorf("%s: encoding the request: %w", m.Name, err)
	}
	return buf.Bytes(), nil
}

// Answer is a decoded answer.
type Answer struct {
	// JSON is the answer as yab prints it, indented by two spaces.
	JSON []byte
	// Exception names the declared exception thrown ("notFound") and
	// ExceptionType its type ("KeyNotFound"); both "" on success.
	Exception, ExceptionType string
}

// Answer decodes arg3 of an answer: the method's result struct.
func (m *Method) Answer(arg3 []byte) (*Answer, error) {
	if m.spec.OneWay {
		return nil, fmt.Errorf("%s is oneway: it has no answer", m.Name)
	}
	// thriftrw decodes by unbounded recursion, into memory: bound first.
	if err := checkBounds(arg3); errors.Is(err, errTooDeep) || errors.Is(err, errTooMany) {
		return nil, fmt.Errorf("%s: the answer: %w", m.Name, err)
	} else if err != nil {
		return nil, fmt.Errorf("%s: the answer is not a Thrift struct: %w", m.Name, err)
	}
	w, err := binary.Default.Decode(bytes.NewReader(arg3), wire.TStruct)
	if err != nil {
		return nil, fmt.Errorf("%s: the answer is not a Thrift struct: %w", m.Name, err)
	}
	rs := m.spec.ResultSpec
	out := map[string]any{}
	a := &Answer{}
	for _, f := range w.GetStruct().Fields {
		name, typ, what := "result", rs.ReturnType, "the result"
		if f.ID != 0 {
			ex := fieldByID(rs.Exceptions, f.ID)
			if ex == nil {
				return nil, fmt.Errorf("%s: the answer has field %d, which is neither the result nor a declared exception", m.Name, f.ID)
			}
			name, typ, what = ex.Name, ex.Type, "exception "+ex.Name
			a.Exception, a.ExceptionType = ex.Name, ex.Type.ThriftName()
		} else if typ == nil {
			return nil, fmt.Errorf("%s is void but the answer has a result (%v)", m.Name, f.Value.Type())
		}
		if out[name], err = fromWire(typ, f.Value); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", m.Name, what, err)
		}
	}
	if len(out) > 1 {
		return nil, fmt.Errorf("%s: the answer has %d fields; a result struct has at most one", m.Name, len(out))
	}
	if n := textSize(out, maxText); n > maxText {
		return nil, fmt.Errorf("%s: the answer: its strings print as more than %d MiB of JSON, the most an answer may", m.Name, maxText>>20)
	}
	if a.JSON, err = json.MarshalIndent(out, "", "  "); err != nil {
		return nil, fmt.Errorf("%s: %w", m.Name, err)
	}
	return a, nil
}

// ExceptionType returns the type of the declared exception an answer's
// arg3 holds ("KeyNotFound"), or "". It reads the first field's header
// alone (type byte, big-endian int16 id; id 0 is the result), cheaply
// enough for a load generator.
func (m *Method) ExceptionType(arg3 []byte) string {
	if len(arg3) < 3 || arg3[0] == 0 {
		return ""
	}
	id := int16(binary2.BigEndian.Uint16(arg3[1:3]))
	if ex := fieldByID(m.spec.ResultSpec.Exceptions, id); id != 0 && ex != nil {
		return ex.Type.ThriftName()
	}
	return ""
}

// decodeJSON reads one JSON value, numbers kept exact.
func decodeJSON(b []byte) (any, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

func fieldByID(g compile.FieldGroup, id int16) *compile.FieldSpec {
	for _, f := range g {
		if f.ID == id {
			return f
		}
	}
	return nil
}

func fieldNames(g compile.FieldGroup) string {
	if len(g) == 0 {
		return "none"
	}
	names := make([]string, len(g))
	for i, f := range g {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// pathError is an error at a place in the request: "s.points[1].x".
func pathError(path, format string, a ...any) error {
	if path == "" {
		path = "the arguments"
	}
	return fmt.Errorf("%s: %s", path, fmt.Sprintf(format, a...))
}

// toStruct encodes an object as the struct of fields g, at path.
func toStruct(g compile.FieldGroup, v any, path string, depth int) (wire.Struct, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return wire.Struct{}, pathError(path, "want a JSON object, got %s", jsonKind(v))
	}
	for name := range obj {
		if !slices.ContainsFunc(g, func(f *compile.FieldSpec) bool { return f.Name == name }) {
			return wire.Struct{}, pathError(path, "no field %q (fields: %s)", name, fieldNames(g))
		}
	}
	var st wire.Struct
	for _, f := range g {
		fv, ok := obj[f.Name]
		if !ok || fv == nil {
			if f.Required {
				return wire.Struct{}, pathError(path, "the required field %q is missing", f.Name)
			}
			continue
		}
		// The field's path: "s.name", or "name" at the top.
		w, err := toWire(f.Type, fv, strings.TrimPrefix(path+"."+f.Name, "."), depth+1)
		if err != nil {
			return wire.Struct{}, err
		}
		st.Fields = append(st.Fields, wire.Field{ID: f.ID, Value: w})
	}
	return st, nil
}

// toWire encodes a JSON value at path as a value of type spec.
func toWire(spec compile.TypeSpec, v any, path string, depth int) (wire.Value, error) {
	if depth > maxDepth {
		return wire.Value{}, pathError(path, "nested deeper than %d", maxDepth)
	}
	switch s := compile.RootTypeSpec(spec).(type) {
	case *compile.StructSpec:
		st, err := toStruct(s.Fields, v, path, depth)
		return wire.NewValueStruct(st), err
	case *compile.ListSpec:
		items, err := toList(s.ValueSpec, v, path, depth)
		return wire.NewValueList(wire.ValueListFromSlice(s.ValueSpec.TypeCode(), items)), err
	case *compile.SetSpec:
		items, err := toList(s.ValueSpec, v, path, depth)
		return wire.NewValueSet(wire.ValueListFromSlice(s.ValueSpec.TypeCode(), items)), err
	case *compile.MapSpec:
		items, err := toMap(s, v, path, depth)
		return wire.NewValueMap(wire.MapItemListFromSlice(s.KeySpec.TypeCode(), s.ValueSpec.TypeCode(), items)), err
	}
	w, err := toScalar(spec, v)
	if err != nil {
		return wire.Value{}, pathError(path, "%v", err)
	}
	return w, nil
}

// toScalar encodes a JSON value as a value of a type that holds no other.
func toScalar(spec compile.TypeSpec, v any) (wire.Value, error) {
	switch s := compile.RootTypeSpec(spec).(type) {
	case *compile.BoolSpec:
		b, ok := v.(bool)
		if !ok {
			return wire.Value{}, fmt.Errorf("want a bool, got %s", jsonKind(v))
		}
		return wire.NewValueBool(b), nil
	case *compile.I8Spec:
		n, err := toInt(v, 8)
		return wire.NewValueI8(int8(n)), err
	case *compile.I16Spec:
		n, err := toInt(v, 16)
		return wire.NewValueI16(int16(n)), err
	case *compile.I32Spec:
		n, err := toInt(v, 32)
		return wire.NewValueI32(int32(n)), err
	case *compile.I64Spec:
		n, err := toInt(v, 64)
		return wire.NewValueI64(n), err
	case *compile.DoubleSpec:
		num, ok := v.(json.Number)
		if !ok {
			return wire.Value{}, fmt.Errorf("want a number, got %s", jsonKind(v))
		}
		f, err := num.Float64()
		if err != nil {
			return wire.Value{}, fmt.Errorf("%s is not a double", num)
		}
		return wire.NewValueDouble(f), nil
	case *compile.StringSpec:
		str, ok := v.(string)
		if !ok {
			return wire.Value{}, fmt.Errorf("want a string, got %s", jsonKind(v))
		}
		return wire.NewValueString(str), nil
	case *compile.BinarySpec:
		b, err := toBinary(v)
		return wire.NewValueBinary(b), err
	case *compile.EnumSpec:
		n, err := toEnum(s, v)
		return wire.NewValueI32(n), err
	}
	return wire.Value{}, fmt.Errorf("type %s is not supported", spec.ThriftName())
}

// toInt reads an integer of bits bits: a JSON number, or a string of one.
func toInt(v any, bits int) (int64, error) {
	var text string
	switch n := v.(type) {
	case json.Number:
		text = string(n)
	case string:
		text = n
	default:
		return 0, fmt.Errorf("want an i%d, got %s", bits, jsonKind(v))
	}
	n, err := strconv.ParseInt(text, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("%s is not an i%d", strconv.Quote(text), bits)
	}
	return n, nil
}

// toBinary reads a binary: a string's bytes, or a list of byte values.
func toBinary(v any) ([]byte, error) {
	switch b := v.(type) {
	case string:
		return []byte(b), nil
	case []any:
		out := make([]byte, len(b))
		for i, x := range b {
			n, err := toInt(x, 16)
			if err != nil || n < 0 || n > math.MaxUint8 {
				return nil, fmt.Errorf("byte %d: want 0-255", i)
			}
			out[i] = byte(n)
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a string or a list of bytes, got %s", jsonKind(v))
}

// toEnum reads an enum item by name, or by value.
func toEnum(s *compile.EnumSpec, v any) (int32, error) {
	switch x := v.(type) {
	case string:
		if item, ok := s.LookupItem(x); ok {
			return item.Value, nil
		}
	case json.Number:
		n, err := toInt(x, 32)
		return int32(n), err
	default:
		return 0, fmt.Errorf("want a %s name, got %s", s.Name, jsonKind(v))
	}
	names := make([]string, len(s.Items))
	for i, it := range s.Items {
		names[i] = it.Name
	}
	return 0, fmt.Errorf("%s has no item %q (items: %s)", s.Name, v, strings.Join(names, ", "))
}

func toList(spec compile.TypeSpec, v any, path string, depth int) ([]wire.Value, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, pathError(path, "want a JSON list, got %s", jsonKind(v))
	}
	items := make([]wire.Value, len(arr))
	for i, x := range arr {
		w, err := toWire(spec, x, fmt.Sprintf("%s[%d]", path, i), depth+1)
		if err != nil {
			return nil, err
		}
		items[i] = w
	}
	return items, nil
}

// toMap reads a map: an object keyed by the keys' text, or a list of
// {"key", "value"}.
func toMap(s *compile.MapSpec, v any, path string, depth int) ([]wire.MapItem, error) {
	var items []wire.MapItem
	add := func(k, val any, where string) error {
		kw, err := toWire(s.KeySpec, k, path+" key "+where, depth+1)
		if err != nil {
			return err
		}
		vw, err := toWire(s.ValueSpec, val, path+"["+where+"]", depth+1)
		if err != nil {
			return err
		}
		items = append(items, wire.MapItem{Key: kw, Value: vw})
		return nil
	}
	switch m := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(m)) { // a stable encoding
			if err := add(mapKey(s.KeySpec, k), m[k], strconv.Quote(k)); err != nil {
				return nil, err
			}
		}
	case []any:
		for i, x := range m {
			pair, ok := x.(map[string]any)
			_, hasKey := pair["key"]
			if !ok || !hasKey || len(pair) > 2 {
				return nil, pathError(fmt.Sprintf("%s[%d]", path, i), `want {"key": K, "value": V}`)
			}
			if err := add(pair["key"], pair["value"], strconv.Itoa(i)); err != nil {
				return nil, err
			}
		}
	default:
		return nil, pathError(path, `want a JSON object or a list of {"key", "value"}, got %s`, jsonKind(v))
	}
	return items, nil
}

// mapKey reads an object's key: a string or binary key as is, any other
// as JSON text if it parses (an enum name does not).
func mapKey(spec compile.TypeSpec, k string) any {
	switch compile.RootTypeSpec(spec).(type) {
	case *compile.StringSpec, *compile.BinarySpec:
		return k
	}
	if parsed, err := decodeJSON([]byte(k)); err == nil {
		return parsed
	}
	return k
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a bool"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// fromWire decodes a wire value of type spec into what JSON prints.
func fromWire(spec compile.TypeSpec, w wire.Value) (any, error) {
	root := compile.RootTypeSpec(spec)
	if root.TypeCode() != w.Type() {
		return nil, fmt.Errorf("want %s (%v), got %v", spec.ThriftName(), root.TypeCode(), w.Type())
	}
	switch s := root.(type) {
	case *compile.StringSpec:
		return w.GetString(), nil
	case *compile.EnumSpec:
		n := w.GetI32()
		for _, it := range s.Items {
			if it.Value == n {
				return it.Name, nil
			}
		}
		return fmt.Sprintf("%s(%d)", s.Name, n), nil
	case *compile.StructSpec:
		out := map[string]any{}
		for _, f := range w.GetStruct().Fields {
			fs := fieldByID(s.Fields, f.ID)
			if fs == nil {
				continue // a field newer than the IDL
			}
			v, err := fromWire(fs.Type, f.Value)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", s.Name, fs.Name, err)
			}
			out[fs.Name] = v
		}
		return out, nil
	case *compile.ListSpec:
		return fromList(s.ValueSpec, w.GetList())
	case *compile.SetSpec:
		return fromList(s.ValueSpec, w.GetSet())
	case *compile.MapSpec:
		out := map[string]any{}
		err := w.GetMap().ForEach(func(it wire.MapItem) error {
			k, err := fromWire(s.KeySpec, it.Key)
			if err != nil {
				return fmt.Errorf("a key: %w", err)
			}
			v, err := fromWire(s.ValueSpec, it.Value)
			if err != nil {
				return fmt.Errorf("a value: %w", err)
			}
			ks, ok := k.(string)
			if !ok {
				b, err := json.Marshal(k)
				if err != nil {
					return err
				}
				ks = string(b)
			}
			out[ks] = v
			return nil
		})
		return out, err
	}
	return w.Get(), nil // a bool, a number or a binary's []byte
}

func fromList(spec compile.TypeSpec, l wire.ValueList) ([]any, error) {
	out := make([]any, 0, l.Size())
	err := l.ForEach(func(v wire.Value) error {
		x, err := fromWire(spec, v)
		if err != nil {
			return fmt.Errorf("[%d]: %w", len(out), err)
		}
		out = append(out, x)
		return nil
	})
	return out, err
}

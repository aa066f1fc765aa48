// Package jsonout writes the sluice commands' machine-readable reports
// (`-o json`) by one convention, whatever the Go types behind them, so
// that every command's JSON reads alike:
//
//   - the report is one JSON value on one line;
//   - keys are snake_case: a struct field's json tag name when it has one,
//     else its Go name converted (RSSPeak: rss_peak, P99: p99, GCs: gcs);
//     fields tagged "-", unexported fields, funcs and channels are left
//     out, and an embedded struct's fields are promoted (an outer field of
//     the same key wins), as encoding/json does; map keys are data and
//     are kept as they are;
//   - a time.Duration is a number of milliseconds, its key ending in _ms
//     (added unless the key already ends in _ms; a key ending in _s has
//     seconds);
//   - a time.Time is RFC 3339 text;
//   - an integer type with a String method (an enum) is its name:
//     "FAIR_SHARE", not 3;
//   - where there is no value there is null: a nil pointer, slice, map or
//     interface, a NaN or infinite float;
//   - a type with its own MarshalJSON writes itself (the load generator's
//     reports do: their quantiles are null for a set of no call).
package jsonout

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Write writes v to w as one line of JSON by the package's convention.
func Write(w io.Writer, v any) error {
	b, err := Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Marshal returns v as JSON by the package's convention.
func Marshal(v any) ([]byte, error) {
	e := encoder{}
	if err := e.value(reflect.ValueOf(v), 0); err != nil {
		return nil, err
	}
	return e.buf.Bytes(), nil
}

// maxDepth bounds nesting: a report is a few levels deep; a cycle is a
// bug, not an infinite loop.
const maxDepth = 32

var (
	durationType  = reflect.TypeFor[time.Duration]()
	timeType      = reflect.TypeFor[time.Time]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
	stringerType  = reflect.TypeFor[fmt.Stringer]()
	textType      = reflect.TypeFor[encoding.TextMarshaler]()
)

type encoder struct {
	buf     bytes.Buffer
	seconds bool // durations in seconds: the field's key ends in _s
}

func (e *encoder) value(v reflect.Value, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("jsonout: nested more than %d levels (a cycle?)", maxDepth)
	}
	if !v.IsValid() {
		e.buf.WriteString("null")
		return nil
	}
	t := v.Type()
	canI := v.CanInterface() // false for what an unexported embedded struct promotes
	switch {
	case t == durationType:
		unit := time.Millisecond
		if e.seconds {
			unit = time.Second
		}
		e.float(float64(v.Int()) / float64(unit))
		return nil
	case t == timeType && canI:
		return e.leaf(v.Interface().(time.Time).Format(time.RFC3339Nano))
	case canI && t.Implements(marshalerType) && !(t.Kind() == reflect.Pointer && v.IsNil()):
		return e.leaf(v.Interface())
	case canI && isEnum(t):
		return e.leaf(v.Interface().(fmt.Stringer).String())
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			e.buf.WriteString("null")
			return nil
		}
		return e.value(v.Elem(), depth+1)
	case reflect.Struct:
		return e.object(v, depth)
	case reflect.Map:
		return e.mapping(v, depth)
	case reflect.Slice:
		if v.IsNil() {
			e.buf.WriteString("null")
			return nil
		}
		if t.Elem().Kind() == reflect.Uint8 {
			return e.leaf(v.Bytes())
		}
		fallthrough
	case reflect.Array:
		e.buf.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				e.buf.WriteByte(',')
			}
			if err := e.value(v.Index(i), depth+1); err != nil {
				return err
			}
		}
		e.buf.WriteByte(']')
		return nil
	case reflect.Float32, reflect.Float64:
		e.float(v.Float())
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.buf.WriteString(strconv.FormatInt(v.Int(), 10))
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.buf.WriteString(strconv.FormatUint(v.Uint(), 10))
		return nil
	case reflect.Bool:
		e.buf.WriteString(strconv.FormatBool(v.Bool()))
		return nil
	case reflect.String:
		return e.leaf(v.String())
	}
	e.buf.WriteString("null") // func, chan, complex, unsafe pointer: no value to show
	return nil
}

// isEnum reports whether t is an integer type with a String method.
func isEnum(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return t.Implements(stringerType)
	}
	return false
}

// leaf writes v as encoding/json does.
func (e *encoder) leaf(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("jsonout: %w", err)
	}
	e.buf.Write(b)
	return nil
}

// float writes f, null when it is NaN or infinite.
func (e *encoder) float(f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.buf.WriteString("null")
		return
	}
	b, _ := json.Marshal(f)
	e.buf.Write(b)
}

// field is a struct field to write, depth levels of embedding down.
type field struct {
	key   string
	v     reflect.Value
	depth int
}

func (e *encoder) object(v reflect.Value, depth int) error {
	var all []field
	collect(v, &all, 0)
	// An outer field hides an embedded one of the same key, as in
	// encoding/json; the fields keep their order.
	least := map[string]int{}
	for _, f := range all {
		if d, ok := least[f.key]; !ok || f.depth < d {
			least[f.key] = f.depth
		}
	}
	e.buf.WriteByte('{')
	first := true
	for _, f := range all {
		if d, ok := least[f.key]; !ok || d != f.depth {
			continue
		}
		delete(least, f.key) // the first of equals
		if !first {
			e.buf.WriteByte(',')
		}
		first = false
		if err := e.leaf(f.key); err != nil {
			return err
		}
		e.buf.WriteByte(':')
		outer := e.seconds
		e.seconds = strings.HasSuffix(f.key, "_s")
		err := e.value(f.v, depth+1)
		e.seconds = outer
		if err != nil {
			return err
		}
	}
	e.buf.WriteByte('}')
	return nil
}

// collect appends v's fields to fields in order, an embedded struct's
// where it is embedded, one level deeper.
func collect(v reflect.Value, fields *[]field, depth int) {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, hasTag := sf.Tag.Lookup("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		fv := v.Field(i)
		if sf.Anonymous && name == "" {
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
				if fv.IsNil() {
					continue
				}
				fv = fv.Elem()
			}
			if ft.Kind() == reflect.Struct && depth < maxDepth {
				collect(fv, fields, depth+1)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		switch sf.Type.Kind() {
		case reflect.Func, reflect.Chan, reflect.UnsafePointer:
			continue
		}
		if strings.Contains(","+opts+",", ",omitempty,") && fv.IsZero() {
			continue
		}
		key := name
		if !hasTag || key == "" {
			key = Snake(sf.Name)
		}
		if isDuration(sf.Type) && !strings.HasSuffix(key, "_ms") && !strings.HasSuffix(key, "_s") {
			key += "_ms"
		}
		*fields = append(*fields, field{key, fv, depth})
	}
}

// isDuration reports whether t is a Duration, or a pointer to, slice or
// array of Durations: values written in milliseconds.
func isDuration(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	return t == durationType
}

func (e *encoder) mapping(v reflect.Value, depth int) error {
	if v.IsNil() {
		e.buf.WriteString("null")
		return nil
	}
	type entry struct {
		key string
		v   reflect.Value
	}
	var entries []entry
	for it := v.MapRange(); it.Next(); {
		k, err := mapKey(it.Key())
		if err != nil {
			return err
		}
		entries = append(entries, entry{k, it.Value()})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	e.buf.WriteByte('{')
	for i, en := range entries {
		if i > 0 {
			e.buf.WriteByte(',')
		}
		if err := e.leaf(en.key); err != nil {
			return err
		}
		e.buf.WriteByte(':')
		if err := e.value(en.v, depth+1); err != nil {
			return err
		}
	}
	e.buf.WriteByte('}')
	return nil
}

// mapKey is a map key as text, as encoding/json writes it.
func mapKey(k reflect.Value) (string, error) {
	if k.Kind() == reflect.String {
		return k.String(), nil
	}
	if k.Type().Implements(textType) {
		b, err := k.Interface().(encoding.TextMarshaler).MarshalText()
		return string(b), err
	}
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(k.Uint(), 10), nil
	}
	return "", fmt.Errorf("jsonout: unsupported map key type %v", k.Type())
}

// Snake converts a Go name to snake_case: an underscore before each word,
// an acronym one word (RSSPeak: rss_peak), its plural too (GCs: gcs, RPCs:
// rpcs), digits kept with what they follow (P99: p99, After1s: after1s).
func Snake(name string) string {
	rs := []rune(name)
	var b strings.Builder
	for i, r := range rs {
		if !unicode.IsUpper(r) {
			b.WriteRune(r)
			continue
		}
		if i > 0 {
			prev := rs[i-1]
			switch {
			case unicode.IsLower(prev) || unicode.IsDigit(prev):
				b.WriteByte('_')
			case unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1]) && !plural(rs, i+1):
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// plural reports whether rs[i] is an acronym's plural s: an "s" that ends
// the name or comes before another word.
func plural(rs []rune, i int) bool {
	return rs[i] == 's' && (i+1 == len(rs) || !unicode.IsLower(rs[i+1]))
}

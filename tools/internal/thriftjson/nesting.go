package thriftjson

import (
	"encoding/binary"
	"errors"
	"fmt"
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

var (
	errShort   = errors.New("the bytes end inside a value")
	errTooDeep = fmt.Errorf("nested deeper than %d", maxDepth)
)

// checkNesting walks b, a struct in Thrift's binary protocol, without
// decoding it, and refuses one nested deeper than maxDepth or cut short.
// Its recursion is bounded by maxDepth, and its loops by len(b): every
// field and every element of a container takes at least one byte, and a
// count is checked against the bytes left before it is looped over.
func checkNesting(b []byte) error {
	n, err := skipValue(b, tStruct, 0)
	if err == nil && n != len(b) {
		err = fmt.Errorf("%d bytes after the struct", len(b)-n)
	}
	return err
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
func skipValue(b []byte, t byte, depth int) (int, error) {
	if n := fixedSize(t); n > 0 {
		if len(b) < n {
			return 0, errShort
		}
		return n, nil
	}
	switch t {
	case tBinary:
		size, err := count(b, 0, 1)
		if err != nil {
			return 0, err
		}
		return 4 + size, nil
	case tStruct, tMap, tSet, tList:
		if depth >= maxDepth {
			return 0, errTooDeep
		}
	default:
		return 0, fmt.Errorf("unknown Thrift type %d", t)
	}
	off := 0
	skip := func(t byte) error {
		n, err := skipValue(b[off:], t, depth+1)
		off += n
		return err
	}
	switch t {
	case tStruct:
		for {
			if off >= len(b) {
				return 0, errShort
			}
			ft := b[off]
			if ft == tStop {
				return off + 1, nil
			}
			if off += 3; off > len(b) { // type, i16 field id
				return 0, errShort
			}
			if err := skip(ft); err != nil {
				return 0, err
			}
		}
	case tMap:
		if len(b) < 2 {
			return 0, errShort
		}
		kt, vt := b[0], b[1]
		n, err := count(b, 2, max(1, fixedSize(kt)+fixedSize(vt)))
		if err != nil {
			return 0, err
		}
		off = 6
		for range n {
			if err := skip(kt); err != nil {
				return 0, err
			}
			if err := skip(vt); err != nil {
				return 0, err
			}
		}
	default: // set, list
		if len(b) < 1 {
			return 0, errShort
		}
		et := b[0]
		n, err := count(b, 1, max(1, fixedSize(et)))
		if err != nil {
			return 0, err
		}
		off = 5
		if w := fixedSize(et); w > 0 {
			return off + n*w, nil
		}
		for range n {
			if err := skip(et); err != nil {
				return 0, err
			}
		}
	}
	return off, nil
}

// count reads the i32 count at b[at:] of items of at least minSize bytes
// each, and refuses one that is negative or that the bytes after it
// cannot hold.
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

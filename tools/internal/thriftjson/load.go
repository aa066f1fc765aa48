package thriftjson

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/sluice-rpc/sluice/internal/localfile"
)

// Bounds on an IDL, read as untrusted input: thriftrw's compiler recurses
// into nested values and holds about 15 bytes per byte of text.
const (
	MaxIDLFileBytes = 4 << 20  // one file
	MaxIDLBytes     = 16 << 20 // a file and its includes
	MaxIDLFiles     = 256      // a file and its includes
	// MaxIDLDepth is the deepest brackets may nest in a file, outside
	// comments and strings: a million deep overflowed the compiler's stack.
	MaxIDLDepth = 64
)

// idlFS is the file system the compiler reads an IDL through, within the
// bounds above.
type idlFS struct {
	files int
	bytes int64
	// err is the first file refused for a bound, which Load reports alone
	// rather than wrapped once per include on the way to it.
	err error
}

func (f *idlFS) Read(name string) ([]byte, error) {
	data, err := f.read(name)
	var pe *fs.PathError
	if err != nil && f.err == nil && !errors.As(err, &pe) {
		f.err = err
	}
	return data, err
}

func (f *idlFS) read(name string) ([]byte, error) {
	f.files++
	if f.files > MaxIDLFiles {
		return nil, fmt.Errorf("the IDL is made of more than %d files (MaxIDLFiles), counting its includes", MaxIDLFiles)
	}
	data, err := localfile.Read(name, MaxIDLFileBytes, "a Thrift IDL file")
	if err != nil {
		return nil, err
	}
	f.bytes += int64(len(data))
	if f.bytes > MaxIDLBytes {
		return nil, fmt.Errorf("the IDL and its includes hold more than %d bytes (%s, MaxIDLBytes) with %q", int64(MaxIDLBytes), localfile.Size(MaxIDLBytes), name)
	}
	if line, ok := checkDepth(data, MaxIDLDepth); !ok {
		return nil, fmt.Errorf("%q nests brackets deeper than %d (MaxIDLDepth) at line %d", name, MaxIDLDepth, line)
	}
	return data, nil
}

func (*idlFS) Abs(p string) (string, error) { return filepath.Abs(p) }

// checkDepth reports whether the brackets of the Thrift text src nest at
// most limit deep outside comments and strings, and if not the line where
// they first go deeper.
func checkDepth(src []byte, limit int) (line int, ok bool) {
	line = 1
	depth := 0
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '\n':
			line++
		case '#':
			i = skipLine(src, i)
		case '/':
			switch {
			case i+1 < len(src) && src[i+1] == '/':
				i = skipLine(src, i)
			case i+1 < len(src) && src[i+1] == '*':
				for i += 2; i < len(src) && !(src[i] == '*' && i+1 < len(src) && src[i+1] == '/'); i++ {
					if src[i] == '\n' {
						line++
					}
				}
				i++ // the '/' of "*/"
			}
		case '"', '\'':
			for i++; i < len(src) && src[i] != c; i++ {
				switch src[i] {
				case '\\':
					i++
				case '\n':
					line++
				}
			}
		case '{', '[', '(', '<':
			depth++
			if depth > limit {
				return line, false
			}
		case '}', ']', ')', '>':
			depth = max(0, depth-1)
		}
	}
	return line, true
}

// skipLine returns the index before the newline ending i's line.
func skipLine(src []byte, i int) int {
	for i < len(src) && src[i] != '\n' {
		i++
	}
	return i - 1
}

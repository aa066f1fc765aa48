package thriftjson

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/sluice-rpc/sluice/internal/localfile"
)

// Bounds on an IDL: the files a command is told to read are local input,
// read as untrusted (a named pipe, a device or a huge file in a file's
// place is an error naming it), and thriftrw's compiler, which recurses
// into nested values and holds about 15 bytes for each byte of text, is
// handed only what these bounds allow.
const (
	// MaxIDLFileBytes is the most one IDL file may hold: 4 MiB, ten times
	// the largest IDLs in use.
	MaxIDLFileBytes = 4 << 20
	// MaxIDLBytes is the most the file and every file it includes may hold
	// together: 16 MiB.
	MaxIDLBytes = 16 << 20
	// MaxIDLFiles is the most files an IDL may be made of, its includes
	// (each read once) counted.
	MaxIDLFiles = 256
	// MaxIDLDepth is the deepest brackets may nest in an IDL file ({}, [],
	// (), <>, outside comments and strings): a type such as
	// map<string, list<Item>> nests 2, a struct's field annotations 2. A
	// constant nested a million deep overflowed the compiler's stack.
	MaxIDLDepth = 64
)

// idlFS is the file system thriftrw's compiler reads an IDL through: each
// file through localfile.Read and the bounds above.
type idlFS struct {
	files int
	bytes int64
	// err is the first file refused for breaking a bound: Load reports
	// it alone, not wrapped in a compile error per include on the way to
	// it (256 of them for a chain of includes over MaxIDLFiles). A file
	// that cannot be opened is left to the compiler's error, which names
	// the include and its line.
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
// most limit deep, outside comments (//, # and /* */) and string literals
// ("..." and '...', with backslash escapes); if not, it also returns the
// line where they first go deeper. A closing bracket without its opening
// one is left for the compiler to report.
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

// skipLine returns the index of the newline ending the line i is on (or
// len(src)), for the loop to count.
func skipLine(src []byte, i int) int {
	for i < len(src) && src[i] != '\n' {
		i++
	}
	return i - 1
}

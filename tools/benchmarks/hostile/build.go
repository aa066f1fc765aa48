package hostile

import (
	"debug/buildinfo"
	"fmt"
)

// Build describes the build of the Go binary at path, from the build
// information the go command stamps in it: its commit ("commit a34f947",
// with ", modified" if the work tree had changes) or its module version,
// or why it cannot tell.
func Build(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("build unknown: %v", err)
	}
	rev, modified := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return "version " + bi.Main.Version + ", no commit stamped (built with -buildvcs=false?)"
	}
	s := "commit " + rev[:min(len(rev), 7)]
	if modified {
		s += ", modified"
	}
	return s
}

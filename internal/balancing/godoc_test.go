package balancing

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The weighted rule is w / (1 + pending / w) (LotteryKey). Godoc that
// states Envoy's w / (pending + 1) as the library's own rule is stale:
// only a line that names Envoy, or follows one that does, may write it.
func TestGodocStatesTheWeightedRule(t *testing.T) {
	root := filepath.Join("..", "..")
	stale := []string{"weight / (pending + 1)", "weight/(pending+1)", "w / (pending + 1)", "w/(pending+1)"}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "tools" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines := strings.Split(string(b), "\n")
		for i, line := range lines {
			for _, s := range stale {
				if !strings.Contains(line, s) {
					continue
				}
				if strings.Contains(line, "Envoy") || (i > 0 && strings.Contains(lines[i-1], "Envoy")) {
					continue
				}
				t.Errorf("%s:%d states %q, not the weighted rule w / (1 + pending / w): %s", path, i+1, s, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

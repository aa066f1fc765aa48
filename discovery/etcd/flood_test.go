package etcd_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/discovery/etcd"
	"github.com/sluice-rpc/sluice/internal/testkit/procmem"
	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
)

// The registry flood of the hostile-peer report, at full size: 60 values
// of 1.4 MB under the prefix, each an endpoint whose Metadata decodes into
// millions of Go values (1.33 GB in a client that decoded them). The
// resolver reads them a page at a time, leaves every one out unread for
// MaxValueSize and reports the cap; the process's peak RSS stays under
// 200 MB. The fast version of the same defence is
// TestResolverLeavesOutLargeValues.
func TestFloodOfLargeValues(t *testing.T) {
	slowtest.Skip(t, "writes 84 MB to etcd and measures this process's peak RSS")
	if slowtest.Race {
		t.Skip("the race detector multiplies memory: run without -race")
	}
	if _, err := procmem.PeakRSS(); err != nil {
		t.Skip(err)
	}
	_, cli := startEtcd(t)
	value := `{"Addr":"127.0.0.1:1","Metadata":{"x":[` + strings.Repeat("{},", 1_400_000/3) + `{}]}}`
	for i := range 60 {
		put(t, cli, fmt.Sprintf("%s/big%02d", prefix, i), value)
	}
	r, err := etcd.NewResolver(resolverConfig(cli))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	resolve(t, r, rec)
	err = rec.waitError(t, "more than ResolverConfig.MaxValueSize")
	t.Logf("reported: %.300s", err)
	if set, _ := rec.last(); set != nil {
		t.Errorf("a set of %d peers was reported", len(set))
	}
	peak, _ := procmem.PeakRSS()
	t.Logf("peak RSS %d MB", peak>>20)
	if peak > 200<<20 {
		t.Errorf("peak RSS %d MB, want under 200 MB", peak>>20)
	}

	// Over MaxKeys as well: refused from the count, before any value.
	cfg := resolverConfig(cli)
	cfg.MaxKeys = 50
	r, err = etcd.NewResolver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec = newRecorder()
	resolve(t, r, rec)
	if err := rec.waitError(t, "MaxKeys (50)"); !errors.Is(err, etcd.ErrOverCap) {
		t.Errorf("the error %v is not ErrOverCap", err)
	}
}

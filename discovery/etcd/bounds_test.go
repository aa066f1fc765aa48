package etcd_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/discovery/etcd"
)

// Guards MaxKeys: a prefix with more keys than the cap gives a fresh
// resolver no set at all but an error naming the cap (ErrOverCap), read
// from the first page's count; a running one that the watch takes over the
// cap reports the same error and no new set, so the last good set stays;
// back under the cap, the set flows again. Without the cap the fresh
// resolver would report all six peers.
func TestResolverCapsKeys(t *testing.T) {
	_, cli := startEtcd(t)
	for i := range 6 {
		putPeer(t, cli, fmt.Sprintf("%s/k%d", prefix, i), fmt.Sprintf("127.0.0.1:%d", 4000+i))
	}
	cfg := resolverConfig(cli)
	cfg.MaxKeys = 5
	r, err := etcd.NewResolver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	resolve(t, r, rec)
	err = rec.waitError(t, "MaxKeys (5)")
	if !errors.Is(err, etcd.ErrOverCap) || !strings.Contains(err.Error(), "6 keys") || !strings.Contains(err.Error(), "no set was read yet") {
		t.Errorf("the error is %q, want ErrOverCap naming 6 keys and that no set was read", err)
	}
	if set, _ := rec.last(); set != nil {
		t.Errorf("a set of %v was reported from a prefix over the cap", hostPorts(set))
	}

	// Under the cap: the set comes.
	del(t, cli, prefix+"/k5")
	del(t, cli, prefix+"/k4")
	rec.waitSet(t, "127.0.0.1:4000", "127.0.0.1:4001", "127.0.0.1:4002", "127.0.0.1:4003")

	// Over it through the watch: the error, and no set of more than 4
	// peers, until it is under again.
	_, before := rec.last()
	putPeer(t, cli, prefix+"/k4", "127.0.0.1:4004")
	putPeer(t, cli, prefix+"/k5", "127.0.0.1:4005")
	rec.waitFor(t, "an error after the prefix went over the cap", func() bool {
		for _, err := range rec.errors()[before:] {
			if errors.Is(err, etcd.ErrOverCap) {
				if !strings.Contains(err.Error(), "the last set read (") {
					t.Errorf("the error %q does not say the last set stays", err)
				}
				return true
			}
		}
		return false
	})
	del(t, cli, prefix+"/k0")
	rec.waitSet(t, "127.0.0.1:4001", "127.0.0.1:4002", "127.0.0.1:4003", "127.0.0.1:4004", "127.0.0.1:4005")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, s := range rec.sets {
		if len(s) > 5 {
			t.Errorf("a set of %d peers was reported, over MaxKeys", len(s))
		}
	}
}

// Guards MaxValueSize: a value or a key over it is left out without being
// decoded, and reported by its key (a long key by its first bytes), both
// when read and when watched; the other peers are reported. Without it the
// large values, valid endpoints, would be decoded and their peers
// reported.
func TestResolverLeavesOutLargeValues(t *testing.T) {
	_, cli := startEtcd(t)
	big := func(hostPort string) string {
		return fmt.Sprintf(`{"Addr":%q,"Metadata":{"pad":%q}}`, hostPort, strings.Repeat("x", 2000))
	}
	putPeer(t, cli, prefix+"/good1", "127.0.0.1:4001")
	put(t, cli, prefix+"/big1", big("127.0.0.1:4009"))
	longKey := prefix + "/" + strings.Repeat("k", 2000)
	putPeer(t, cli, longKey, "127.0.0.1:4008")
	cfg := resolverConfig(cli)
	cfg.MaxValueSize = 1024
	r, err := etcd.NewResolver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	resolve(t, r, rec)
	rec.waitSet(t, "127.0.0.1:4001")
	// The long key sorts first (its name is quoted), big1 after it.
	err = rec.waitError(t, "left out with 1 more keys (services/kv/big1)")
	if !strings.Contains(err.Error(), "the key is 2012 bytes, more than ResolverConfig.MaxValueSize (1024)") ||
		!strings.Contains(err.Error(), "sha256") || strings.Contains(err.Error(), strings.Repeat("k", 100)) {
		t.Errorf("the error %q does not name the long key by its first bytes and digest, and the cap", err)
	}

	// A key over the cap is deleted by its name; a value over it is left
	// out when watched too.
	del(t, cli, longKey)
	put(t, cli, prefix+"/big2", big("127.0.0.1:4007"))
	putPeer(t, cli, prefix+"/good2", "127.0.0.1:4002")
	rec.waitSet(t, "127.0.0.1:4001", "127.0.0.1:4002")
	rec.waitError(t, `key "services/kv/big1": the value is 2047 bytes, more than ResolverConfig.MaxValueSize (1024): left out unread; left out with 1 more keys (services/kv/big2)`)

	del(t, cli, prefix+"/big1")
	put(t, cli, prefix+"/big2", `{"Addr":"127.0.0.1:4007"}`)
	rec.waitSet(t, "127.0.0.1:4007", "127.0.0.1:4001", "127.0.0.1:4002") // in key order
}

// Guards MaxBytes: keys and values under MaxValueSize but over MaxBytes in
// all are a failure naming the cap, and no set. Without it the ten peers
// would be reported.
func TestResolverCapsBytes(t *testing.T) {
	_, cli := startEtcd(t)
	for i := range 10 {
		put(t, cli, fmt.Sprintf("%s/k%d", prefix, i), fmt.Sprintf(`{"Addr":"127.0.0.1:%d","Metadata":{"pad":%q}}`, 4000+i, strings.Repeat("x", 200)))
	}
	cfg := resolverConfig(cli)
	cfg.MaxBytes = 1000
	r, err := etcd.NewResolver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	resolve(t, r, rec)
	err = rec.waitError(t, "MaxBytes (1000)")
	if !errors.Is(err, etcd.ErrOverCap) {
		t.Errorf("the error %q is not ErrOverCap", err)
	}
	if set, _ := rec.last(); set != nil {
		t.Errorf("a set of %v was reported from a prefix over the cap", hostPorts(set))
	}
}

// A read of more keys than one page holds reads them all, at one
// revision.
func TestResolverReadsPages(t *testing.T) {
	_, cli := startEtcd(t)
	var want []string
	for i := range 40 {
		hp := fmt.Sprintf("127.0.0.1:%d", 4100+i)
		putPeer(t, cli, fmt.Sprintf("%s/k%03d", prefix, i), hp)
		want = append(want, hp)
	}
	r, err := etcd.NewResolver(resolverConfig(cli))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	resolve(t, r, rec)
	rec.waitSet(t, want...)
}

// Guards reporting no set when every key is left out: a fresh client whose
// prefix holds only values over MaxValueSize learns why it has no peers
// (the error names the cap) instead of an empty service; once a key holds
// a peer, the set comes. Without it an empty set would be reported, and a
// call would fail with "no peers" and no word of the cap.
func TestResolverAllLeftOutReportsNoSet(t *testing.T) {
	_, cli := startEtcd(t)
	for i := range 3 {
		put(t, cli, fmt.Sprintf("%s/big%d", prefix, i), fmt.Sprintf(`{"Addr":"127.0.0.1:%d","Metadata":{"pad":%q}}`, 4000+i, strings.Repeat("x", 2000)))
	}
	cfg := resolverConfig(cli)
	cfg.MaxValueSize = 1024
	r, err := etcd.NewResolver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	resolve(t, r, rec)
	rec.waitError(t, "more than ResolverConfig.MaxValueSize (1024): left out unread; left out with 2 more keys (services/kv/big1, services/kv/big2), no set reported")
	if set, _ := rec.last(); set != nil {
		t.Errorf("a set of %v was reported, want none", hostPorts(set))
	}
	putPeer(t, cli, prefix+"/good", "127.0.0.1:4009")
	rec.waitSet(t, "127.0.0.1:4009")
}

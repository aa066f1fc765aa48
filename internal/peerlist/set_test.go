package peerlist

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/pool"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/uber/tchannel-go"
)

// Set keeps the peers that stay (same *Peer: limiter, latency, counts),
// updates their weights, adds the new ones and removes the others, in one
// change.
func TestSetDiffsThePeers(t *testing.T) {
	l, clk := newList(t, 100, hp(1), hp(2), hp(3))
	kept := l.Get(hp(2))
	kept.Begin()
	kept.End(clk.Now(), 3*time.Millisecond, codes.OK)
	if err := l.Set([]peer.Member{{HostPort: hp(2), Weight: 5}, {HostPort: hp(4)}}); err != nil {
		t.Fatal(err)
	}
	peers := l.Peers()
	if len(peers) != 2 || peers[0] != kept || peers[1].HostPort() != hp(4) {
		t.Fatalf("after Set: %v", peers)
	}
	if kept.Weight() != 5 || peers[1].Weight() != 1 {
		t.Fatalf("weights %v and %v, want 5 and 1 (0 means 1)", kept.Weight(), peers[1].Weight())
	}
	if kept.Latency() != 3*time.Millisecond || kept.Counts().Sent != 1 {
		t.Fatalf("the peer that stayed lost its state: latency %v, %+v", kept.Latency(), kept.Counts())
	}
}

// An invalid member changes nothing, and the error names it.
func TestSetRejectsInvalidMembersWhole(t *testing.T) {
	l, _ := newList(t, 100, hp(1))
	for _, tt := range []struct {
		m    []peer.Member
		want string
	}{
		{[]peer.Member{{HostPort: hp(2)}, {HostPort: "nonsense"}}, `bad host:port "nonsense"`},
		{[]peer.Member{{HostPort: hp(2), Weight: -1}}, "weight -1, must be 0 (meaning 1) or a number in [1e-06, 1e+09]"},
		{[]peer.Member{{HostPort: hp(2), Weight: 1e-320}}, "weight 1e-320, must be 0 (meaning 1) or a number in"},
		{[]peer.Member{{HostPort: hp(2), Weight: 1e308}}, "weight 1e+308, must be 0 (meaning 1) or a number in"},
		{[]peer.Member{{HostPort: hp(2)}, {HostPort: hp(2)}}, "listed twice"},
	} {
		err := l.Set(tt.m)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Set(%v) = %v, want an error with %q", tt.m, err, tt.want)
		}
		if ps := l.Peers(); len(ps) != 1 || ps[0].HostPort() != hp(1) {
			t.Fatalf("a rejected Set changed the list: %v", ps)
		}
	}
}

// A list whose peers come from a resolver answers ErrResolving, not
// ErrNoPeers, until its first Set, and the Set wakes the callers waiting
// on Changed; an empty first answer then means ErrNoPeers.
func TestResolvingListWaitsForTheFirstSet(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{}, tchannel.ChannelOptions{})
	l, err := New(Config{Service: "kv", Pool: f.pool, Resolving: true})
	if err != nil {
		t.Fatal(err)
	}
	changed := l.Changed()
	if _, err := l.Choose(nil); err != ErrResolving {
		t.Fatalf("before the first Set: %v, want ErrResolving", err)
	}
	s := startServer(t, "127.0.0.1:0")
	if err := l.Set([]peer.Member{{HostPort: s.PeerInfo().HostPort}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("the first Set did not signal Changed")
	}
	f.waitStateOf(l, s.PeerInfo().HostPort, peer.Ready)
	if p, err := l.Choose(nil); err != nil || p.HostPort() != s.PeerInfo().HostPort {
		t.Fatalf("after the first Set: %v, %v", p, err)
	}
	if err := l.Set(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Choose(nil); err != peer.ErrNoPeers {
		t.Fatalf("after an empty Set: %v, want ErrNoPeers", err)
	}
}

// waitStateOf waits for the peer at hostPort of l to be in state want.
func (f *fixture) waitStateOf(l *List, hostPort string, want peer.State) {
	f.t.Helper()
	f.waitState(l.Get(hostPort), want)
}

// A choice that found the list empty while the resolver's first answer
// was being applied gets its members, not ErrNoPeers: Set stores them
// before it clears resolving, and noPeers, which a choice calls after its
// load of the members, looks again. (The moment itself is too short to
// hit on purpose; TestResolverChurn in package channel met it once in
// several thousand calls, as a NO_PEERS failure.)
func TestChoiceRacingTheFirstSetFindsItsMembers(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{}, tchannel.ChannelOptions{})
	l, err := New(Config{Service: "kv", Pool: f.pool, Resolving: true})
	if err != nil {
		t.Fatal(err)
	}
	empty := l.peers.Load() // what a choice loaded before the Set
	if len(empty.peers) != 0 {
		t.Fatalf("a new list has %d members", len(empty.peers))
	}
	if _, err := l.noPeers(); err != ErrResolving {
		t.Fatalf("before the first Set: %v, want ErrResolving", err)
	}
	if err := l.Set([]peer.Member{{HostPort: "127.0.0.1:1"}}); err != nil {
		t.Fatal(err)
	}
	m, err := l.noPeers() // the choice goes on after the Set
	if err != nil || len(m.peers) != 1 || m.peers[0].HostPort() != "127.0.0.1:1" {
		t.Fatalf("a choice that loaded the empty list before the first Set: %v, %v; want the new member", m, err)
	}
	if err := l.Set(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.noPeers(); err != peer.ErrNoPeers {
		t.Fatalf("after an empty Set: %v, want ErrNoPeers", err)
	}
}

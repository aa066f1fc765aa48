package server

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
)

// Mastership is what a server knows of its node's master.
type Mastership struct {
	// IsMaster is true when this server is the master.
	IsMaster bool
	// Master is the address clients should be sent to: the master's
	// advertised address, or empty when no master is known (an election
	// in progress).
	Master string
}

// Election decides which of the servers forming one Doorman node is the
// master. A Server with no Election is its own master. The etcd v3
// implementation is in package etcdelection; simulations drive a Server
// with their own.
//
// An Election has no clock of its own to offer the server: it only
// reports outcomes, and the server times learning mode with its own
// clock from the moment it is told it won.
type Election interface {
	// Run campaigns for mastership under id (the server's advertised
	// address, which other servers hand to clients as the master's) until
	// ctx ends. It calls report with the first outcome it knows and then
	// with every change, from one goroutine at a time; a server that is
	// told it is not the master stops serving at once. Run returns nil
	// when ctx ends, or an error when it cannot go on (the server then
	// reports itself not the master and runs it again after a backoff).
	//
	// An implementation must report losing mastership no later than the
	// moment another server may win it: that bound is how long a server
	// cut off from the others may keep serving.
	Run(ctx context.Context, id string, report func(Mastership)) error
}

// electionMinBackoff and electionMaxBackoff bound the ceiling of the wait
// before Run is called again after it failed (see electionBackoff).
const (
	electionMinBackoff = 100 * time.Millisecond
	electionMaxBackoff = 5 * time.Second
)

// electionBackoff is the wait before Run is called again after failures
// in a row: electionMinBackoff doubled per failure, at most
// electionMaxBackoff, each wait drawn from the upper half of that (equal
// jitter), so that the servers of a node (and of every node on the same
// lock service) that failed together do not campaign again in lockstep.
var electionBackoff = backoff.Exponential{Initial: electionMinBackoff, Max: electionMaxBackoff, Multiplier: 2,
	Jitter: backoff.EqualJitter}

// Mastership returns what the server knows now of its node's master.
func (s *Server) Mastership() Mastership {
	if m := s.ms.Load(); m != nil {
		return *m
	}
	s.mu.Lock()
	addr := s.address
	s.mu.Unlock()
	return Mastership{IsMaster: true, Master: addr}
}

// setMastership records an election outcome. On winning, the server
// starts empty in learning mode, as at start; on losing it drops all its
// state (its clients' leases are the new master's to learn).
func (s *Server) setMastership(m Mastership) {
	now := s.clock.Now()
	s.epochMu.Lock()
	prev := s.ms.Load()
	was := prev == nil || prev.IsMaster
	if prev != nil && *prev == m {
		s.epochMu.Unlock()
		return
	}
	if m.IsMaster != was {
		s.resetLocked()
		if m.IsMaster {
			s.masterSince = now
			s.cfgMu.RLock()
			s.startCfg = s.repo
			s.cfgMu.RUnlock()
		}
	}
	s.ms.Store(&m)
	s.epochMu.Unlock()
	s.pokeParent()
	switch {
	case m.IsMaster:
		s.log().Info("doorman server: now the master (new state, learning mode)")
	case m.Master != "":
		s.log().Info("doorman server: not the master", "master", m.Master)
	default:
		s.log().Info("doorman server: not the master; no master known")
	}
	if s.onMastership != nil {
		s.onMastership(m)
	}
}

// resetLocked forgets every resource, client and lease (epochMu held for
// writing, so no request is in flight).
func (s *Server) resetLocked() {
	for i := range s.resources {
		sh := &s.resources[i]
		sh.mu.Lock()
		for _, r := range sh.m {
			r.mu.Lock()
			r.deleted = true
			r.tab = newTable()
			r.leases = map[string]int32{}
			r.updateGauges()
			r.mu.Unlock()
		}
		sh.m = make(map[string]*resource)
		sh.mu.Unlock()
		cs := &s.clients[i]
		cs.mu.Lock()
		cs.m = make(map[string]*clientEntry)
		cs.mu.Unlock()
	}
	s.srcMu.Lock()
	s.resetSourcesLocked()
	s.srcMu.Unlock()
	s.nResources.n.Store(0)
	s.nClients.n.Store(0)
	s.nLeases.n.Store(0)
	s.reapMu.Lock()
	s.reapQ = nil
	s.nextDue.Store(math.MaxInt64)
	s.reapMu.Unlock()
}

// runElection runs the election until ctx ends, again after a backoff
// when it fails (reset once a run has lasted longer than the longest
// backoff).
func (s *Server) runElection(ctx context.Context, id string) {
	failures := 0
	for {
		began := s.clock.Now()
		err := s.election.Run(ctx, id, s.setMastership)
		s.setMastership(Mastership{})
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("server: Election.Run returned before its context ended")
		}
		s.log().Warn("doorman server: the election failed; stepped down, running it again after a backoff", "error", err)
		if s.clock.Since(began) > electionMaxBackoff {
			failures = 0
		}
		failures++
		t := s.clock.NewTimer(electionBackoff.Delay(failures, s.rand()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

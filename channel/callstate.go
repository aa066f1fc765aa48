package channel

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/criticality"

	"github.com/sluice-rpc/sluice/internal/decline"
	"github.com/sluice-rpc/sluice/internal/peerlist"
	"github.com/sluice-rpc/sluice/internal/pool"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/retryexec"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/uber/tchannel-go"
)

// callState is one call's memory across its attempts: the peers chosen
// (each attempt avoids them, hedges in flight included) and the successful
// responses by attempt number. It also holds the response the first
// successful attempt reads, and the request of the front-ends that build
// one (CallRaw, CallJSON, which recycle it: see frontState). Hedged
// attempts run concurrently, and lock it (see lock).
type callState struct {
	c    *Channel
	l    *peerlist.List
	pol  *methodPolicy // the method's: stats, pacer, estimator, backoff
	spec attemptSpec

	waitForReady bool // wait for a ready peer even when none is connecting
	// class is the call's criticality class (see callClass).
	class criticality.Class
	// tch are the tchannel-go call options of the call's attempts when
	// its options set transport headers (nil: callOptionsFor's).
	tch *tchannel.CallOptions
	// plain are tch without a mark; retried says tch mark a retry already
	// (the call serves one).
	plain      *tchannel.CallOptions
	retried    bool
	concurrent bool // attempts may run at once (hedging): lock takes mu
	resUsed    bool // resBuf is taken
	// start is when the call started, when nothing (a gate, a pacer) held
	// it up before its first attempt; else zero.
	start time.Time

	mu   sync.Mutex
	used []*peerlist.Peer // in the order chosen, each once
	sent int              // attempts sent on the wire
	last int              // Number of the latest attempt (sequential retries)
	wins []win            // successful attempts (more than one only when hedging)
	// held is the response budget the successful attempts' responses
	// took, given back when the call returns (see release).
	held int64

	// Inline backing for used and wins: most calls need one of each, and
	// the callState is allocated anyway.
	usedBuf  [2]*peerlist.Peer
	winsBuf  [1]win
	peersBuf [2]string // backs Response.Peers / CallError.Peers
	resBuf   Response  // the first successful attempt's response

	frontReq Request // CallRaw's and CallJSON's request

	// scratch is where sequential attempts read a response's arguments
	// first (argScratch); a recycled state keeps it.
	scratch *[firstArgCap]byte
}

// argScratch returns the buffer an attempt reads its response's arguments
// into first, or nil when attempts may run at once (hedging), which would
// share it.
func (st *callState) argScratch() *[firstArgCap]byte {
	if st.concurrent {
		return nil
	}
	if st.scratch == nil {
		st.scratch = new([firstArgCap]byte)
	}
	return st.scratch
}

// lock locks st.mu when attempts may run at once (hedging). Without
// hedging a call's attempts run one after another on the caller's
// goroutine (the retry executor's, or the single one), nothing else
// reaches st meanwhile, and lock does nothing: an uncontended mutex still
// costs atomic operations, three times per attempt.
func (st *callState) lock() {
	if st.concurrent {
		st.mu.Lock()
	}
}

func (st *callState) unlock() {
	if st.concurrent {
		st.mu.Unlock()
	}
}

type win struct {
	n   int
	res *Response
}

// response returns the response of successful attempt n; st is locked.
func (st *callState) response(n int) *Response {
	for _, w := range st.wins {
		if w.n == n {
			return w.res
		}
	}
	return nil
}

// hold takes over the response budget res holds, for the call to give
// back when it returns.
func (st *callState) hold(res *Response) {
	if res.held == 0 {
		return
	}
	st.lock()
	st.held += res.held
	st.unlock()
	res.held = 0
}

// releaseResponses gives back the response budget the call's responses
// took; every attempt has ended.
func (st *callState) releaseResponses() {
	if st.held != 0 {
		st.c.responses.release(st.held)
		st.held = 0
	}
}

// newResponseLocked returns the Response an attempt reads into: the one
// inside the call state for the first attempt to ask (most calls make one),
// a new one for the others (hedges may read concurrently). st is locked.
func (st *callState) newResponseLocked() *Response {
	if !st.resUsed {
		st.resUsed = true
		return &st.resBuf
	}
	return &Response{}
}

// tchannelOptions returns the tchannel-go call options of an attempt
// sending a request of format f: the call's own, when its options set
// transport headers, else the ones every call of format f shares.
func (st *callState) tchannelOptions(f tchannel.Format) *tchannel.CallOptions {
	t := st.tch
	switch {
	case t == nil:
		return callOptionsFor(f)
	case t.Format != f: // an attempt middleware sends another format
		c := *t
		c.Format = f
		return &c
	}
	return t
}

// pick chooses the peer for one attempt at time now (see choose). While no
// peer is ready but some are connecting (or, waiting for ready, while none
// is ready at all) it waits for a peer's state to change, or for ctx to
// end. It returns the peer and the time of the choice.
func (st *callState) pick(ctx context.Context, now time.Time) (*peerlist.Peer, time.Time, error) {
	for {
		p, err := st.choose(now)
		if err != nil && st.c.closed.Load() {
			return nil, now, ErrClosed // its peers are shut down: nothing to wait for
		}
		if !st.mayWait(err) {
			return p, now, st.withCause(err)
		}
		// Choose again after taking the change signal, so that a change
		// between the two is not missed; the first choice kept the
		// common case free of it.
		changed := st.l.Changed()
		if p, err = st.choose(now); !st.mayWait(err) {
			return p, now, st.withCause(err)
		}
		if st.c.o.onWait != nil {
			st.c.o.onWait()
		}
		select {
		case <-changed:
			now = st.c.o.clock.Now()
		case <-ctx.Done():
			if err == peerlist.ErrResolving { // say why the resolver has not answered
				if r := st.pol.cl.res; r != nil {
					if ws := r.watcher.State(); ws.LastError != "" {
						err = fmt.Errorf("%w; %s: %s", err, ws.Target, ws.LastError)
					}
				}
			}
			return nil, now, fmt.Errorf("no peer became ready (%v): %w", st.withCause(err), ctx.Err())
		}
	}
}

// withCause returns err, the error of a choice that found no peer, with
// the cause of the latest connection failure among the call's peers when
// their connections failed (ErrUnavailable) or are being retried
// (ErrConnecting): the refused dial or timed-out handshake that the
// sentinel alone does not tell. The cause is wrapped when the sentinel is,
// so errors.Is finds both (syscall.ECONNREFUSED for a refused dial).
func (st *callState) withCause(err error) error {
	if err != peer.ErrUnavailable && err != peerlist.ErrConnecting {
		return err
	}
	var (
		last *pool.Failure
		from string
	)
	for _, p := range st.l.Peers() {
		if f := p.LastFailure(); f != nil && p.State() != peer.Ready && (last == nil || f.At.After(last.At)) {
			last, from = f, p.HostPort()
		}
	}
	if last == nil {
		return err
	}
	return fmt.Errorf("%w; the last connection failure, to %s: %w", err, from, last.Err)
}

// mayWait reports whether a choice that failed with err may wait for a
// peer's state to change.
func (st *callState) mayWait(err error) bool {
	return err == peerlist.ErrConnecting || err == peerlist.ErrResolving || (err == peer.ErrUnavailable && st.waitForReady)
}

// choose picks the peer for one attempt, avoiding the peers this call has
// used (a call with a shard key takes the key's home, or the next peer on
// the ring: peerlist.List.ClaimKeyClassAt), and records it, all under the
// call's lock: concurrent hedges of one call must not both pick a peer
// before either has recorded it. The peer counts the attempt as pending
// from the choice (peerlist.Peer.Claim; a shard key's bounded load is
// checked in the same atomic step), not from when BeginCall returns, so
// that calls choosing meanwhile see it. It never waits (pick does,
// without the lock).
func (st *callState) choose(now time.Time) (*peerlist.Peer, error) {
	st.lock()
	defer st.unlock()
	var (
		p   *peerlist.Peer
		err error
	)
	if st.tch != nil && st.tch.ShardKey != "" {
		p, err = st.l.ClaimKeyClassAt(st.tch.ShardKey, st.used, now, st.class)
	} else if p, err = st.l.ChooseClassAt(st.used, now, st.class); err == nil {
		p.Claim()
	}
	if err != nil {
		return nil, err
	}
	for _, q := range st.used {
		if q == p {
			return p, nil
		}
	}
	st.used = append(st.used, p)
	return p, nil
}

// try is the retryexec.AttemptFunc of a call: one attempt, classified into the
// executor's terms.
func (st *callState) try(ctx context.Context, a retryexec.Attempt) retryexec.Outcome {
	st.lock()
	into := st.newResponseLocked()
	st.unlock()

	// Attempts share the call's spec (they only read it), but for a
	// retried JSON or Thrift attempt, whose headers count the attempts
	// before it.
	spec := &st.spec
	if a.Number > 0 && !a.Transparent {
		// A retry or hedge: within the Client's budget, and marked as one
		// for its server.
		if !st.pol.cl.budget.Allow(st.c.o.clock.Now()) {
			st.pol.m.SkippedBudget()
			return retryexec.Outcome{Err: &CallError{Service: spec.service, Method: spec.method, Code: codes.Throttled, Err: errRetryBudget}, Code: codes.Throttled, Local: true}
		}
	}
	if a.Number > 0 {
		retried := *spec
		if spec.req.Format != tchannel.Raw {
			retried.req = spec.req.WithHeader(retry.AttemptsHeader, strconv.Itoa(a.Number))
		}
		if !st.retried {
			retried.tch = markClass(st.plain, spec.req.Format, st.class, true)
		}
		spec = &retried
	}
	var (
		res             *Response
		sent, committed bool
		err             error
	)
	if st.c.sendAttempt == nil {
		res, sent, committed, err = st.c.attempt(ctx, st, spec, a.Number, into)
	} else {
		res, sent, committed, err = st.c.attemptVia(ctx, st, spec, a.Number, into)
	}
	st.lock()
	st.last = a.Number
	if sent {
		st.sent++
	}
	if err == nil {
		st.wins = append(st.wins, win{a.Number, res})
	}
	st.unlock()
	if sent && a.Number > 0 {
		st.pol.m.Retry(a.Number)
		if err != nil {
			st.pol.m.RetryFailed()
		}
	}
	if err == nil {
		// Apart from the failures' outcome, which pacing may change: taking
		// its address would cost every call an allocation.
		st.paceResponse(res)
		return retryexec.Outcome{}
	}
	ce := err.(*CallError)
	o := retryexec.Outcome{Err: ce, Code: ce.Code, Committed: committed}
	if !sent && !committed {
		// Nothing could take it: no ready peer, every peer throttled, no
		// peers, the channel closed, or the deadline came first.
		o.Local = true
		return o
	}
	if ce.Code == codes.Busy || ce.Code == codes.Declined {
		o.Pushback, ce.Message = retryexec.PushbackFromMessage(ce.Message)
		o.DeclinedEarly = ce.Code == codes.Declined && decline.Early(ce.Message)
	}
	st.paceFailure(&o, a.Number)
	return o
}

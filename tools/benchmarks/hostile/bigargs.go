package hostile

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// bigLimit bounds the wait for the answer to a big call; bigWriteLimit
// one write of its frames (a server that stops reading).
const (
	bigLimit      = time.Minute
	bigWriteLimit = 10 * time.Second
)

// runBigArgs sends a 10 MB and a 100 MB arg3 to echo on one connection,
// each followed by a normal call on the same connection.
func runBigArgs(e *env) error {
	e.before()
	s := e.sample()
	var conn *rawConn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	id := uint32(1)
	for _, size := range []int{10_000_000, 100_000_000} {
		if !e.t.Alive() {
			break
		}
		if conn == nil {
			var err error
			if conn, err = dialRaw(e.ctx, e.t.Addr, ""); err != nil {
				return err
			}
			if err := conn.handshake(handshakeTimeout); err != nil {
				return fmt.Errorf("handshake: %w", err)
			}
		}
		id += 2
		c := e.bigCall(conn, id, size)
		e.survived(&c, deathWait)
		if c.Closed {
			conn.Close()
			conn = nil
		} else if e.t.Alive() {
			id += 2
			next := sameConnCall(conn, id, []byte("after the big call"), e.p.deadline)
			c.Next = &next
		}
		e.r.Cases = append(e.r.Cases, c)
	}
	if conn != nil {
		conn.Close()
		conn = nil
	}
	e.peaks(s)
	e.after()
	e.r.caseFigures()
	return nil
}

// bigCall sends a call with an arg3 of size bytes on conn while reading
// the server's answer.
func (e *env) bigCall(conn *rawConn, id uint32, size int) Case {
	c := Case{Name: fmt.Sprintf("%d MB arg3 (%d bytes)", size/1_000_000, size)}
	arg3 := make([]byte, size)
	type result struct {
		a       answer
		err     error
		at      time.Time
		written int64 // bytes written when the answer came
	}
	answered := make(chan result, 1)
	var written atomic.Int64
	go func() {
		a, err := conn.readAnswer(id, bigLimit)
		answered <- result{a, err, time.Now(), written.Load()}
	}()
	start := time.Now()
	spec := callSpec{id: id, ttl: bigLimit, service: Service, scheme: "raw", method: MethodEcho, arg3: arg3}
	werr := spec.frames(func(f []byte, _ bool) error {
		conn.SetWriteDeadline(time.Now().Add(bigWriteLimit))
		n, err := conn.Write(f)
		written.Add(int64(n))
		return err
	})
	conn.SetWriteDeadline(time.Time{})
	res := <-answered // bounded by readAnswer's limit
	switch {
	case errors.Is(res.err, errClosed):
		c.Closed, c.After = true, millis.Duration(res.at.Sub(start))
	case res.err != nil:
		c.Note = "no answer: " + res.err.Error()
	default:
		c.Answer = res.a.String()
		c.After = millis.Duration(res.at.Sub(start))
		if res.a.errMsg == "" && res.a.code == 0 && !bytes.Equal(res.a.args[2], arg3) {
			c.Note = fmt.Sprintf("echo answered %d bytes of %d", len(res.a.args[2]), size)
		}
	}
	c.Note = joinNote(c.Note, fmt.Sprintf("%s MiB of %s MiB written when the answer came", mb(res.written), mb(written.Load())))
	if werr != nil {
		c.Note = joinNote(c.Note, "writing stopped: "+werr.Error())
		if !isTimeout(werr) {
			c.Closed = true
		}
	}
	return c
}

// sameConnCall makes a small echo call on conn and reads its answer.
func sameConnCall(conn *rawConn, id uint32, arg3 []byte, limit time.Duration) Call {
	start := time.Now()
	spec := callSpec{id: id, ttl: limit, service: Service, scheme: "raw", method: MethodEcho, arg3: arg3}
	err := spec.frames(func(f []byte, _ bool) error {
		conn.SetWriteDeadline(time.Now().Add(limit))
		_, err := conn.Write(f)
		return err
	})
	if err != nil {
		return Call{Code: "NETWORK", Latency: millis.Duration(time.Since(start)), Err: err.Error()}
	}
	a, err := conn.readAnswer(id, limit)
	c := Call{Latency: millis.Duration(time.Since(start))}
	switch {
	case errors.Is(err, errClosed):
		c.Code, c.Err = "CLOSED", err.Error()
	case err != nil:
		c.Code, c.Err = "TIMEOUT", err.Error()
	case a.errMsg != "":
		c.Code, c.Err = errorCodeName(a.errCode), a.errMsg
	case a.code != 0:
		c.Code, c.Err = "APPLICATION", string(a.args[2])
	case !bytes.Equal(a.args[2], arg3):
		c.Code, c.Err = "WRONG", fmt.Sprintf("echo answered %q", a.args[2])
	default:
		c.OK = true
	}
	return c
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

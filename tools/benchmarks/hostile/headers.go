package hostile

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// runHeaders sends, each on a new connection, a JSON call with 100,000
// application headers (its arg2) and raw calls with a big arg2, and checks
// the server answers, survives and serves a new client.
func runHeaders(e *env) error {
	e.before()
	s := e.sample()
	var h bytes.Buffer
	h.WriteByte('{')
	for i := 0; i < 100_000; i++ {
		if i > 0 {
			h.WriteByte(',')
		}
		h.WriteString(`"h` + strconv.Itoa(i) + `":"v"`)
	}
	h.WriteByte('}')
	cases := []struct {
		name       string
		scheme     string
		arg2, arg3 []byte
	}{
		{fmt.Sprintf("JSON call, 100,000 headers (%s MiB arg2)", mb(int64(h.Len()))), "json", h.Bytes(), []byte("{}")},
		{"raw call, 3 MB arg2", "raw", make([]byte, 3_000_000), []byte("x")},
		{"raw call, 8 MB arg2", "raw", make([]byte, 8_000_000), []byte("x")},
	}
	for i, tc := range cases {
		if !e.t.Alive() {
			break
		}
		c := Case{Name: tc.name}
		conn, err := dialRaw(e.ctx, e.t.Addr, "")
		if err != nil {
			return err
		}
		if err := conn.handshake(handshakeTimeout); err != nil {
			conn.Close()
			return fmt.Errorf("handshake: %w", err)
		}
		id := uint32(2*i + 3)
		start := time.Now()
		type result struct {
			a   answer
			err error
		}
		answered := make(chan result, 1)
		go func() {
			a, err := conn.readAnswer(id, bigLimit)
			answered <- result{a, err}
		}()
		spec := callSpec{id: id, ttl: bigLimit, service: Service, scheme: tc.scheme, method: MethodEcho, arg2: tc.arg2, arg3: tc.arg3}
		werr := spec.frames(func(f []byte, _ bool) error {
			conn.SetWriteDeadline(time.Now().Add(bigWriteLimit))
			_, err := conn.Write(f)
			return err
		})
		res := <-answered // bounded by readAnswer's limit
		c.After = millis.Duration(time.Since(start))
		switch {
		case errors.Is(res.err, errClosed):
			c.Closed = true
		case res.err != nil:
			c.Note = "no answer: " + res.err.Error()
		default:
			c.Answer = res.a.String()
			if res.a.errMsg == "" {
				c.Answer += fmt.Sprintf(", arg2 of %s MiB echoed", mb(int64(len(res.a.args[1]))))
			}
		}
		if werr != nil {
			c.Note = joinNote(c.Note, "writing stopped: "+werr.Error())
		}
		conn.Close()
		e.survived(&c, deathWait)
		if c.Survived {
			next := oneCall(e.ctx, e.t.Addr, []byte("after "+tc.name), e.p.deadline)
			c.Next = &next
		}
		e.r.Cases = append(e.r.Cases, c)
	}
	e.peaks(s)
	e.after()
	e.r.caseFigures()
	return nil
}

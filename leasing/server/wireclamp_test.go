package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/leasing/internal/wirenum"
)

// A hostile parent's lease terms are clamped before they become state:
// a refresh interval of 9223372037 s (which times time.Second overflows
// into a negative Duration, and made the refresh loop ask again at once,
// thousands of times a second) sets the next round wirenum.MaxSeconds/2
// away; an expiry of math.MaxInt64 lasts no longer than any lease; a
// refresh interval of 0 or less is taken as 1 s.
func TestHostileParentTermsAreClamped(t *testing.T) {
	for _, c := range []struct {
		name            string
		expiry, refresh int64 // from now
		wantNext        time.Duration
		wantExpiry      int64 // from now
	}{
		{"huge refresh interval", 20, 9223372037, wirenum.MaxSeconds * time.Second / 2, 20},
		{"largest refresh interval", 20, 1<<63 - 1, wirenum.MaxSeconds * time.Second / 2, 20},
		{"negative refresh interval", 20, -5, 500 * time.Millisecond, 20},
		{"endless expiry", 1<<62 - 1, 10, 5 * time.Second, wirenum.MaxSeconds},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, s, d, clk := drivenIntermediateWithResource(t)
			now := clk.Now().Unix()
			done := make(chan time.Time)
			go func() { done <- d.Tick(context.Background()) }()
			testwait.Recv(t, root.reqs, "the round's request")
			ans := originalAnswer(100, now+c.expiry, 10, 5)
			ans.Response[0].Gets.RefreshInterval = proto.Int64(c.refresh)
			root.answer <- ans
			next := testwait.Recv(t, done, "the round to end")
			if got := next.Sub(clk.Now()); got != c.wantNext {
				t.Fatalf("the next round is %v away, want %v", got, c.wantNext)
			}
			if _, e, _ := s.ParentLease("r"); e.Unix() != now+c.wantExpiry {
				t.Fatalf("the parent's lease ends %d s from now, want %d", e.Unix()-now, c.wantExpiry)
			}
			// What the intermediate says it has, in its next request,
			// carries the clamped terms too.
			go func() { done <- d.Tick(context.Background()) }()
			req := testwait.Recv(t, root.reqs, "the next round's request")
			has := req.Resource[0].GetHas()
			if has.GetRefreshInterval() < 1 || has.GetRefreshInterval() > wirenum.MaxSeconds || has.GetExpiryTime() > now+wirenum.MaxSeconds {
				t.Fatalf("the intermediate says it has %v", has)
			}
			root.answer <- originalAnswer(100, now+20, 10, 5)
			testwait.Recv(t, done, "the next round to end")
		})
	}
}

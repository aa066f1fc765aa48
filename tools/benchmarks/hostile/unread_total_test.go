package hostile

import "testing"

// maxUnreadTotalRSS is what the server may hold at the peak of the full
// size "unread-total": 12 connections that never read and 20 that
// trickle held 1.34 GB and 2.44 GB before answers were bounded server-wide.
const maxUnreadTotalRSS = 600 << 20

// checkUnreadTotal: the side client is served throughout, and at full
// size the server's peak stays within maxUnreadTotalRSS.
func checkUnreadTotal(t *testing.T, r *Result) {
	checkSideServed(t, r)
	if r.Size == Full && r.Server.RSSPeak > maxUnreadTotalRSS {
		t.Errorf("the server's peak RSS was %s MiB, over %s MiB: answers waiting to be written must be bounded over the server",
			mb(r.Server.RSSPeak), mb(maxUnreadTotalRSS))
	}
}

package hostile

import (
	"strconv"
	"strings"
	"testing"
)

// bigAnswersRSSLimit is the most resident memory, in MiB, a client may
// reach under big-answers-client: the 1 GB at full size (2.68 GB
// of answers in flight; 5.2 GB without a bound), 800 MiB at CI size (640
// MB; 1.1 GB without). The client's live responses are bounded by its
// default response budget (256 MiB, channel.WithResponseBudget); its
// resident memory is about two to three times that, as the collector lets
// the heap grow to twice what was live at the last collection and the
// responses it refused or returned are garbage until the next.
func bigAnswersRSSLimit(s Size) float64 {
	if s == CI {
		return 800
	}
	return 1000
}

// checkBigAnswers: the client survives answers far larger in all than
// its response budget, and its memory stays within bigAnswersRSSLimit.
func checkBigAnswers(t *testing.T, r *Result) {
	if len(r.Cases) == 0 {
		t.Fatal("no client was run")
	}
	for _, c := range r.Cases {
		if !c.Survived {
			t.Errorf("%s: the client did not survive (exit %d): %s %s", c.Name, c.Exit, c.Crash, c.Note)
		}
		if strings.HasPrefix(c.Note, "no report") {
			t.Errorf("%s: the client's report could not be read: %s", c.Name, c.Note)
		}
	}
	for _, f := range r.Figures {
		if f.Name != clientRSSFigure {
			continue
		}
		peak, err := strconv.ParseFloat(f.Value, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", f.Name, f.Value, err)
		}
		if limit := bigAnswersRSSLimit(r.Size); peak > limit {
			t.Errorf("the client's peak RSS was %.0f MiB, over %.0f MiB: the responses in flight are not bounded in total (channel.WithResponseBudget)", peak, limit)
		}
		return
	}
	t.Errorf("no %q figure", clientRSSFigure)
}

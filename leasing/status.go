package leasing

import (
	"bytes"
	"fmt"
	"net/http"
	"sort"
	"text/tabwriter"
	"time"
)

// ServeHTTP serves a plain-text status page listing every resource the
// server knows, its template and totals, and each client's wants and
// lease. The page is rendered in memory under the locks and written after
// they are released: a client that stops reading must not hold a
// resource's lock (the sweep would wait on it, and every request on the
// sweep).
func (s *Server) ServeHTTP(rw http.ResponseWriter, _ *http.Request) {
	var page bytes.Buffer
	s.renderStatus(&page)
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = rw.Write(page.Bytes())
}

func (s *Server) renderStatus(w *bytes.Buffer) {
	now := s.clock.Now()
	s.mu.RLock()
	addr := s.address
	rs := make([]*resourceState, 0, len(s.resources))
	for _, r := range s.resources {
		rs = append(rs, r)
	}
	s.mu.RUnlock()
	sort.Slice(rs, func(i, j int) bool { return rs[i].id < rs[j].id })

	fmt.Fprintf(w, "Doorman server %s (master), up %v, %d resources\n", addr, now.Sub(s.started).Truncate(time.Second), len(rs))
	for _, r := range rs {
		r.mu.Lock()
		fmt.Fprintf(w, "\nresource %q: ", r.id)
		if r.tmpl == nil {
			fmt.Fprintf(w, "no template (clients get what they ask for)\n")
		} else {
			fmt.Fprintf(w, "template %q, %v, capacity %g", r.tmpl.IdentifierGlob, r.tmpl.Algorithm.Kind, r.tmpl.Capacity)
			if now.Before(r.learningUntil) {
				fmt.Fprintf(w, ", learning mode for %v more", r.learningUntil.Sub(now).Truncate(time.Second))
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "  handed out %g, wanted %g, %d clients\n", r.sumHas, r.sumWants, len(r.clients))
		ids := make([]string, 0, len(r.clients))
		for id := range r.clients {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  client\twants\thas\tpriority\texpires in\tlast request")
		for _, id := range ids {
			c := r.clients[id]
			fmt.Fprintf(tw, "  %s\t%g\t%g\t%d\t%v\t%v ago\n", id, c.wants, c.has, c.priority,
				c.expiry.Sub(now).Truncate(time.Second), now.Sub(c.lastRequest).Truncate(time.Second))
		}
		tw.Flush()
		r.mu.Unlock()
	}
}

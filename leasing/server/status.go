package server

import (
	"bytes"
	"fmt"
	"net/http"
	"sort"
	"text/tabwriter"
	"time"
)

// The status page shows at most this many resources, and this many
// clients per resource (the first by id), so that rendering it stays
// cheap whatever the server holds.
const (
	statusMaxResources = 1000
	statusMaxClients   = 100
)

// ServeHTTP serves a plain-text status page: the server's counts and
// limits, and for the first 1,000 resources by id their template and
// totals and the first 100 clients' wants and leases. The page is rendered
// in memory, each resource under its own lock, and written after: a
// client that stops reading holds no lock.
func (s *Server) ServeHTTP(rw http.ResponseWriter, _ *http.Request) {
	var page bytes.Buffer
	s.renderStatus(&page)
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = rw.Write(page.Bytes())
}

func (s *Server) renderStatus(w *bytes.Buffer) {
	now := s.clock.Now()
	s.mu.Lock()
	addr := s.address
	s.mu.Unlock()
	rs := s.snapshot()
	sort.Slice(rs, func(i, j int) bool { return rs[i].id < rs[j].id })

	fmt.Fprintf(w, "Doorman server %s (master), up %v, %d resources\n", addr, now.Sub(s.started).Truncate(time.Second), len(rs))
	for _, l := range []*limit{&s.nResources, &s.nClients, &s.nLeases} {
		fmt.Fprintf(w, "  %s: %d of at most %d\n", l.what, l.n.Load(), l.max)
	}
	if len(rs) > statusMaxResources {
		fmt.Fprintf(w, "  (showing the first %d resources)\n", statusMaxResources)
		rs = rs[:statusMaxResources]
	}
	for _, r := range rs {
		// Copy under the lock, sort and print after.
		r.mu.Lock()
		tmpl, learningUntil := r.tmpl, r.learningUntil
		wants, _, has := r.tab.totals()
		clients := make([]slot, 0, len(r.leases))
		for _, i := range r.leases {
			clients = append(clients, r.tab.slots[i])
		}
		r.mu.Unlock()

		fmt.Fprintf(w, "\nresource %q: ", r.id)
		if tmpl == nil {
			fmt.Fprintf(w, "no template (clients get what they ask for)\n")
		} else {
			fmt.Fprintf(w, "template %q, %v, capacity %g", tmpl.IdentifierGlob, tmpl.Algorithm.Kind, tmpl.Capacity)
			if now.Before(learningUntil) {
				fmt.Fprintf(w, ", learning mode for %v more", learningUntil.Sub(now).Truncate(time.Second))
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "  handed out %g, wanted %g, %d clients\n", has, wants, len(clients))
		sort.Slice(clients, func(i, j int) bool { return clients[i].client < clients[j].client })
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  client\twants\thas\tsubclients\tpriority\texpires in\tlast request")
		for k := range clients {
			if k == statusMaxClients {
				fmt.Fprintf(tw, "  (and %d more)\n", len(clients)-k)
				break
			}
			c := &clients[k]
			fmt.Fprintf(tw, "  %s\t%g\t%g\t%g\t%d\t%v\t%v ago\n", c.client, c.wants, c.has, c.weight, c.priority,
				time.Unix(c.expiry, 0).Sub(now).Truncate(time.Second), now.Sub(time.Unix(0, c.lastRequest)).Truncate(time.Second))
		}
		tw.Flush()
	}
}

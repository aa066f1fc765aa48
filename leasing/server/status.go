package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Bounds of the status page, so that rendering it stays cheap whatever
// the server holds: it lists at most StatusMaxResources resources (the
// first by id), and pages each resource's clients (sorted by id), at most
// StatusMaxClients of each on one page when it lists every resource, at
// most StatusMaxClientsOne when it shows one.
const (
	StatusMaxResources  = 1000
	StatusMaxClients    = 100
	StatusMaxClientsOne = 1000
	// StatusMaxSources bounds the sources listed, those holding the most
	// clients.
	StatusMaxSources = 10
)

// Status is a snapshot of a server, as its status page shows it (JSON
// with ?format=json). Each resource is copied under its own lock, one
// after the other, so the totals of two resources may be a moment apart.
type Status struct {
	// Address is the address the server advertises.
	Address string `json:"address"`
	// Mastership says whether this server is the master of its node, and
	// who is.
	Mastership StatusMastership `json:"mastership"`
	// Parent is the server this one takes its capacities from; nil (left
	// out of the JSON) for a root, whose capacities come from its
	// configuration.
	Parent *StatusParent `json:"parent,omitempty"`
	// Started is when the server started; Now is when the snapshot was
	// taken.
	Started time.Time `json:"started"`
	Now     time.Time `json:"now"`
	// Templates is the number of templates in the configuration in force.
	Templates int `json:"templates"`
	// Resources, Clients and Leases are what the server holds against its
	// limits (configured resources may take Resources.Held beyond its
	// Max by their number: they are always created).
	Resources StatusLimit `json:"resources"`
	Clients   StatusLimit `json:"clients"`
	Leases    StatusLimit `json:"leases"`
	// Sources are the sources holding the most clients, at most
	// StatusMaxSources, the most first; SourcesTotal counts them all, a
	// source holding resources but no clients too (see the package doc:
	// full client, resource and lease tables are shared between
	// sources).
	Sources      []StatusSource `json:"sources"`
	SourcesTotal int            `json:"sources_total"`
	// Connections are the connections Serve holds against Config.MaxConns;
	// nil (left out of the JSON) for a server not started with Serve.
	Connections *StatusLimit `json:"connections,omitempty"`
	// Page and Limit are the page of each resource's clients shown (the
	// first page is 1) and its size.
	Page  int `json:"page"`
	Limit int `json:"limit"`
	// ResourceList holds the resources shown, by id: the first
	// StatusMaxResources, or the one asked for. Truncated says whether
	// some were left out.
	ResourceList []StatusResource `json:"resource_list"`
	Truncated    bool             `json:"truncated"`
}

// StatusMastership says who the master of a server's node is.
type StatusMastership struct {
	// IsMaster is whether this server is the master.
	IsMaster bool `json:"is_master"`
	// MasterAddress is the master's address ("" when unknown).
	MasterAddress string `json:"master_address"`
}

// StatusParent is the server a server lower in the tree takes its
// capacities from.
type StatusParent struct {
	// Address is the parent's configured address; Master the parent
	// node's master this server talks to now ("" before its first answer).
	Address string `json:"address"`
	Master  string `json:"master,omitempty"`
	// LastRefresh is when the parent last answered (null before the
	// first answer); LastError the last failed refresh's error ("" after
	// a success).
	LastRefresh *time.Time `json:"last_refresh,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	// Resources is how many resources the last answer leased.
	Resources int `json:"resources"`
}

// StatusLimit is a count the server holds against its limit.
type StatusLimit struct {
	Held int64 `json:"held"`
	Max  int64 `json:"max"`
}

// StatusSource is a source of requests and the clients it holds.
type StatusSource struct {
	// Source is the remote IP address (an IPv6 source is a /64 prefix), or
	// "local" for requests with no peer address.
	Source  string `json:"source"`
	Clients int    `json:"clients"`
	// Resources and Leases are the resources the source created (but
	// configured ones, which belong to no source) and the leases its
	// clients hold.
	Resources int `json:"resources"`
	Leases    int `json:"leases"`
}

// StatusLease is a lease: a capacity until an expiry.
type StatusLease struct {
	Capacity        float64   `json:"capacity"`
	Expiry          time.Time `json:"expiry"`
	RefreshInterval int64     `json:"refresh_interval"`
}

// StatusResource is one resource of a Status.
type StatusResource struct {
	ID string `json:"id"`
	// Template is the identifier_glob of the template the resource took;
	// "" when none matched (its clients get what they ask for).
	Template        string   `json:"template"`
	Description     string   `json:"description,omitempty"`
	Algorithm       string   `json:"algorithm,omitempty"`
	Capacity        float64  `json:"capacity"`
	SafeCapacity    *float64 `json:"safe_capacity,omitempty"`
	LeaseLength     int64    `json:"lease_length"`
	RefreshInterval int64    `json:"refresh_interval"`
	// Learning is whether the resource is in learning mode (handing
	// clients back what they say they have) until LearningUntil.
	Learning      bool       `json:"learning"`
	LearningUntil *time.Time `json:"learning_until,omitempty"`
	// Wants and Has are the sums of the clients' wants and leases;
	// Subclients counts the clients, those of servers lower in the tree
	// included.
	Wants      float64 `json:"wants"`
	Has        float64 `json:"has"`
	Subclients float64 `json:"subclients"`
	// ParentLease is the lease this server holds for the resource from
	// its parent; nil (left out) for a root.
	ParentLease *StatusLease `json:"parent_lease,omitempty"`
	// ClientsTotal is the number of clients; Clients the page of them
	// shown, by id.
	ClientsTotal int            `json:"clients_total"`
	Clients      []StatusClient `json:"clients"`
}

// StatusClient is one client's lease of a resource.
type StatusClient struct {
	ID          string    `json:"id"`
	Wants       float64   `json:"wants"`
	Has         float64   `json:"has"`
	Subclients  float64   `json:"subclients"`
	Priority    int64     `json:"priority"`
	Expiry      time.Time `json:"expiry"`
	LastRequest time.Time `json:"last_request"`
}

// StatusQuery selects what a Status shows.
type StatusQuery struct {
	// Resource, if not empty, is the one resource to show.
	Resource string
	// Page is the page of each resource's clients (1 is the first; 0
	// means 1), Limit its size (0 means StatusMaxClients; at most
	// StatusMaxClients, or StatusMaxClientsOne with Resource).
	Page, Limit int
}

// Validate reports the first thing wrong with q, naming the query
// parameter.
func (q *StatusQuery) Validate() error {
	maxLimit := StatusMaxClients
	if q.Resource != "" {
		maxLimit = StatusMaxClientsOne
	}
	if q.Page < 0 {
		return fmt.Errorf("page is %d, must be >= 1", q.Page)
	}
	if q.Limit < 0 || q.Limit > maxLimit {
		return fmt.Errorf("limit is %d, must be 1 to %d (1 to %d with resource=ID)", q.Limit, maxLimit, StatusMaxClientsOne)
	}
	return nil
}

// statusMastership says who the master is, for the status page. A single
// server is its own master.
func (s *Server) statusMastership() StatusMastership {
	m := s.Mastership()
	return StatusMastership{IsMaster: m.IsMaster, MasterAddress: m.Master}
}

// statusParent returns the server's parent, for the status page: nil for a
// root, whose capacities come from its configuration.
func (s *Server) statusParent() *StatusParent {
	p, ok := s.parentStatus()
	if !ok {
		return nil
	}
	sp := &StatusParent{Address: p.Parent, Master: p.Master, Resources: p.Resources}
	if !p.LastRefresh.IsZero() {
		t := p.LastRefresh
		sp.LastRefresh = &t
	}
	if p.LastError != nil {
		sp.LastError = p.LastError.Error()
	}
	return sp
}

// statusParentLease returns the lease held from the parent for r (r.mu
// held), for the status page: nil for a root, or before the parent's
// first answer.
func (s *Server) statusParentLease(r *resource) *StatusLease {
	capacity, expiry, refresh, ok := s.parentLeaseLocked(r)
	if !ok {
		return nil
	}
	return &StatusLease{Capacity: capacity, Expiry: expiry, RefreshInterval: refresh}
}

// Status returns a snapshot of the server for q, which must be valid (see
// StatusQuery.Validate).
func (s *Server) Status(q StatusQuery) *Status {
	if q.Page == 0 {
		q.Page = 1
	}
	if q.Limit == 0 {
		q.Limit = StatusMaxClients
	}
	now := s.clock.Now()
	st := &Status{
		Mastership: s.statusMastership(),
		Parent:     s.statusParent(),
		Started:    s.started,
		Now:        now,
		Resources:  StatusLimit{s.nResources.n.Load(), s.nResources.max},
		Clients:    StatusLimit{s.nClients.n.Load(), s.nClients.max},
		Leases:     StatusLimit{s.nLeases.n.Load(), s.nLeases.max},
		Page:       q.Page,
		Limit:      q.Limit,
	}
	s.mu.Lock()
	st.Address = s.address
	if l := s.listener; l != nil {
		st.Connections = &StatusLimit{int64(l.Len()), int64(l.MaxConns())}
	}
	s.mu.Unlock()
	st.Sources, st.SourcesTotal = s.topSources(StatusMaxSources)
	s.cfgMu.RLock()
	st.Templates = len(s.repo.Resources)
	s.cfgMu.RUnlock()

	var rs []*resource
	if q.Resource != "" {
		if r := s.lookup(q.Resource); r != nil {
			rs = append(rs, r)
		}
	} else {
		rs = s.snapshot()
		sort.Slice(rs, func(i, j int) bool { return rs[i].id < rs[j].id })
		if len(rs) > StatusMaxResources {
			rs, st.Truncated = rs[:StatusMaxResources], true
		}
	}
	st.ResourceList = make([]StatusResource, 0, len(rs))
	var clients []slot
	for _, r := range rs {
		// Copy under the lock; sort and page after.
		var rst StatusResource
		r.mu.Lock()
		if r.deleted {
			r.mu.Unlock()
			continue
		}
		tmpl, learningUntil := r.tmpl, r.learningUntil
		rst.Wants, rst.Subclients, rst.Has = r.tab.totals()
		rst.ParentLease = s.statusParentLease(r)
		clients = clients[:0]
		for _, i := range r.leases {
			clients = append(clients, r.tab.slots[i])
		}
		r.mu.Unlock()

		rst.ID = r.id
		rst.LeaseLength, rst.RefreshInterval = leaseParams(tmpl)
		if tmpl != nil {
			rst.Template, rst.Description = tmpl.IdentifierGlob, tmpl.Description
			rst.Algorithm, rst.Capacity = tmpl.Algorithm.Kind.String(), tmpl.Capacity
			if tmpl.SafeCapacity != nil {
				v := *tmpl.SafeCapacity
				rst.SafeCapacity = &v
			}
		}
		if now.Before(learningUntil) {
			until := learningUntil
			rst.Learning, rst.LearningUntil = true, &until
		}
		rst.ClientsTotal = len(clients)
		sort.Slice(clients, func(i, j int) bool { return clients[i].client < clients[j].client })
		from := min(len(clients), (q.Page-1)*q.Limit)
		to := min(len(clients), from+q.Limit)
		rst.Clients = make([]StatusClient, 0, to-from)
		for k := from; k < to; k++ {
			c := &clients[k]
			rst.Clients = append(rst.Clients, StatusClient{
				ID: c.client, Wants: c.wants, Has: c.has, Subclients: c.weight, Priority: c.priority,
				Expiry: time.Unix(c.expiry, 0), LastRequest: time.Unix(0, c.lastRequest),
			})
		}
		st.ResourceList = append(st.ResourceList, rst)
	}
	return st
}

// The status page's formats.
const (
	formatText = "text"
	formatHTML = "html"
	formatJSON = "json"
)

// ServeHTTP serves the status page (see Status): the server's address,
// mastership and parent, its counts and limits, and for each resource its
// template, capacity, learning mode, the sums of its clients' wants and
// leases, and a page of its clients.
//
// The format is ?format=text, html or json; without it, the first of
// application/json, text/html and text/plain that the Accept header
// names (a browser gets HTML); otherwise plain text. Query parameters:
// resource=ID shows that resource only; page=N (from 1) and limit=N page
// each resource's clients, sorted by id (limit at most 100, or 1,000 with
// resource). A bad parameter is answered 400 Bad Request, naming it.
//
// The page is rendered in memory, each resource under its own lock, and
// written after: a client that stops reading holds no lock.
func (s *Server) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	q, format, err := parseStatusRequest(req)
	if err != nil {
		http.Error(rw, "doorman status: "+err.Error(), http.StatusBadRequest)
		return
	}
	st := s.Status(q)
	var page bytes.Buffer
	switch format {
	case formatJSON:
		rw.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(&page)
		enc.SetIndent("", "  ")
		err = enc.Encode(st)
	case formatHTML:
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		err = statusHTML.Execute(&page, htmlStatus{st, q.Resource})
	default:
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		writeStatusText(&page, st)
	}
	if err != nil {
		http.Error(rw, "doorman status: "+err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = rw.Write(page.Bytes())
}

// parseStatusRequest reads the query and the format of a status request.
func parseStatusRequest(req *http.Request) (StatusQuery, string, error) {
	v := req.URL.Query()
	var q StatusQuery
	q.Resource = v.Get("resource")
	for _, p := range []struct {
		name string
		dst  *int
	}{{"page", &q.Page}, {"limit", &q.Limit}} {
		if s := v.Get(p.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return q, "", fmt.Errorf("%s is %q, must be a whole number >= 1", p.name, s)
			}
			*p.dst = n
		}
	}
	if err := q.Validate(); err != nil {
		return q, "", err
	}
	switch f := v.Get("format"); f {
	case formatText, formatHTML, formatJSON:
		return q, f, nil
	case "":
	default:
		return q, "", fmt.Errorf("format is %q, must be text, html or json", f)
	}
	for _, part := range strings.Split(req.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || params["q"] == "0" {
			continue
		}
		switch mt {
		case "application/json":
			return q, formatJSON, nil
		case "text/html":
			return q, formatHTML, nil
		case "text/plain":
			return q, formatText, nil
		}
	}
	return q, formatText, nil
}

// writeStatusText writes st as plain text.
func writeStatusText(w *bytes.Buffer, st *Status) {
	role := "master"
	if !st.Mastership.IsMaster {
		role = "not master, the master is " + strconv.Quote(st.Mastership.MasterAddress)
	}
	fmt.Fprintf(w, "Doorman server %s (%s), up %v, %d resources, %d templates\n", st.Address, role,
		st.Now.Sub(st.Started).Truncate(time.Second), st.Resources.Held, st.Templates)
	if st.Parent != nil {
		fmt.Fprintf(w, "  parent: %s", st.Parent.Address)
		if st.Parent.Master != "" && st.Parent.Master != st.Parent.Address {
			fmt.Fprintf(w, " (master %s)", st.Parent.Master)
		}
		if st.Parent.LastRefresh != nil {
			fmt.Fprintf(w, ", last answered %s with %d resources", st.Parent.LastRefresh.UTC().Format(time.RFC3339), st.Parent.Resources)
		}
		if st.Parent.LastError != "" {
			fmt.Fprintf(w, ", last error: %s", st.Parent.LastError)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintf(w, "  parent: none (a root: capacities from the configuration)\n")
	}
	for _, l := range []struct {
		what string
		l    StatusLimit
	}{{"resources", st.Resources}, {"clients", st.Clients}, {"leases", st.Leases}} {
		fmt.Fprintf(w, "  %s: %d of at most %d\n", l.what, l.l.Held, l.l.Max)
	}
	if len(st.Sources) > 0 {
		fmt.Fprintf(w, "  clients (resources, leases) by source (%d sources):", st.SourcesTotal)
		for _, src := range st.Sources {
			fmt.Fprintf(w, " %s %d (%d, %d)", src.Source, src.Clients, src.Resources, src.Leases)
		}
		if len(st.Sources) < st.SourcesTotal {
			fmt.Fprintf(w, " ...")
		}
		fmt.Fprintln(w)
	}
	if c := st.Connections; c != nil {
		fmt.Fprintf(w, "  connections: %d of at most %d\n", c.Held, c.Max)
	}
	if st.Truncated {
		fmt.Fprintf(w, "  (showing the first %d resources)\n", len(st.ResourceList))
	}
	for k := range st.ResourceList {
		r := &st.ResourceList[k]
		fmt.Fprintf(w, "\nresource %q: ", r.ID)
		if r.Template == "" {
			fmt.Fprintf(w, "no template (clients get what they ask for)\n")
		} else {
			fmt.Fprintf(w, "template %q, %s, capacity %g", r.Template, r.Algorithm, r.Capacity)
			if r.Learning {
				fmt.Fprintf(w, ", learning mode for %v more", r.LearningUntil.Sub(st.Now).Truncate(time.Second))
			}
			fmt.Fprintln(w)
		}
		if r.ParentLease != nil {
			fmt.Fprintf(w, "  leased from the parent: %g until %s\n", r.ParentLease.Capacity, r.ParentLease.Expiry.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(w, "  handed out %g, wanted %g, %d clients\n", r.Has, r.Wants, r.ClientsTotal)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  client\twants\thas\tsubclients\tpriority\texpires in\tlast request")
		for _, c := range r.Clients {
			fmt.Fprintf(tw, "  %s\t%g\t%g\t%g\t%d\t%v\t%v ago\n", c.ID, c.Wants, c.Has, c.Subclients, c.Priority,
				c.Expiry.Sub(st.Now).Truncate(time.Second), st.Now.Sub(c.LastRequest).Truncate(time.Second))
		}
		if from := (st.Page - 1) * st.Limit; from+len(r.Clients) < r.ClientsTotal {
			fmt.Fprintf(tw, "  (clients %d to %d of %d: page=%d for more)\n", from+1, from+len(r.Clients), r.ClientsTotal, st.Page+1)
		}
		tw.Flush()
	}
}

// htmlStatus is what the HTML template renders.
type htmlStatus struct {
	*Status
	Only string // the resource asked for, if any
}

// PageURL returns the query of page p of the clients.
func (h htmlStatus) PageURL(p int) string {
	v := url.Values{"format": {formatHTML}, "page": {strconv.Itoa(p)}, "limit": {strconv.Itoa(h.Limit)}}
	if h.Only != "" {
		v.Set("resource", h.Only)
	}
	return "?" + v.Encode()
}

// Prev and Next are the numbers of the pages before and after this one.
func (h htmlStatus) Prev() int { return h.Page - 1 }
func (h htmlStatus) Next() int { return h.Page + 1 }

// More reports whether r has clients after this page.
func (h htmlStatus) More(r *StatusResource) bool {
	return (h.Page-1)*h.Limit+len(r.Clients) < r.ClientsTotal
}

// Since returns how long before now t was, to the second.
func (h htmlStatus) Since(t time.Time) time.Duration { return h.Now.Sub(t).Truncate(time.Second) }

// Until returns how long after now t is, to the second.
func (h htmlStatus) Until(t time.Time) time.Duration { return t.Sub(h.Now).Truncate(time.Second) }

// statusHTML renders the status page; html/template escapes every id and
// description for its context (text, attribute or URL).
var statusHTML = template.Must(template.New("status").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Doorman server {{.Address}}</title>
<style>body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child,th:first-child{text-align:left}</style>
</head><body>
<h1>Doorman server {{.Address}}</h1>
<h2>Mastership</h2>
<p id="mastership">{{if .Mastership.IsMaster}}This server <strong>is</strong> the master.{{else}}This server is <strong>not</strong> the master; {{with .Mastership.MasterAddress}}the master is {{.}}{{else}}the master is unknown{{end}}.{{end}}</p>
<p id="parent">Parent: {{with .Parent}}{{.Address}}{{with .Master}} (master {{.}}){{end}}{{with .LastRefresh}}, last answered {{.UTC.Format "15:04:05"}}{{end}}{{with .LastError}}, last error: {{.}}{{end}}{{else}}none (a root: capacities come from the configuration){{end}}</p>
<h2>Server</h2>
<table>
<tr><th>started</th><td>{{.Started.UTC.Format "2006-01-02T15:04:05Z07:00"}} (up {{.Since .Started}})</td></tr>
<tr><th>templates</th><td>{{.Templates}}</td></tr>
<tr><th>resources</th><td>{{.Resources.Held}} of at most {{.Resources.Max}}</td></tr>
<tr><th>clients</th><td>{{.Clients.Held}} of at most {{.Clients.Max}}</td></tr>
<tr><th>leases</th><td>{{.Leases.Held}} of at most {{.Leases.Max}}</td></tr>
{{if .Sources}}<tr><th>clients (resources, leases) by source</th><td>{{range .Sources}}{{.Source}} {{.Clients}} ({{.Resources}}, {{.Leases}}); {{end}}({{.SourcesTotal}} sources)</td></tr>{{end}}
{{with .Connections}}<tr><th>connections</th><td>{{.Held}} of at most {{.Max}}</td></tr>{{end}}
</table>
<h2>Resources</h2>
{{if .Truncated}}<p>Showing the first {{len .ResourceList}} resources by id; <code>?resource=ID</code> shows any one.</p>{{end}}
{{if .ResourceList}}
<table id="resources">
<tr><th>resource</th><th>template</th><th>algorithm</th><th>capacity</th><th>wants</th><th>has</th><th>clients</th><th>learning</th></tr>
{{range .ResourceList}}<tr><td><a href="?format=html&amp;resource={{.ID}}">{{.ID}}</a></td><td>{{if .Template}}{{.Template}}{{else}}<em>none</em>{{end}}</td><td>{{.Algorithm}}</td><td>{{.Capacity}}</td><td>{{.Wants}}</td><td>{{.Has}}</td><td>{{.ClientsTotal}}</td><td>{{if .Learning}}until {{.LearningUntil.UTC.Format "15:04:05"}}{{else}}no{{end}}</td></tr>
{{end}}</table>
{{range .ResourceList}}
<h3>{{.ID}}</h3>
<p>{{with .Description}}{{.}}. {{end}}{{if .Template}}Template {{.Template}}, {{.Algorithm}}, capacity {{.Capacity}}{{with .SafeCapacity}}, safe capacity {{.}}{{end}}, leases of {{.LeaseLength}} s renewed every {{.RefreshInterval}} s{{else}}No template: clients get what they ask for{{end}}.
{{with .ParentLease}}Leased from the parent: {{.Capacity}} until {{.Expiry.UTC.Format "15:04:05"}}.{{end}}
Handed out {{.Has}} of {{.Wants}} wanted, {{.ClientsTotal}} clients.</p>
{{if .Clients}}<table class="clients">
<tr><th>client</th><th>wants</th><th>has</th><th>subclients</th><th>priority</th><th>expires in</th><th>last request</th></tr>
{{range .Clients}}<tr><td>{{.ID}}</td><td>{{.Wants}}</td><td>{{.Has}}</td><td>{{.Subclients}}</td><td>{{.Priority}}</td><td>{{$.Until .Expiry}}</td><td>{{$.Since .LastRequest}} ago</td></tr>
{{end}}</table>{{end}}
<p>{{if gt $.Page 1}}<a href="{{$.PageURL $.Prev}}">previous clients</a> {{end}}{{if $.More .}}<a href="{{$.PageURL $.Next}}">more clients</a>{{end}}</p>
{{end}}
{{else}}<p>No resources.</p>{{end}}
</body></html>
`))

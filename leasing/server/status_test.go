package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// getStatus fetches the status page at path+query from a real HTTP
// server serving s, with the Accept header accept (if not empty).
func getStatus(t *testing.T, hs *httptest.Server, query, accept string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest("GET", hs.URL+"/status"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	res, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header.Get("Content-Type"), string(body)
}

func serveStatus(t *testing.T, s *Server) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return hs
}

// statusAsk sends one GetCapacity of client for resource id.
func statusAsk(t *testing.T, s *Server, client, id string, wants float64, has *pb.Lease) {
	t.Helper()
	_, err := s.getCapacity(context.Background(), &pb.GetCapacityRequest{
		ClientId: proto.String(client),
		Resource: []*pb.ResourceRequest{{ResourceId: proto.String(id), Priority: proto.Int64(3), Wants: proto.Float64(wants), Has: has}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func statusRepo() *Repository {
	safe := 7.0
	return &Repository{Resources: []Template{
		{IdentifierGlob: "fair", Capacity: 100, SafeCapacity: &safe, Description: "fair <share>",
			Algorithm: Algorithm{Kind: FairShare, LeaseLength: 60, RefreshInterval: 15, LearningModeDuration: int64p(0)}},
		{IdentifierGlob: "learn", Capacity: 50,
			Algorithm: Algorithm{Kind: ProportionalShare, LeaseLength: 30, RefreshInterval: 10, LearningModeDuration: int64p(120)}},
		{IdentifierGlob: "*", Capacity: 10,
			Algorithm: Algorithm{Kind: Static, LeaseLength: 20, RefreshInterval: 5, LearningModeDuration: int64p(0)}},
	}}
}

// The JSON status page, over real HTTP, reports the server's counts,
// limits and mastership, and per resource its template, capacity,
// learning mode, sums and clients, from the server's real state.
func TestStatusJSON(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s, err := New(Config{Repository: statusRepo(), Clock: clk, Address: "10.0.0.1:7000", MaxClients: 50})
	if err != nil {
		t.Fatal(err)
	}
	statusAsk(t, s, "a", "fair", 80, nil)
	statusAsk(t, s, "b", "fair", 30, nil)
	clk.Add(2 * time.Second)
	statusAsk(t, s, "c", "learn", 5, &pb.Lease{Capacity: proto.Float64(4), ExpiryTime: proto.Int64(0), RefreshInterval: proto.Int64(1)})
	hs := serveStatus(t, s)

	code, ctype, body := getStatus(t, hs, "?format=json", "")
	if code != http.StatusOK || ctype != "application/json" {
		t.Fatalf("status %d, %q:\n%s", code, ctype, body)
	}
	var st Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("%v:\n%s", err, body)
	}
	if st.Address != "10.0.0.1:7000" || !st.Mastership.IsMaster || st.Mastership.MasterAddress != "10.0.0.1:7000" {
		t.Errorf("address %q, mastership %+v", st.Address, st.Mastership)
	}
	// A root has no parent: the field is left out, as is each resource's
	// parent lease.
	if strings.Contains(body, `"parent"`) || strings.Contains(body, `"parent_lease"`) || st.Parent != nil {
		t.Errorf("a root's status names a parent:\n%s", body)
	}
	if st.Resources != (StatusLimit{2, DefaultMaxResources}) || st.Clients != (StatusLimit{3, 50}) || st.Leases != (StatusLimit{3, DefaultMaxLeases}) {
		t.Errorf("limits: resources %+v clients %+v leases %+v", st.Resources, st.Clients, st.Leases)
	}
	if st.Templates != 3 || st.Page != 1 || st.Limit != StatusMaxClients || st.Truncated || !st.Started.Equal(testEpoch) {
		t.Errorf("templates %d page %d limit %d truncated %v started %v", st.Templates, st.Page, st.Limit, st.Truncated, st.Started)
	}
	if len(st.ResourceList) != 2 {
		t.Fatalf("%d resources, want 2:\n%s", len(st.ResourceList), body)
	}
	fair, learn := st.ResourceList[0], st.ResourceList[1]
	if fair.ID != "fair" || fair.Template != "fair" || fair.Algorithm != "FAIR_SHARE" || fair.Capacity != 100 ||
		fair.SafeCapacity == nil || *fair.SafeCapacity != 7 || fair.Description != "fair <share>" || fair.Learning ||
		fair.Wants != 110 || fair.Has != 100 || fair.Subclients != 2 || fair.ClientsTotal != 2 || fair.LeaseLength != 60 {
		t.Errorf("fair: %+v", fair)
	}
	if len(fair.Clients) != 2 || fair.Clients[0].ID != "a" || fair.Clients[0].Has != 80 || fair.Clients[0].Wants != 80 ||
		fair.Clients[1].ID != "b" || fair.Clients[1].Has != 20 || fair.Clients[0].Priority != 3 ||
		!fair.Clients[0].Expiry.Equal(testEpoch.Add(60*time.Second)) || !fair.Clients[0].LastRequest.Equal(testEpoch) {
		t.Errorf("fair's clients: %+v", fair.Clients)
	}
	if learn.ID != "learn" || !learn.Learning || learn.LearningUntil == nil || !learn.LearningUntil.Equal(testEpoch.Add(120*time.Second)) ||
		learn.Has != 4 || learn.Wants != 5 || learn.Algorithm != "PROPORTIONAL_SHARE" {
		t.Errorf("learn: %+v", learn)
	}

	// Accept: application/json asks for the same.
	if code, ctype, body := getStatus(t, hs, "", "text/plain;q=0, application/json"); code != http.StatusOK || ctype != "application/json" || !strings.Contains(body, `"id": "fair"`) {
		t.Errorf("Accept: application/json: %d %q\n%s", code, ctype, body)
	}
	// resource=ID shows that one only; an unknown one, none.
	var one Status
	_, _, body = getStatus(t, hs, "?format=json&resource=learn", "")
	if err := json.Unmarshal([]byte(body), &one); err != nil || len(one.ResourceList) != 1 || one.ResourceList[0].ID != "learn" {
		t.Errorf("resource=learn: %v\n%s", err, body)
	}
	_, _, body = getStatus(t, hs, "?format=json&resource=nope", "")
	if err := json.Unmarshal([]byte(body), &one); err != nil || len(one.ResourceList) != 0 {
		t.Errorf("resource=nope: %v\n%s", err, body)
	}
}

// page and limit page each resource's clients in id order; the page
// bounds are checked.
func TestStatusPagesClients(t *testing.T) {
	s := newTestServer(t, testConfig(FairShare, 100), clock.NewFake(testEpoch))
	for i := 0; i < 5; i++ {
		statusAsk(t, s, fmt.Sprintf("c%d", 4-i), "r", 1, nil) // arrive in reverse order
	}
	hs := serveStatus(t, s)
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"c0", "c1", "c2", "c3", "c4"}},
		{"&limit=2", []string{"c0", "c1"}},
		{"&limit=2&page=2", []string{"c2", "c3"}},
		{"&limit=2&page=3", []string{"c4"}},
		{"&limit=2&page=4", nil},
		{"&resource=r&limit=1000&page=1", []string{"c0", "c1", "c2", "c3", "c4"}},
	} {
		var st Status
		code, _, body := getStatus(t, hs, "?format=json"+tc.query, "")
		if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil || len(st.ResourceList) != 1 {
			t.Fatalf("%s: %d %v\n%s", tc.query, code, err, body)
		}
		var got []string
		for _, c := range st.ResourceList[0].Clients {
			got = append(got, c.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || st.ResourceList[0].ClientsTotal != 5 {
			t.Errorf("%s: clients %v of %d, want %v of 5", tc.query, got, st.ResourceList[0].ClientsTotal, tc.want)
		}
	}
	// The text page says where the rest are.
	if _, _, body := getStatus(t, hs, "?limit=2&page=2", ""); !strings.Contains(body, "(clients 3 to 4 of 5: page=3 for more)") {
		t.Errorf("text page 2:\n%s", body)
	}

	for _, tc := range []struct{ query, want string }{
		{"?page=0", `page is "0", must be a whole number >= 1`},
		{"?page=x", `page is "x", must be a whole number >= 1`},
		{"?limit=-1", `limit is "-1", must be a whole number >= 1`},
		{"?limit=101", "limit is 101, must be 1 to 100 (1 to 1000 with resource=ID)"},
		{"?resource=r&limit=1001", "limit is 1001, must be 1 to 1000"},
		{"?format=xml", `format is "xml", must be text, html or json`},
	} {
		code, _, body := getStatus(t, hs, tc.query, "")
		if code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q, want 400 with %q", tc.query, code, body, tc.want)
		}
	}
}

// The HTML page (asked for by a browser's Accept header, or
// ?format=html) shows the same state, every id escaped.
func TestStatusHTML(t *testing.T) {
	s, err := New(Config{Repository: statusRepo(), Clock: clock.NewFake(testEpoch), Address: "10.0.0.1:7000"})
	if err != nil {
		t.Fatal(err)
	}
	evil := `<script>alert("r")</script>`
	statusAsk(t, s, `"><img src=x>`, evil, 3, nil)
	statusAsk(t, s, "a", "fair", 80, nil)
	hs := serveStatus(t, s)

	code, ctype, body := getStatus(t, hs, "", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	if code != http.StatusOK || ctype != "text/html; charset=utf-8" {
		t.Fatalf("%d %q:\n%s", code, ctype, body)
	}
	for _, want := range []string{
		"This server <strong>is</strong> the master.",
		"Parent: none (a root: capacities come from the configuration)",
		"<tr><th>clients</th><td>2 of at most 100000</td></tr>",
		`<td><a href="?format=html&amp;resource=fair">fair</a></td><td>fair</td><td>FAIR_SHARE</td><td>100</td><td>80</td><td>80</td><td>1</td><td>no</td></tr>`,
		"fair &lt;share&gt;. Template fair, FAIR_SHARE, capacity 100, safe capacity 7, leases of 60 s renewed every 15 s",
		"<td>a</td><td>80</td><td>80</td><td>1</td><td>3</td><td>1m0s</td><td>0s ago</td>",
		"&lt;script&gt;alert(&#34;r&#34;)&lt;/script&gt;",
		`resource=%3cscript%3ealert%28%22r%22%29%3c%2fscript%3e`,
		"&#34;&gt;&lt;img src=x&gt;",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("HTML page lacks %q:\n%s", want, body)
		}
	}
	for _, bad := range []string{"<script>", "<img"} {
		if strings.Contains(body, bad) {
			t.Errorf("HTML page holds %q unescaped:\n%s", bad, body)
		}
	}
	// A page of clients links to the next.
	if _, _, body := getStatus(t, hs, "?format=html&limit=1&resource=fair", ""); strings.Contains(body, "more clients") {
		t.Errorf("a page with every client links to more:\n%s", body)
	}
	statusAsk(t, s, "b", "fair", 1, nil)
	if _, _, body := getStatus(t, hs, "?format=html&limit=1&resource=fair", ""); !strings.Contains(body, `<a href="?format=html&amp;limit=1&amp;page=2&amp;resource=fair">more clients</a>`) {
		t.Errorf("page 1 of 2 does not link to page 2:\n%s", body)
	}
}

// Without a format or an Accept header the page is plain text, as curl
// gets it; the status lists at most StatusMaxResources resources.
func TestStatusTextAndTruncation(t *testing.T) {
	s := newTestServer(t, &Repository{Resources: []Template{{IdentifierGlob: "*", Capacity: 1,
		Algorithm: Algorithm{Kind: Static, LeaseLength: 60, RefreshInterval: 15}}}}, clock.NewFake(testEpoch))
	for k := 0; k < 2; k++ {
		req := &pb.GetCapacityRequest{ClientId: proto.String("flood")}
		for i := 0; i < StatusMaxResources/2+1; i++ {
			req.Resource = append(req.Resource, &pb.ResourceRequest{ResourceId: proto.String(fmt.Sprintf("r%d-%04d", k, i)), Priority: proto.Int64(0), Wants: proto.Float64(1)})
		}
		if _, err := s.getCapacity(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	hs := serveStatus(t, s)
	code, ctype, body := getStatus(t, hs, "", "")
	if code != http.StatusOK || ctype != "text/plain; charset=utf-8" ||
		!containsAll(body, "(master)", "1002 resources", "parent: none", "(showing the first 1000 resources)", `resource "r0-0000"`) ||
		strings.Contains(body, `resource "r1-0500"`) {
		t.Errorf("%d %q:\n%.2000s", code, ctype, body)
	}
	st := s.Status(StatusQuery{})
	if !st.Truncated || len(st.ResourceList) != StatusMaxResources || st.Resources.Held != 1002 {
		t.Errorf("Status: truncated %v, %d resources of %d", st.Truncated, len(st.ResourceList), st.Resources.Held)
	}
}

// TestStatusShowsParentAndMastership: an intermediate's status names its
// parent, when it last answered and the lease held per resource; a server
// that lost an election shows who the master is.
func TestStatusShowsParentAndMastership(t *testing.T) {
	t.Parallel() // waits on real time (refreshes, timers, a child process): overlaps with the other waiting tests
	_, rootAddr := treeRoot(t, 300)
	mid, midAddr := treeIntermediate(t, rootAddr, "mid")
	c := newTreeClient(t, midAddr, "c", 40, 0)
	testwait.Until(t, "the client's lease through the intermediate", func() bool { return near(c.Has(), 40) })
	hs := serveStatus(t, mid)
	var st Status
	_, _, body := getStatus(t, hs, "?format=json", "")
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("status JSON: %v\n%s", err, body)
	}
	if p := st.Parent; p == nil || p.Address != rootAddr || p.LastRefresh == nil || p.LastError != "" || p.Resources != 1 {
		t.Fatalf("parent = %+v, want %s answered with 1 resource and no error", p, rootAddr)
	}
	if len(st.ResourceList) != 1 || st.ResourceList[0].ParentLease == nil || st.ResourceList[0].ParentLease.Capacity <= 0 {
		t.Fatalf("resources = %+v, want r with a lease from the parent", st.ResourceList)
	}
	if !st.Mastership.IsMaster {
		t.Errorf("mastership = %+v, want a master (no election)", st.Mastership)
	}
	_, _, text := getStatus(t, hs, "", "")
	if !strings.Contains(text, "parent: "+rootAddr) || !strings.Contains(text, "leased from the parent") {
		t.Errorf("text status lacks the parent or its lease:\n%s", text)
	}

	el := newFakeElection()
	s, err := New(Config{Repository: statusRepo(), Election: el})
	if err != nil {
		t.Fatal(err)
	}
	startServer(t, s, "")
	testwait.Recv(t, el.runs, "the election to run")
	el.tell(t, s, Mastership{Master: "10.0.0.7:6000"})
	st = Status{}
	_, _, body = getStatus(t, serveStatus(t, s), "?format=json", "")
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mastership.IsMaster || st.Mastership.MasterAddress != "10.0.0.7:6000" || st.Parent != nil {
		t.Fatalf("mastership = %+v, parent %+v; want not master, master 10.0.0.7:6000, no parent", st.Mastership, st.Parent)
	}
}

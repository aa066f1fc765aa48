package stats

// Metric names reported by the leasing package (the Doorman client and
// server), to the tally.Scope given in its configuration. Per-resource
// metrics carry the LeaseTagResource tag; the others are untagged.
const (
	// LeaseTagResource is the tag naming the Doorman resource a metric is
	// about. A server tags only resources named exactly by a template
	// (resource ids come from clients, and tagged scopes are never freed);
	// resources matched by a glob are not reported per resource.
	LeaseTagResource = "resource"

	// LeaseCapacity is a gauge tagged resource: the capacity a client may
	// use now (leasing's Resource.Capacity) or a server has handed out in
	// unexpired leases, for a resource.
	LeaseCapacity = "lease.capacity"
	// LeaseWants is a gauge tagged resource: the capacity wanted for a
	// resource (client: its own wants; server: the sum of its clients'
	// wants).
	LeaseWants = "lease.wants"
	// LeaseWaits is a counter tagged resource (client): calls that had to
	// wait on a rate or gauge resource before being admitted.
	LeaseWaits = "lease.waits"
	// LeaseRateLimited is a counter tagged resource (client): calls refused
	// because the wait for capacity would have passed their deadline.
	LeaseRateLimited = "lease.rate_limited"
	// LeaseClients is a gauge tagged resource (server): the number of
	// clients the server knows for a resource.
	LeaseClients = "lease.clients"
	// LeaseUnmatchedTemplate is a counter (server): resource requests for
	// which the server found no template and granted what was asked.
	LeaseUnmatchedTemplate = "lease.unmatched_template"
	// LeaseRequests is a counter: GetCapacity requests a client sent, or a
	// server answered.
	LeaseRequests = "lease.requests"
	// LeaseInvalidRequests is a counter (server): requests the server
	// rejected as invalid.
	LeaseInvalidRequests = "lease.invalid_requests"
	// LeaseRefreshErrors is a counter (client): failed refreshes
	// (GetCapacity or Discovery errors).
	LeaseRefreshErrors = "lease.refresh_errors"
	// LeaseExpired is a counter tagged resource (client): leases that
	// expired before they were renewed.
	LeaseExpired = "lease.expired"
)

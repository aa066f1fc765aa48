package stats

// Metric names reported by the leasing package (the Doorman client and
// server). Per-resource metrics carry the LeaseTagResource tag.
const (
	// LeaseTagResource is the tag naming the Doorman resource a metric is
	// about. A server tags only resources named exactly by a template
	// (resource ids come from clients, and tagged scopes are never freed);
	// resources matched by a glob are not reported per resource.
	LeaseTagResource = "resource"

	// LeaseCapacity is a gauge: the capacity currently held (client) or
	// handed out in unexpired leases (server) for a resource.
	LeaseCapacity = "lease.capacity"
	// LeaseWants is a gauge: the capacity wanted for a resource (client: its
	// own wants; server: the sum of its clients' wants).
	LeaseWants = "lease.wants"
	// LeaseWaits counts calls that had to wait on a rate or gauge resource
	// before being admitted.
	LeaseWaits = "lease.waits"
	// LeaseRateLimited counts calls refused because the wait for capacity
	// would have passed their deadline.
	LeaseRateLimited = "lease.rate_limited"
	// LeaseClients is a gauge: the number of clients a server knows for a
	// resource.
	LeaseClients = "lease.clients"
	// LeaseUnmatchedTemplate counts resource requests for which the server
	// found no template and granted what was asked.
	LeaseUnmatchedTemplate = "lease.unmatched_template"
	// LeaseRequests counts GetCapacity requests a server answered.
	LeaseRequests = "lease.requests"
	// LeaseInvalidRequests counts requests a server rejected as invalid.
	LeaseInvalidRequests = "lease.invalid_requests"
	// LeaseRefreshErrors counts failed client refreshes (GetCapacity or
	// Discovery errors).
	LeaseRefreshErrors = "lease.refresh_errors"
	// LeaseExpired counts leases that expired before they were renewed.
	LeaseExpired = "lease.expired"
)

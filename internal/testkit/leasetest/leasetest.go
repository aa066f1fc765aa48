// Package leasetest gives tests of Doorman servers real Sluice leasing
// clients, quick to renew and to retry, and the sum of what they hold:
// the quantity a server tree or a node of elected servers must keep
// within the capacity.
package leasetest

import (
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/leasing"
)

// Client is a leasing client holding one resource.
type Client struct {
	C *leasing.Client
	R *leasing.Resource
}

// NewClient starts a client of the server at addr, with id, leasing
// resource in pessimistic mode with wants, renewing no more often than
// minRefresh, retrying within a second. It closes (releasing its lease)
// when t ends.
func NewClient(t testing.TB, addr, id, resource string, wants float64, minRefresh time.Duration) *Client {
	t.Helper()
	c, err := leasing.NewClient(leasing.ClientConfig{Addr: addr, ID: id, MinRefreshInterval: minRefresh,
		Backoff:    backoff.Exponential{Initial: 100 * time.Millisecond, Max: 500 * time.Millisecond, Multiplier: 2, Jitter: backoff.EqualJitter},
		RPCTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r, err := c.Resource(resource, leasing.ResourceConfig{Wants: wants, Mode: leasing.Pessimistic})
	if err != nil {
		t.Fatal(err)
	}
	return &Client{c, r}
}

// Has returns the capacity of the client's unexpired lease, 0 without
// one.
func (c *Client) Has() float64 {
	capacity, _, ok := c.R.Lease()
	if !ok {
		return 0
	}
	return capacity
}

// Total is the capacity cs hold in unexpired leases now.
func Total(cs []*Client) float64 {
	var sum float64
	for _, c := range cs {
		sum += c.Has()
	}
	return sum
}

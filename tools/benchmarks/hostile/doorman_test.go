package hostile

import (
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/leasing/server"
)

// TestDoormanConfig checks that the Doorman servers' configuration
// parses, and says what the attacks assume of it: poisonResource is
// PROPORTIONAL_SHARE with poisonCapacity, leases of poisonLease renewed
// every poisonRefresh; kvResource is named exactly; every other resource
// takes the "*" template. Otherwise only the slow attacks would tell.
func TestDoormanConfig(t *testing.T) {
	r, err := server.ParseRepository([]byte(doormanConfig))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	p := r.Match(poisonResource)
	if p == nil || p.IdentifierGlob != poisonResource {
		t.Fatalf("%q takes template %+v, want its own", poisonResource, p)
	}
	a := p.Algorithm
	if a.Kind != server.ProportionalShare || p.Capacity != poisonCapacity ||
		time.Duration(a.LeaseLength)*time.Second != poisonLease || time.Duration(a.RefreshInterval)*time.Second != poisonRefresh {
		t.Errorf("%q: %s, capacity %v, lease %ds, refresh %ds; want %s, %d, %v, %v", poisonResource,
			a.Kind, p.Capacity, a.LeaseLength, a.RefreshInterval, server.ProportionalShare, poisonCapacity, poisonLease, poisonRefresh)
	}
	if k := r.Match(kvResource); k == nil || k.IdentifierGlob != kvResource {
		t.Errorf("%q takes template %+v, want one naming it", kvResource, k)
	}
	for _, id := range []string{doormanResource, "flood-0", "new-own-0"} {
		if m := r.Match(id); m == nil || m.IdentifierGlob != "*" {
			t.Errorf("%q takes template %+v, want \"*\"", id, m)
		}
	}
}

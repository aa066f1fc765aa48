package etcdelection_test

import "github.com/sluice-rpc/sluice/leasing/server"

// parentLease returns the capacity s holds of resource id from its
// parent, as its status shows it; false before the parent's first answer.
func parentLease(s *server.Server, id string) (float64, bool) {
	st := s.Status(server.StatusQuery{Resource: id})
	if len(st.ResourceList) != 1 || st.ResourceList[0].ParentLease == nil {
		return 0, false
	}
	return st.ResourceList[0].ParentLease.Capacity, true
}

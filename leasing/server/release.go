package server

import (
	"context"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// releaseCapacity forgets the caller's leases on the named resources, so
// that their capacity is at once available to other clients. Empty
// resource ids are ignored: the original client's Close sends one before
// the real ones (it builds the list with make([]string, n) and appends).
func (s *Server) releaseCapacity(_ context.Context, req *pb.ReleaseCapacityRequest) (*pb.ReleaseCapacityResponse, error) {
	if m := s.redirect(); m != nil {
		return &pb.ReleaseCapacityResponse{Mastership: m}, nil
	}
	if err := s.validateReleaseCapacity(req); err != nil {
		return nil, s.invalidArgument("ReleaseCapacity", err)
	}
	client, ids := req.GetClientId(), req.GetResourceId()
	s.epochMu.RLock()
	defer s.epochMu.RUnlock()
	if m := s.redirect(); m != nil {
		return &pb.ReleaseCapacityResponse{Mastership: m}, nil
	}
	s.reap(s.clock.Now(), reapPerRequest, false)
	for _, id := range ids {
		if id == "" {
			continue
		}
		r := s.lookup(id)
		if r == nil {
			continue
		}
		r.mu.Lock()
		if i, ok := r.leases[client]; ok && !r.deleted {
			s.removeLease(r, i)
			r.updateGauges()
		}
		r.mu.Unlock()
	}
	return &pb.ReleaseCapacityResponse{}, nil
}

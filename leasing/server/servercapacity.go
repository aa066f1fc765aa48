package server

import (
	"context"

	"google.golang.org/protobuf/proto"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// getServerCapacity grants or renews leases to a server lower in the tree
// on behalf of its clients. Each resource's priority bands are
// aggregated: the server counts as the sum of their num_clients
// subclients wanting the sum of their wants (priorities are ignored, as
// the built-in algorithms ignore them), and gets the algorithm's share for
// them. The response carries, per resource, the lease, the template's
// algorithm (so that the server hands out leases the same way) and the
// safe capacity per client.
//
// A server's own claim in has is taken as what it has handed out to its
// clients: while it claims more than its new grant (its clients still
// hold leases from the old one), the difference stays counted as held,
// so that the capacity is not granted to another server before the first
// has taken it back from its clients (the design's shortfall; see the
// package doc). The claim never counts for more than was granted before.
func (s *Server) getServerCapacity(ctx context.Context, req *pb.GetServerCapacityRequest) (*pb.GetServerCapacityResponse, error) {
	if m := s.redirect(); m != nil {
		return &pb.GetServerCapacityResponse{Mastership: m}, nil
	}
	ds, err := s.validateGetServerCapacity(req)
	if err != nil {
		return nil, s.invalidArgument("GetServerCapacity", err)
	}
	out, err := s.serve(ctx, "GetServerCapacity", req.GetServerId(), sourceOf(ctx), ds)
	if err != nil {
		s.slowRefusal(ctx, len(ds), err)
	}
	if err == errNotMaster {
		return &pb.GetServerCapacityResponse{Mastership: wireMastership(s.Mastership())}, nil
	}
	if err != nil {
		return nil, err
	}
	w := newWire(ds, out)
	resp := &pb.GetServerCapacityResponse{Response: make([]*pb.ServerCapacityResourceResponse, len(out))}
	for i, d := range out {
		resp.Response[i] = &pb.ServerCapacityResourceResponse{
			ResourceId:   &w.ids[i],
			Gets:         &w.leases[i],
			Algorithm:    wireAlgorithm(d.tmpl),
			SafeCapacity: w.safe(out, i),
		}
	}
	return resp, nil
}

// wireAlgorithm returns the algorithm of tmpl as sent on the wire; for
// resources no template matches, NO_ALGORITHM with the default lease.
func wireAlgorithm(tmpl *Template) *pb.Algorithm {
	if tmpl == nil {
		return &pb.Algorithm{
			Kind:            pb.Algorithm_NO_ALGORITHM.Enum(),
			LeaseLength:     proto.Int64(unmatchedLeaseLength),
			RefreshInterval: proto.Int64(unmatchedRefreshInterval),
		}
	}
	a := tmpl.Algorithm
	w := &pb.Algorithm{
		Kind:            pb.Algorithm_Kind(a.Kind).Enum(),
		LeaseLength:     proto.Int64(a.LeaseLength),
		RefreshInterval: proto.Int64(a.RefreshInterval),
	}
	if a.LearningModeDuration != nil {
		w.LearningModeDuration = proto.Int64(*a.LearningModeDuration)
	}
	for _, p := range a.Parameters {
		w.Parameters = append(w.Parameters, &pb.NamedParameter{Name: proto.String(p.Name), Value: proto.String(p.Value)})
	}
	return w
}

package server

import (
	"fmt"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/leasing/internal/wirenum"
)

func (s *Server) checkID(what, id string) error {
	if id == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if len(id) > s.maxID {
		return fmt.Errorf("%s is %d bytes long, longer than the limit of %d", what, len(id), s.maxID)
	}
	return nil
}

// checkResources checks the resource ids of a request: each valid, no
// more than the limit. (Duplicates are looked for after admission, which
// refuses a flood sooner: see checkDuplicates.)
func (s *Server) checkResources(n int, id func(int) string) error {
	if n > s.maxRes {
		return fmt.Errorf("request names %d resources, more than the limit of %d", n, s.maxRes)
	}
	for i := 0; i < n; i++ {
		if rid := id(i); rid == "" || len(rid) > s.maxID {
			return s.checkID(fmt.Sprintf("resource[%d].resource_id", i), rid)
		}
	}
	return nil
}

// checkDuplicates refuses a request naming a resource twice.
func checkDuplicates(ds []demand) error {
	if len(ds) < 2 {
		return nil
	}
	if len(ds) == 2 {
		if ds[0].id == ds[1].id {
			return fmt.Errorf("resource[1]: resource %q appears twice", ds[1].id)
		}
		return nil
	}
	seen := make(map[string]struct{}, len(ds))
	for i := range ds {
		if _, dup := seen[ds[i].id]; dup {
			return fmt.Errorf("resource[%d]: resource %q appears twice", i, ds[i].id)
		}
		seen[ds[i].id] = struct{}{}
	}
	return nil
}

func checkHas(i int, id string, has *pb.Lease) error {
	if has != nil {
		if c := has.GetCapacity(); !wirenum.FiniteNonNegative(c) {
			return fmt.Errorf("resource[%d] (%q): has.capacity is %v, must be a finite number >= 0", i, id, c)
		}
	}
	return nil
}

// validateGetCapacity checks the whole request before any state changes.
func (s *Server) validateGetCapacity(req *pb.GetCapacityRequest) error {
	if err := s.checkID("client_id", req.GetClientId()); err != nil {
		return err
	}
	rs := req.GetResource()
	if err := s.checkResources(len(rs), func(i int) string { return rs[i].GetResourceId() }); err != nil {
		return err
	}
	for i, r := range rs {
		if w := r.GetWants(); !wirenum.FiniteNonNegative(w) {
			return fmt.Errorf("resource[%d] (%q): wants is %v, must be a finite number >= 0", i, r.GetResourceId(), w)
		}
		if err := checkHas(i, r.GetResourceId(), r.Has); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) validateGetServerCapacity(req *pb.GetServerCapacityRequest) ([]demand, error) {
	if err := s.checkID("server_id", req.GetServerId()); err != nil {
		return nil, err
	}
	rs := req.GetResource()
	if err := s.checkResources(len(rs), func(i int) string { return rs[i].GetResourceId() }); err != nil {
		return nil, err
	}
	ds := make([]demand, len(rs))
	for i, r := range rs {
		id := r.GetResourceId()
		if err := checkHas(i, id, r.Has); err != nil {
			return nil, err
		}
		d := demand{id: id, has: r.Has, claim: clampWants(r.GetHas().GetCapacity()), server: true}
		var subclients int64
		for j, b := range r.GetWants() {
			if w := b.GetWants(); !wirenum.FiniteNonNegative(w) {
				return nil, fmt.Errorf("resource[%d] (%q): wants[%d].wants is %v, must be a finite number >= 0", i, id, j, w)
			}
			n := b.GetNumClients()
			if n < 1 || n > MaxSubclients {
				return nil, fmt.Errorf("resource[%d] (%q): wants[%d].num_clients is %d, must be >= 1 and <= %d", i, id, j, n, MaxSubclients)
			}
			subclients += n
			if subclients > MaxSubclients {
				return nil, fmt.Errorf("resource[%d] (%q): the bands' num_clients add up to more than %d", i, id, MaxSubclients)
			}
			d.wants += clampWants(b.GetWants())
			if j == 0 || b.GetPriority() > d.priority {
				d.priority = b.GetPriority()
			}
		}
		d.wants = clampWants(d.wants)
		// A server with no bands has no clients yet: it counts as one
		// wanting nothing (the original's intermediate asks so).
		d.weight = float64(max(subclients, 1))
		ds[i] = d
	}
	return ds, nil
}

// validateReleaseCapacity checks a release: a valid client id, no more
// resources than the limit, none of them too long (empty ones are
// ignored; see ReleaseCapacity).
func (s *Server) validateReleaseCapacity(req *pb.ReleaseCapacityRequest) error {
	if err := s.checkID("client_id", req.GetClientId()); err != nil {
		return err
	}
	ids := req.GetResourceId()
	if n := len(ids); n > s.maxRes {
		return fmt.Errorf("request names %d resources, more than the limit of %d", n, s.maxRes)
	}
	for i, id := range ids {
		if len(id) > s.maxID {
			return fmt.Errorf("resource_id[%d] is %d bytes long, longer than the limit of %d", i, len(id), s.maxID)
		}
	}
	return nil
}

// invalidArgument counts an invalid request and returns its answer:
// codes.InvalidArgument, naming the RPC and what is wrong.
func (s *Server) invalidArgument(rpc string, err error) error {
	s.invalid.Inc(1)
	s.clientLog.Warn("doorman server: refused an invalid request", slog.String("rpc", rpc), slog.Any("error", err))
	return status.Errorf(codes.InvalidArgument, "doorman server: %s: %v", rpc, err)
}

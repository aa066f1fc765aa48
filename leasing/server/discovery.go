package server

import (
	"context"
	"errors"

	"google.golang.org/protobuf/proto"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// discovery tells the caller who the master is: this server (is_master
// true, with its address) or another (is_master false, with the master's
// address, or none while no master is known).
func (s *Server) discovery(context.Context, *pb.DiscoveryRequest) (*pb.DiscoveryResponse, error) {
	m := s.Mastership()
	if m.IsMaster {
		s.mu.Lock()
		addr := s.address
		s.mu.Unlock()
		return &pb.DiscoveryResponse{Mastership: &pb.Mastership{MasterAddress: proto.String(addr)}, IsMaster: proto.Bool(true)}, nil
	}
	return &pb.DiscoveryResponse{Mastership: wireMastership(m), IsMaster: proto.Bool(false)}, nil
}

// errNotMaster is serve's answer when the server is not the master.
var errNotMaster = errors.New("server: not the master")

// wireMastership is the mastership field of a non-master's answers: the
// master's address, absent when unknown.
func wireMastership(m Mastership) *pb.Mastership {
	if m.Master == "" {
		return &pb.Mastership{}
	}
	return &pb.Mastership{MasterAddress: proto.String(m.Master)}
}

// redirect returns the mastership field to answer with when the server is
// not the master, or nil.
func (s *Server) redirect() *pb.Mastership {
	if m := s.ms.Load(); m != nil && !m.IsMaster {
		return wireMastership(*m)
	}
	return nil
}

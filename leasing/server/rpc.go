package server

import (
	"context"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// capacityServer is a Server as gRPC's pb.CapacityServer: the Doorman
// RPCs, which Register and Serve serve, kept off the Server's own method
// set (the simulators reach them through internal/serverhook.Capacity).
type capacityServer struct {
	pb.UnimplementedCapacityServer
	s *Server
}

func (c capacityServer) Discovery(ctx context.Context, req *pb.DiscoveryRequest) (*pb.DiscoveryResponse, error) {
	return c.s.discovery(ctx, req)
}

func (c capacityServer) GetCapacity(ctx context.Context, req *pb.GetCapacityRequest) (*pb.GetCapacityResponse, error) {
	return c.s.getCapacity(ctx, req)
}

func (c capacityServer) GetServerCapacity(ctx context.Context, req *pb.GetServerCapacityRequest) (*pb.GetServerCapacityResponse, error) {
	return c.s.getServerCapacity(ctx, req)
}

func (c capacityServer) ReleaseCapacity(ctx context.Context, req *pb.ReleaseCapacityRequest) (*pb.ReleaseCapacityResponse, error) {
	return c.s.releaseCapacity(ctx, req)
}

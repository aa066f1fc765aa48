package server_test

import (
	"context"
	"fmt"
	"log"
	"net"

	"github.com/sluice-rpc/sluice/leasing"
	"github.com/sluice-rpc/sluice/leasing/server"
)

// A server with one FAIR_SHARE template of capacity 100 for every db-
// resource, and Sluice's client asking it for 30.
func Example() {
	repo, err := server.ParseRepository([]byte(`
resources:
- identifier_glob: "db-*"
  capacity: 100
  algorithm:
    kind: FAIR_SHARE
    lease_length: 60
    refresh_interval: 15
    learning_mode_duration: 0
`))
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New(server.Config{Repository: repo, MaxResources: 1000})
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	defer func() { srv.Stop(); <-done }()

	client, err := leasing.NewClient(leasing.ClientConfig{Addr: lis.Addr().String(), ID: "example", ManualRefresh: true})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	res, err := client.Resource("db-users", leasing.ResourceConfig{Wants: 30, Mode: leasing.Pessimistic})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Refresh(context.Background()); err != nil {
		log.Fatal(err)
	}
	resources, clients, leases := srv.Counts()
	fmt.Println("capacity:", res.Capacity())
	fmt.Println("server holds:", resources, "resource,", clients, "client,", leases, "lease")
	// Output:
	// capacity: 30
	// server holds: 1 resource, 1 client, 1 lease
}

// Allocate is the division the server makes, without leases: capacity 120
// between three clients wanting 1000, 50 and 10. STATIC's capacity is a
// per-client ceiling; the sharing algorithms hand out the whole of it.
func ExampleAllocate() {
	wants := []float64{1000, 50, 10}
	gets := make([]float64, len(wants))
	for _, kind := range []server.Kind{server.NoAlgorithm, server.Static, server.ProportionalShare, server.FairShare} {
		server.Allocate(kind, 120, wants, gets)
		fmt.Printf("%-18s %.2f\n", kind, gets)
	}
	// Output:
	// NO_ALGORITHM       [1000.00 50.00 10.00]
	// STATIC             [120.00 50.00 10.00]
	// PROPORTIONAL_SHARE [69.69 40.31 10.00]
	// FAIR_SHARE         [60.00 50.00 10.00]
}

// A configuration in the original Doorman's shapes: kind by number, a
// lease of 5 seconds.
func ExampleParseRepository() {
	repo, err := server.ParseRepository([]byte(`
resources:
- identifier_glob: "*"
  capacity: 50
  algorithm: {kind: 2, lease_length: 5, refresh_interval: 5}
`))
	if err != nil {
		log.Fatal(err)
	}
	t := repo.Match("anything")
	fmt.Println(t.Algorithm.Kind, t.Algorithm.LeaseLength, t.LearningDuration())
	// Output:
	// PROPORTIONAL_SHARE 5 5s
}

package leasing_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/sluice-rpc/sluice/leasing"
	"github.com/sluice-rpc/sluice/leasing/server"
)

func Example() {
	// A Doorman server with one FAIR_SHARE resource of capacity 100.
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
	srv, err := server.New(server.Config{Repository: repo})
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

	// A client asking for 30 calls per second to "db-users".
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
	fmt.Println("capacity:", res.Capacity())

	// Every call first waits for the leased rate.
	limiter := leasing.NewRateLimiter(res)
	if err := limiter.Wait(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("admitted")
	// Output:
	// capacity: 30
	// admitted
}

// fixed is a CapacitySource that never changes: a stand-in for a
// *leasing.Resource in examples and tests.
type fixed float64

func (f fixed) Capacity() float64        { return float64(f) }
func (f fixed) Changed() <-chan struct{} { return nil }

// A Gauge bounds concurrent holders by a capacity: here 2.
func ExampleGauge() {
	g := leasing.NewGauge(fixed(2))
	fmt.Println(g.TryAcquire(), g.TryAcquire(), g.TryAcquire(), g.InUse())
	g.Release()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fmt.Println(g.Acquire(ctx), g.InUse()) // a slot is free again: no wait
	// Output:
	// true true false 2
	// <nil> 2
}

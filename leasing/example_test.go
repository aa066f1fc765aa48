package leasing_test

import (
	"context"
	"fmt"
	"log"
	"net"

	"github.com/sluice-rpc/sluice/leasing"
)

func Example() {
	// A Doorman server with one FAIR_SHARE resource of capacity 100.
	cfg, err := leasing.ParseConfig([]byte(`
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
	server, err := leasing.NewServer(leasing.ServerConfig{Config: cfg})
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); server.Serve(lis) }()
	defer func() { server.Stop(); <-done }()

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

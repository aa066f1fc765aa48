package etcdelection_test

import (
	"log"
	"net"

	"github.com/sluice-rpc/sluice/leasing/server"
	"github.com/sluice-rpc/sluice/leasing/server/etcdelection"
)

// Three such processes, each with its own address, form one Doorman
// node: one is the master, the others send clients to it.
func Example() {
	el, err := etcdelection.New(etcdelection.Config{
		Endpoints: []string{"http://10.0.0.9:2379"},
		Key:       "/doorman/root",
		// A master cut off from etcd stops serving within 3 s.
		TTL: etcdelection.DefaultTTL,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer el.Close()
	repo, err := server.LoadRepository("doorman.yaml")
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New(server.Config{
		Repository: repo,
		Election:   el,
		Address:    "10.0.0.1:6000", // where the others send clients
		OnMastership: func(m server.Mastership) {
			log.Printf("master: %v, the master is %q", m.IsMaster, m.Master)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", ":6000")
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()
	log.Fatal(srv.Serve(lis))
}

package server_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-rpc/sluice/leasing/server"
)

// A server whose configuration file is reloaded while it runs: a bad new
// configuration is refused whole and the one in force stays.
func ExampleWatchFile() {
	dir, err := os.MkdirTemp("", "doorman-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "doorman.yaml")
	conf := func(capacity int) []byte {
		return []byte(fmt.Sprintf("resources:\n- identifier_glob: kv\n  capacity: %d\n"+
			"  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15}\n", capacity))
	}
	if err := os.WriteFile(file, conf(100), 0o600); err != nil {
		log.Fatal(err)
	}
	repo, err := server.LoadRepository(file)
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New(server.Config{Repository: repo})
	if err != nil {
		log.Fatal(err)
	}
	// Each configuration applied or refused is logged on slog.Default()
	// (ReloadConfig.Logger sets another logger).
	r := server.NewReloader(srv, server.ReloadConfig{})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- server.WatchFile(ctx, file, time.Second, r) }()
	defer func() { cancel(); <-done }()

	// What WatchFile does with each new content it reads:
	fmt.Println(r.Apply(conf(-1), file) != nil)
	fmt.Println(r.Apply(conf(50), file))
	// Output:
	// true
	// <nil>
}

// The status page in JSON, as ?format=json or Accept: application/json
// ask for it.
func ExampleServer_ServeHTTP() {
	repo, err := server.ParseRepository([]byte("resources:\n- identifier_glob: kv\n  capacity: 10\n" +
		"  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15}\n"))
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New(server.Config{Repository: repo, Address: "10.0.0.1:6000"})
	if err != nil {
		log.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("GET", "/status?format=json", nil))
	fmt.Println(rec.Header().Get("Content-Type"))
	st := srv.Status(server.StatusQuery{})
	fmt.Println(st.Address, st.Mastership.IsMaster, st.Templates, st.Resources.Max)
	// Output:
	// application/json
	// 10.0.0.1:6000 true 1 100000
}

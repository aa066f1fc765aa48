package prometheus_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/prometheus"
)

// A client's metrics in Prometheus: one call to New, the scope to the
// Channel, the handler at /metrics (here an httptest server; in a service,
// http.Handle("/metrics", m.Handler())).
func Example() {
	m, err := prometheus.New(prometheus.Options{})
	if err != nil {
		log.Fatal(err)
	}
	web := httptest.NewServer(m.Handler())
	defer web.Close()

	srv, err := channel.New("keyvalue")
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	srv.RegisterRaw("get", func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
		return &channel.RawResponse{Arg3: []byte("value")}, nil
	})
	if err := srv.ListenAndServe("127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}

	ch, err := channel.New("kv-client", channel.WithScope(m.Scope()))
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()
	kv, err := ch.NewClient("keyvalue", channel.WithMethods("get"))
	if err != nil {
		log.Fatal(err)
	}
	kv.AddPeer(srv.HostPort())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := kv.CallRaw(ctx, "get", nil, []byte("a")); err != nil {
		log.Fatal(err)
	}
	m.Close() // report now rather than within a second

	res, err := web.Client().Get(web.URL)
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "call_latency_count") {
			fmt.Println(line)
		}
	}
	// Output: call_latency_count{method="get",service="keyvalue"} 1
}

package thrift_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/sluice-rpc/sluice/thrift"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	tthrift "github.com/uber/tchannel-go/thrift"
)

// store is a handler for tchannel-go's generated KeyValue service.
type store struct{ vals map[string]string }

func (s *store) Get(ctx tthrift.Context, key string) (string, error) {
	if v, ok := s.vals[key]; ok {
		return v, nil
	}
	return "", &keyvalue.KeyNotFound{Key: key}
}

func (s *store) Set(ctx tthrift.Context, key, value string) error {
	s.vals[key] = value
	return nil
}

func (s *store) HealthCheck(ctx tthrift.Context) (string, error) { return "OK", nil }

// A generated Thrift server and client, unchanged, on Sluice channels: the
// client's calls choose a peer and honour busy throttling by themselves, and
// a declared exception comes back as its generated type.
func Example() {
	server, err := channel.New("keyvalue")
	if err != nil {
		panic(err)
	}
	defer server.Close()
	thrift.NewServer(server).Register(keyvalue.NewTChanKeyValueServer(&store{vals: map[string]string{"a": "apple"}}))
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		panic(err)
	}

	client, err := channel.New("keyvalue-client")
	if err != nil {
		panic(err)
	}
	defer client.Close()
	if err := client.AddPeer("keyvalue", server.HostPort()); err != nil {
		panic(err)
	}
	kv := keyvalue.NewTChanKeyValueClient(thrift.NewClient(client, "keyvalue"))

	c, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ctx := tthrift.Wrap(c)
	v, err := kv.Get(ctx, "a")
	fmt.Println(v, err)
	_, err = kv.Get(ctx, "b")
	var nf *keyvalue.KeyNotFound
	fmt.Println(errors.As(err, &nf), nf.Key)
	// Output:
	// apple <nil>
	// true b
}

// flaky answers Busy to the first attempt of each call and serves its
// retries, reporting which attempt it served.
type flaky struct{ store }

func (f *flaky) HealthCheck(ctx tthrift.Context) (string, error) {
	n := thrift.PreviousAttempts(ctx)
	if n == 0 {
		return "", channel.BusyAfter(time.Millisecond, "warming up")
	}
	return fmt.Sprintf("OK on attempt %d", n+1), nil
}

// A handler reads the attempt number of a retried call with
// PreviousAttempts; a client whose service config retries BUSY sends the
// retry after the server's pushback, carrying previous-rpc-attempts.
func ExamplePreviousAttempts() {
	server, err := channel.New("keyvalue")
	if err != nil {
		panic(err)
	}
	defer server.Close()
	thrift.NewServer(server).Register(keyvalue.NewTChanKeyValueServer(&flaky{store{vals: map[string]string{}}}))
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		panic(err)
	}

	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig": [{"name": [{"service": "keyvalue"}],
	  "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
	    "backoffMultiplier": 2, "retryableStatusCodes": ["BUSY"]}}]}`))
	if err != nil {
		panic(err)
	}
	client, err := channel.New("keyvalue-client", channel.WithServiceConfig(cfg))
	if err != nil {
		panic(err)
	}
	defer client.Close()
	if err := client.AddPeer("keyvalue", server.HostPort()); err != nil {
		panic(err)
	}
	kv := keyvalue.NewTChanKeyValueClient(thrift.NewClient(client, "keyvalue"))

	c, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fmt.Println(kv.HealthCheck(tthrift.Wrap(c)))
	// Output: OK on attempt 2 <nil>
}

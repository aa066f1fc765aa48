package thrift_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/sluice-rpc/sluice/thrift"
	"github.com/uber/tchannel-go"
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
	kvc, err := client.NewClient("keyvalue", channel.WithMethods("KeyValue::Get", "KeyValue::Set"))
	if err != nil {
		panic(err)
	}
	if err := kvc.AddPeer(server.HostPort()); err != nil {
		panic(err)
	}
	kv := keyvalue.NewTChanKeyValueClient(thrift.NewClient(kvc))

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
	kvc, err := client.NewClient("keyvalue", channel.WithMethods("KeyValue::Get", "KeyValue::Set"))
	if err != nil {
		panic(err)
	}
	if err := kvc.AddPeer(server.HostPort()); err != nil {
		panic(err)
	}
	kv := keyvalue.NewTChanKeyValueClient(thrift.NewClient(kvc))

	c, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fmt.Println(kv.HealthCheck(tthrift.Wrap(c)))
	// Output: OK on attempt 2 <nil>
}

// sharded answers Busy to the first attempt of each call and serves its
// retries, saying which shard key (TChannel's "sk" transport header) the
// call carried.
type sharded struct{ store }

func (s *sharded) HealthCheck(ctx tthrift.Context) (string, error) {
	if thrift.PreviousAttempts(ctx) == 0 {
		return "", channel.BusyAfter(time.Millisecond, "warming up")
	}
	return "OK for shard " + tchannel.CurrentCall(ctx).ShardKey(), nil
}

// WithCallOptions gives a generated client's call Sluice's call options:
// here a shard key, and channel.ReportCallInfo, which tells the attempts
// the call made and the peer that answered, which the generated method's
// results do not.
func ExampleWithCallOptions() {
	server, err := channel.New("keyvalue")
	if err != nil {
		panic(err)
	}
	defer server.Close()
	thrift.NewServer(server).Register(keyvalue.NewTChanKeyValueServer(&sharded{store{vals: map[string]string{}}}))
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		panic(err)
	}

	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig": [{"name": [{"service": "keyvalue", "method": "KeyValue::HealthCheck"}],
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
	kvc, err := client.NewClient("keyvalue", channel.WithMethods("KeyValue::Get", "KeyValue::Set"))
	if err != nil {
		panic(err)
	}
	if err := kvc.AddPeer(server.HostPort()); err != nil {
		panic(err)
	}
	kv := keyvalue.NewTChanKeyValueClient(thrift.NewClient(kvc))

	c, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var info channel.CallInfo
	ctx := thrift.WithCallOptions(tthrift.Wrap(c), channel.WithShardKey("user-42"), channel.ReportCallInfo(&info))
	fmt.Println(kv.HealthCheck(ctx))
	fmt.Println("attempts:", info.Attempts, "answered by the server:", info.Peer == server.HostPort())
	// Output:
	// OK for shard user-42 <nil>
	// attempts: 2 answered by the server: true
}

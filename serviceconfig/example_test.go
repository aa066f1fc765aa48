package serviceconfig_test

import (
	"fmt"
	"log"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/hedge"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/serviceconfig"
)

func Example() {
	cfg, err := serviceconfig.Parse([]byte(`{
	  "methodConfig": [{
	    "name": [{"service": "kv", "method": "Get"}, {"service": "search"}],
	    "retryPolicy": {
	      "maxAttempts": 10, "initialBackoff": "0.1s", "maxBackoff": "1s",
	      "backoffMultiplier": 2, "retryableStatusCodes": ["BUSY", "DECLINED"]
	    },
	    "timeout": "1.5s"
	  }],
	  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
	}`))
	if err != nil {
		log.Fatal(err)
	}
	m, _ := cfg.Lookup("search", "Query") // the whole service
	fmt.Println("attempts:", m.Retry.Attempts(0), "timeout:", m.Timeout, "codes:", m.Retry.RetryableCodes.Codes())
	fmt.Println("retry throttling: maxTokens", cfg.RetryThrottling.MaxTokens, "tokenRatio", cfg.RetryThrottling.TokenRatio)

	_, err = serviceconfig.Parse([]byte(`{"methodConfig": [{"name": [{"service": "kv"}],
	  "retryPolicy": {"maxAttempts": 1, "initialBackoff": "0.1s", "maxBackoff": "1s",
	    "backoffMultiplier": 2, "retryableStatusCodes": ["BUSY"]}}]}`))
	fmt.Println(err)
	// Output:
	// attempts: 5 timeout: 1.5s codes: [BUSY DECLINED]
	// retry throttling: maxTokens 10 tokenRatio 0.1
	// serviceconfig: methodConfig[0].retryPolicy.maxAttempts is 1, must be >= 2
}

// New builds a Config in code, with the rules Parse applies to a file.
func ExampleNew() {
	get := &retry.Policy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		BackoffMultiplier: 2, RetryableCodes: codes.NewSet(codes.Busy)}
	cfg, err := serviceconfig.New([]serviceconfig.MethodConfig{
		{Names: []serviceconfig.Name{{Service: "kv", Method: "get"}}, Retry: get, Timeout: time.Second},
		{Names: []serviceconfig.Name{{Service: "search"}}, Hedge: &hedge.Policy{MaxAttempts: 2,
			HedgingDelay: 20 * time.Millisecond, NonFatalCodes: codes.NewSet(codes.Busy)}},
	}, &retry.ThrottleConfig{MaxTokens: 10, TokenRatio: 0.1})
	if err != nil {
		log.Fatal(err)
	}
	m, _ := cfg.Lookup("search", "query")
	fmt.Println("search/query hedges after", m.Hedge.HedgingDelay)

	_, err = serviceconfig.New([]serviceconfig.MethodConfig{
		{Names: []serviceconfig.Name{{Service: "kv"}}, Retry: get},
		{Names: []serviceconfig.Name{{Service: "kv"}}},
	}, nil)
	fmt.Println(err)
	// Output:
	// search/query hedges after 20ms
	// serviceconfig: methodConfig[1].name[0] is {"service":"kv","method":""}, duplicates methodConfig[0].name[0]
}

// Lookup takes the most specific method config: the exact (service,
// method), then the whole service, then the default for every call.
func ExampleConfig_Lookup() {
	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig": [
	  {"name": [{"service": "kv", "method": "get"}], "timeout": "0.1s"},
	  {"name": [{"service": "kv"}], "timeout": "1s"},
	  {"name": [{}], "timeout": "5s"}
	]}`))
	if err != nil {
		log.Fatal(err)
	}
	for _, call := range [][2]string{{"kv", "get"}, {"kv", "set"}, {"search", "query"}} {
		m, ok := cfg.Lookup(call[0], call[1])
		fmt.Println(call[0]+"::"+call[1], ok, m.Timeout)
	}
	// Output:
	// kv::get true 100ms
	// kv::set true 1s
	// search::query true 5s
}

// A Thrift method is named "Service::method" in a config: the Thrift
// service of the IDL and the method, under the TChannel service name the
// servers register under. A bare "Get" matches no Thrift call.
func Example_thriftMethod() {
	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig": [
	  {"name": [{"service": "keyvalue", "method": "KeyValue::Get"}], "timeout": "0.2s"},
	  {"name": [{"service": "keyvalue", "method": "Set"}], "timeout": "0.5s"}]}`))
	if err != nil {
		log.Fatal(err)
	}
	for _, method := range []string{"KeyValue::Get", "KeyValue::Set"} {
		m, ok := cfg.Lookup("keyvalue", method)
		if ok {
			fmt.Println(method, "timeout:", m.Timeout)
		} else {
			fmt.Println(method, "has no method config")
		}
	}
	// Output:
	// KeyValue::Get timeout: 200ms
	// KeyValue::Set has no method config
}

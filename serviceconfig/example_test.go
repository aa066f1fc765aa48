package serviceconfig_test

import (
	"fmt"
	"log"

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
	  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1},
	  "lease": {"resource": "kv"}
	}`))
	if err != nil {
		log.Fatal(err)
	}
	m, _ := cfg.Lookup("search", "Query") // the whole service
	fmt.Println("attempts:", m.Retry.Attempts(0), "timeout:", m.Timeout, "codes:", m.Retry.RetryableCodes.Codes())
	throttle, err := retry.NewThrottle(*cfg.RetryThrottling)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("tokens:", throttle.Tokens(), "lease section:", string(cfg.Lease))

	_, err = serviceconfig.Parse([]byte(`{"methodConfig": [{"name": [{"service": "kv"}],
	  "retryPolicy": {"maxAttempts": 1, "initialBackoff": "0.1s", "maxBackoff": "1s",
	    "backoffMultiplier": 2, "retryableStatusCodes": ["BUSY"]}}]}`))
	fmt.Println(err)
	// Output:
	// attempts: 5 timeout: 1.5s codes: [BUSY DECLINED]
	// tokens: 10 lease section: {"resource": "kv"}
	// serviceconfig: methodConfig[0].retryPolicy.maxAttempts is 1, must be >= 2
}

package channelz_test

import (
	"encoding/json"
	"fmt"

	"github.com/sluice-rpc/sluice/channel/channelz"
)

// A program that reads a Channel's debug page decodes it into a State,
// here to list the peers whose busy limit is below its ceiling: those that
// answered Busy recently.
func ExampleState() {
	page := []byte(`{
	  "service": "client",
	  "time": "2024-05-01T12:00:00.5Z",
	  "closed": false,
	  "services": [{
	    "name": "kv",
	    "peers": [
	      {"hostPort": "10.0.0.7:4040", "state": "READY", "limit": 38.14, "ceiling": 9999999},
	      {"hostPort": "10.0.0.8:4040", "state": "READY", "limit": 9999999, "ceiling": 9999999}
	    ],
	    "methods": []
	  }]
	}`)
	var st channelz.State
	if err := json.Unmarshal(page, &st); err != nil {
		panic(err)
	}
	for _, s := range st.Services {
		for _, p := range s.Peers {
			if p.Limit < p.Ceiling {
				fmt.Printf("%s: %s is throttled to %.0f requests per window\n", s.Name, p.HostPort, p.Limit)
			}
		}
	}
	// Output:
	// kv: 10.0.0.7:4040 is throttled to 38 requests per window
}

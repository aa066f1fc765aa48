package shed_test

import (
	"fmt"
	"log"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/shed"
)

// The adaptive limit as a service sets it: on its Channel's server side,
// one limit per method (channel.ShedConfig.Adaptive). The zero Config is
// the defaults; set only what you change. Requests beyond a method's limit
// are answered Busy, with a pushback, before its handler runs; below it
// they are served as usual.
func Example() {
	server, err := channel.New("kv", channel.WithShedding(channel.ShedConfig{
		Adaptive: &shed.Config{MaxLimit: 200}, // never more than 200 requests of a method at once
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer server.Close()
	// Register the handlers, then serve: server.ListenAndServe(...).
}

// A Config that breaks a rule is refused, the error naming the field and
// the rule: by Validate, and by channel.New, which validates what it is
// given.
func ExampleConfig_Validate() {
	cfg := shed.Config{MinLimit: 10, MaxLimit: 5}
	fmt.Println(cfg.Validate())
	_, err := channel.New("kv", channel.WithShedding(channel.ShedConfig{Adaptive: &cfg}))
	fmt.Println(err)
	// Output:
	// shed: Config.MaxLimit is 5, must be >= MinLimit (10)
	// channel: ShedConfig.Adaptive.MaxLimit is 5, must be >= MinLimit (10)
}

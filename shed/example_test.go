package shed_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/shed"
	"github.com/uber/tchannel-go/json"
)

type GetRequest struct{ Key string }
type GetResponse struct{ Value string }

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
		panic(err)
	}
	defer server.Close()
	if err := server.RegisterJSON(map[string]any{
		"get": func(ctx json.Context, req *GetRequest) (*GetResponse, error) {
			return &GetResponse{Value: "value of " + req.Key}, nil
		},
	}); err != nil {
		panic(err)
	}
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		panic(err)
	}

	client, err := channel.New("example-client")
	if err != nil {
		panic(err)
	}
	defer client.Close()
	kv, err := client.NewClient("kv")
	if err != nil {
		panic(err)
	}
	if err := kv.AddPeer(server.HostPort()); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var res GetResponse
	if err := kv.CallJSON(ctx, "get", &GetRequest{Key: "a"}, &res); err != nil {
		panic(err)
	}
	fmt.Println(res.Value)
	// Output: value of a
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

package channel

import (
	"maps"
	"testing"

	"github.com/uber/tchannel-go"
)

// Call honours WithHeaders (added to the Request's headers, which stay as
// they were) and ResponseHeaders, as CallJSON does.
func TestCallHeaderOptions(t *testing.T) {
	s := startServer(t)
	c, _, _ := startClient(t, s)
	mine := map[string]string{"who": "request", "other": "kept"}
	req := &Request{Format: tchannel.JSON, Headers: mine, Arg3: []byte(`{"Key":"k"}`)}
	var rh map[string]string
	res, err := to(c, "kv").Call(ctxTimeout(t), "get", req, WithHeaders(map[string]string{"who": "option"}), ResponseHeaders(&rh))
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if want := map[string]string{"seen": "option"}; !maps.Equal(rh, want) || !maps.Equal(res.Headers, want) {
		t.Errorf("response headers: ResponseHeaders %q, Response.Headers %q, want %q in both", rh, res.Headers, want)
	}
	if want := map[string]string{"who": "request", "other": "kept"}; !maps.Equal(req.Headers, want) {
		t.Errorf("the Request's headers became %q, want %q", req.Headers, want)
	}
}

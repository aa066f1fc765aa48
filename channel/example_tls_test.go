package channel_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/tlsfiles"
	"github.com/uber/tchannel-go/json"
)

// Mutual TLS from PEM files: the server presents its certificate and
// requires a client certificate its CA signed; the client verifies the
// server (here by its IP address, 127.0.0.1) and presents its own; the
// handler reads who called. Both sides pick up files replaced on disk:
// the server's one configuration follows them, and the client makes a
// configuration for each connection it dials.
func ExampleWithServerTLS() {
	serverFiles, err := tlsfiles.New(tlsfiles.Config{Files: tlsfiles.Files{
		Cert: "../tlsfiles/testdata/server.pem", Key: "../tlsfiles/testdata/server-key.pem",
		CA: "../tlsfiles/testdata/ca.pem", // clients must present a certificate it signed
	}})
	if err != nil {
		panic(err) // names the file and what is wrong with it
	}
	serverConfig, err := serverFiles.ServerConfig()
	if err != nil {
		panic(err)
	}
	// TLSMixed would serve plaintext clients on the same port too, while
	// they move to TLS.
	server, err := channel.New("kv", channel.WithServerTLS(channel.ServerTLS{Config: serverConfig, Mode: channel.TLSOnly}))
	if err != nil {
		panic(err)
	}
	defer server.Close()
	if err := server.RegisterJSON(map[string]any{
		"get": func(ctx json.Context, req *GetRequest) (*GetResponse, error) {
			id, ok := channel.PeerIdentity(ctx) // the verified client certificate's names
			if !ok {
				return &GetResponse{Value: "anonymous"}, nil
			}
			return &GetResponse{Value: fmt.Sprintf("%s for %s %v", req.Key, id.Subject, id.URIs)}, nil
		},
	}); err != nil {
		panic(err)
	}
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		panic(err)
	}

	clientFiles, err := tlsfiles.New(tlsfiles.Config{Files: tlsfiles.Files{
		Cert: "../tlsfiles/testdata/client.pem", Key: "../tlsfiles/testdata/client-key.pem",
		CA: "../tlsfiles/testdata/ca.pem", // the server's certificate must chain to it
	}})
	if err != nil {
		panic(err)
	}
	client, err := channel.New("example-client", channel.WithClientTLS(channel.ClientTLS{
		Config: func() *tls.Config { return clientFiles.ClientConfig("") }, // per connection
		// Fallback: channel.FallbackFor("10.0.0.7:4040"), for peers still plaintext
	}))
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
		panic(err) // a refused certificate: UNAVAILABLE, with the TLS error as its cause
	}
	fmt.Println(res.Value)
	// Output: a for CN=billing,O=Sluice example [spiffe://example.test/billing]
}

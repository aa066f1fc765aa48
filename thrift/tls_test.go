package thrift

import (
	"context"
	"crypto/tls"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/internal/testkit/testcerts"
	"github.com/sluice-rpc/sluice/tlsfiles"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	tthrift "github.com/uber/tchannel-go/thrift"
)

// identityHandler answers HealthCheck with the caller's verified identity.
type identityHandler struct{ keyvalue.TChanKeyValue }

func (identityHandler) HealthCheck(ctx tthrift.Context) (string, error) {
	id, ok := channel.PeerIdentity(ctx)
	if !ok {
		return "anonymous", nil
	}
	return id.Subject + " " + strings.Join(id.URIs, ","), nil
}

// Thrift calls over mutual TLS are served; the handler and the inbound
// middleware read the client's verified identity.
func TestMutualTLS(t *testing.T) {
	certs := testcerts.New(t)
	server, err := tlsfiles.Files{Cert: certs.Server.Cert, Key: certs.Server.Key, CA: certs.CA.File}.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		ins []*channel.TLSInfo
	)
	ch, err := channel.New(service, channel.WithServerTLS(channel.ServerTLS{Config: server}),
		channel.WithInboundMiddleware(func(ctx context.Context, in *channel.Inbound, next func(context.Context) error) error {
			mu.Lock()
			ins = append(ins, in.TLS)
			mu.Unlock()
			return next(ctx)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(identityHandler{newKVServer()}))
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}

	client, err := tlsfiles.New(tlsfiles.Config{Files: tlsfiles.Files{Cert: certs.Client.Cert, Key: certs.Client.Key, CA: certs.CA.File}})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := channel.New("kv-client", channel.WithClientTLS(channel.ClientTLS{Config: func() *tls.Config { return client.ClientConfig("") }}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Close)
	cl, err := cc.NewClient(service)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.AddPeer(ch.HostPort()); err != nil {
		t.Fatal(err)
	}
	kv := keyvalue.NewTChanKeyValueClient(NewClient(cl))
	ctx := ctxTimeout(t, nil)
	if err := kv.Set(ctx, "k", "v"); err != nil {
		t.Fatalf("Set: %v", err)
	}
	got, err := kv.HealthCheck(ctx)
	if want := "CN=" + testcerts.ClientName + ",O=Sluice tests " + testcerts.ClientURI; err != nil || got != want {
		t.Errorf("the handler read the identity %q (%v), want %q", got, err, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ins) != 2 {
		t.Fatalf("the middleware saw %d calls, want 2", len(ins))
	}
	for i, in := range ins {
		if in == nil || !in.Verified || in.Identity.CommonName != testcerts.ClientName {
			t.Errorf("call %d: Inbound.TLS = %+v, want the verified client", i, in)
		}
	}
}

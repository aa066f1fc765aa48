package tlsfiles_test

//go:generate go run ../internal/gencerts -dir testdata -ca "example CA" -server "example server" -client client=billing,spiffe://example.test/billing,billing.example.test

import (
	"crypto/tls"
	"fmt"
	"log"

	"github.com/sluice-rpc/sluice/tlsfiles"
)

// A server requiring client certificates and a client presenting one:
// the server reads who the client is from its certificate. Both sides
// would pick up certificates replaced on disk (a changed file is read
// again within a second, at the next handshake).
func Example() {
	server, err := tlsfiles.New(tlsfiles.Config{
		// A replaced file that does not load is logged on slog.Default()
		// (Config.Logger sets another logger).
		Files: tlsfiles.Files{Cert: "testdata/server.pem", Key: "testdata/server-key.pem", CA: "testdata/ca.pem"},
	})
	if err != nil {
		log.Fatal(err) // names the file and what is wrong with it
	}
	serverConfig, err := server.ServerConfig() // once, for every connection
	if err != nil {
		log.Fatal(err)
	}
	client, err := tlsfiles.New(tlsfiles.Config{
		Files: tlsfiles.Files{Cert: "testdata/client.pem", Key: "testdata/client-key.pem", CA: "testdata/ca.pem"},
	})
	if err != nil {
		log.Fatal(err)
	}

	lis, err := tls.Listen("tcp", "127.0.0.1:0", serverConfig)
	if err != nil {
		log.Fatal(err)
	}
	defer lis.Close()
	identity := make(chan tlsfiles.Identity, 1)
	go func() {
		defer close(identity)
		conn, err := lis.Accept()
		if err != nil {
			log.Print(err)
			return
		}
		defer conn.Close()
		tc := conn.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			log.Print(err)
			return
		}
		state := tc.ConnectionState()
		id, _ := tlsfiles.IdentityOf(&state) // the verified client certificate's names
		identity <- id
	}()

	// A configuration per dial, so that a replaced CA takes effect too.
	// tls.Dial checks the server's certificate for 127.0.0.1.
	conn, err := tls.Dial("tcp", lis.Addr().String(), client.ClientConfig(""))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	state := conn.ConnectionState()
	serverID, _ := tlsfiles.IdentityOf(&state)
	fmt.Println("the client reached:", serverID.CommonName)
	id := <-identity
	fmt.Println("the server served:", id.Subject, id.URIs)
	// Output:
	// the client reached: example server
	// the server served: CN=billing,O=Sluice example [spiffe://example.test/billing]
}

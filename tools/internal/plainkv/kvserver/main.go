// Command kvserver serves package plainkv until interrupted, printing
// "serving HOST:PORT" once it listens, for recording yab's answers and
// measuring sluice bench against yab.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-rpc/sluice/tools/internal/plainkv"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "the 127.0.0.1 `HOST:PORT` to serve on")
	flag.Parse()
	ch, err := plainkv.Start(*listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("serving %s\n", ch.PeerInfo().HostPort)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	ch.Close()
}

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// proxies are in-process toxiproxy proxies (no HTTP API is started), each
// listening on 127.0.0.1 in front of one upstream server. A toxic added to
// a proxy applies to its open connections and to every later one.
type proxies struct {
	api  *toxiproxy.ApiServer
	coll *toxiproxy.ProxyCollection
}

func newProxies() *proxies {
	return &proxies{
		api:  toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()),
		coll: toxiproxy.NewProxyCollection(),
	}
}

// add starts a proxy on a free port of 127.0.0.1 in front of upstream.
func (p *proxies) add(upstream string) (*toxiproxy.Proxy, error) {
	px := toxiproxy.NewProxy(p.api, fmt.Sprintf("faults-%d", len(p.coll.Proxies())+1), loopback+":0", upstream)
	if err := p.coll.Add(px, true); err != nil {
		return nil, fmt.Errorf("faults: start a toxiproxy proxy in front of %s: %w", upstream, err)
	}
	return px, nil
}

// close stops every proxy, closing their connections.
func (p *proxies) close() { p.coll.Clear() }

// clearLimit bounds clearToxics.
const clearLimit = 10 * time.Second

// clearToxics removes every proxy's toxics, so that the data they hold
// flows on. Call it while the client is still connected: a toxic that
// holds data when the client's side closes can block forever on a send
// nobody reads (toxiproxy's latency and bandwidth toxics do), leaking its
// goroutine. It waits at most clearLimit.
func (p *proxies) clearToxics() error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, px := range p.coll.Proxies() {
			px.Toxics.ResetToxics(context.Background())
		}
	}()
	t := time.NewTimer(clearLimit)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("faults: removing the toxiproxy toxics took over %v", clearLimit)
	}
}

// toxic is one toxiproxy toxic: its type ("latency", "reset_peer",
// "timeout", "bandwidth"), the stream it acts on ("upstream": client to
// server, "downstream": server to client) and its attributes.
type toxic struct {
	Type       string         `json:"type"`
	Stream     string         `json:"stream"`
	Attributes map[string]any `json:"attributes"`
}

// addToxic adds t to px at full toxicity.
func addToxic(px *toxiproxy.Proxy, t toxic) error {
	body, _ := json.Marshal(struct {
		Name     string  `json:"name"`
		Toxicity float64 `json:"toxicity"`
		toxic
	}{Name: t.Type + "_" + t.Stream, Toxicity: 1, toxic: t})
	if _, err := px.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
		return fmt.Errorf("faults: add the %s toxic to the proxy at %s: %w", t.Type, px.Listen, err)
	}
	return nil
}

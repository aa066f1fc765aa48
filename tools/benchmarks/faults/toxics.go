package faults

import (
	"context"
	"fmt"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// proxies are in-process toxiproxy proxies on 127.0.0.1, each in front of
// one server.
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

// clearToxics removes every proxy's toxics, waiting at most clearLimit,
// while the client is connected: a toxic holding data when the client's
// side closes can block forever, leaking its goroutine.
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

// toxic is a toxiproxy toxic: its type, the stream it acts on (upstream:
// client to server) and its one attribute.
type toxic struct {
	typ, stream, attr string
	value             int
}

// addToxic adds t to px at full toxicity.
func addToxic(px *toxiproxy.Proxy, t toxic) error {
	body := fmt.Sprintf(`{"name":"%s_%s","type":%q,"stream":%q,"toxicity":1,"attributes":{%q:%d}}`, t.typ, t.stream, t.typ, t.stream, t.attr, t.value)
	if _, err := px.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		return fmt.Errorf("faults: add the %s toxic to the proxy at %s: %w", t.typ, px.Listen, err)
	}
	return nil
}

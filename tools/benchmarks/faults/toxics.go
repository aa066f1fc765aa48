package faults

import (
	"context"
	"fmt"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// proxiedToxics are the toxiproxy toxics of the proxied scenarios, at
// full toxicity (upstream: client to server).
var proxiedToxics = map[Scenario]string{
	Reset:     `{"type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`,
	Latency:   `{"type":"latency","stream":"downstream","attributes":{"latency":100}}`,
	Bandwidth: `{"type":"bandwidth","stream":"downstream","attributes":{"rate":1}}`,
	Stall:     `{"type":"timeout","stream":"upstream","attributes":{"timeout":0}}`,
}

// startProxied starts three good servers, each behind an in-process
// toxiproxy proxy on 127.0.0.1 (so that the three differ only by the
// toxic), and puts s's toxic on the first: from the start (latency,
// bandwidth) or at FaultAt (reset, stall). The servers count the
// connections the proxies open to them.
func (f *peers) startProxied(s Scenario) error {
	api := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	proxies := toxiproxy.NewProxyCollection()
	f.closers = append(f.closers, proxies.Clear) // stops every proxy, closing their connections
	f.after, f.faulty = func() error { return clearToxics(proxies) }, 0
	for i := range 3 {
		p, err := f.startServer(nil)
		if err != nil {
			return err
		}
		px := toxiproxy.NewProxy(api, fmt.Sprintf("faults-%d", i+1), loopback+":0", p.addr)
		if err := proxies.Add(px, true); err != nil {
			return fmt.Errorf("faults: start a toxiproxy proxy in front of %s: %w", p.addr, err)
		}
		p.addr = px.Listen
		switch {
		case i > 0:
		case s == Reset || s == Stall:
			f.inject = func() error { return addToxic(px, s) }
		default:
			if err := addToxic(px, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// clearLimit bounds clearToxics.
const clearLimit = 10 * time.Second

// clearToxics removes every proxy's toxics, waiting at most clearLimit,
// while the client is connected: a toxic holding data when the client's
// side closes can block forever, leaking its goroutine.
func clearToxics(proxies *toxiproxy.ProxyCollection) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, px := range proxies.Proxies() {
			px.Toxics.ResetToxics(context.Background())
		}
	}()
	select {
	case <-done:
		return nil
	case <-time.After(clearLimit):
		return fmt.Errorf("faults: removing the toxiproxy toxics took over %v", clearLimit)
	}
}

// addToxic adds scenario s's toxic to px.
func addToxic(px *toxiproxy.Proxy, s Scenario) error {
	if _, err := px.Toxics.AddToxicJson(strings.NewReader(proxiedToxics[s])); err != nil {
		return fmt.Errorf("faults: add %s's toxic %s to the proxy at %s: %w", s, proxiedToxics[s], px.Listen, err)
	}
	return nil
}

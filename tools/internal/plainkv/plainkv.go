// Package plainkv serves tchannel-go's example KeyValue Thrift service
// from a plain tchannel-go channel on 127.0.0.1, with no Sluice in it: the
// server Sluice's Thrift CLI is checked against and `sluice bench` and yab
// are measured on.
package plainkv

import (
	"fmt"
	"net"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	tthrift "github.com/uber/tchannel-go/thrift"
)

// ServiceName is the TChannel service the server registers under.
const ServiceName = "keyvalue"

// Start serves KeyValue and Admin (and tchannel-go's Meta::health) on
// hostPort, which must be on 127.0.0.1 ("127.0.0.1:0" picks a port).
// Close the channel to stop.
func Start(hostPort string) (*tchannel.Channel, error) {
	if host, _, err := net.SplitHostPort(hostPort); err != nil || host != "127.0.0.1" {
		return nil, fmt.Errorf("plainkv: listen on %q: want 127.0.0.1:PORT", hostPort)
	}
	ch, err := tchannel.NewChannel(ServiceName, nil)
	if err != nil {
		return nil, err
	}
	srv := tthrift.NewServer(ch)
	h := &store{vals: map[string]string{}}
	srv.Register(keyvalue.NewTChanKeyValueServer(h))
	srv.Register(keyvalue.NewTChanAdminServer(h))
	if err := ch.ListenAndServe(hostPort); err != nil {
		ch.Close()
		return nil, fmt.Errorf("plainkv: listen on %s: %w", hostPort, err)
	}
	return ch, nil
}

// store is the example's semantics: keys start with a letter, Get of a
// missing key throws KeyNotFound, Set answers a "count" header.
type store struct {
	mu   sync.RWMutex
	vals map[string]string
}

func validKey(key string) error {
	if r, _ := utf8.DecodeRuneInString(key); !unicode.IsLetter(r) {
		return &keyvalue.InvalidKey{}
	}
	return nil
}

func (s *store) Get(ctx tthrift.Context, key string) (string, error) {
	if err := validKey(key); err != nil {
		return "", err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if v, ok := s.vals[key]; ok {
		return v, nil
	}
	return "", &keyvalue.KeyNotFound{Key: key}
}

func (s *store) Set(ctx tthrift.Context, key, value string) error {
	if err := validKey(key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vals[key] = value
	ctx.SetResponseHeaders(map[string]string{"count": fmt.Sprint(len(s.vals))})
	return nil
}

func (s *store) HealthCheck(tthrift.Context) (string, error) { return "OK", nil }

// ClearAll needs the header "user: root", as the example's does.
func (s *store) ClearAll(ctx tthrift.Context) error {
	if ctx.Headers()["user"] != "root" {
		return &keyvalue.NotAuthorized{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vals = map[string]string{}
	return nil
}

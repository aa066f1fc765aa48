package etcd

import (
	"encoding/json"
	"fmt"

	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/internal/hostport"
)

// endpoint is a key's value: the JSON of etcd's
// naming/endpoints/internal.Update, which the gRPC naming package of old
// wrote too. Op is always 0 (Add) when written, and ignored when read, as
// etcd's own readers ignore it.
type endpoint struct {
	Op       uint8
	Addr     string
	Metadata any
}

// encode returns the value a Registrar writes for hostPort.
func encode(hostPort string, metadata map[string]any) (string, error) {
	e := endpoint{Addr: hostPort}
	if metadata != nil {
		e.Metadata = metadata
	}
	b, err := json.Marshal(e)
	return string(b), err
}

// decode returns the peer that key's value names, or an error naming key.
func decode(key string, value []byte) (discovery.Address, error) {
	var e endpoint
	if err := json.Unmarshal(value, &e); err != nil {
		return discovery.Address{}, fmt.Errorf("etcd: key %q: the value is not an endpoint's JSON ({\"Addr\":\"host:port\",\"Metadata\":...}): %v", key, err)
	}
	if e.Addr == "" {
		return discovery.Address{}, fmt.Errorf("etcd: key %q: the value has no Addr", key)
	}
	if err := hostport.Validate(e.Addr); err != nil {
		return discovery.Address{}, fmt.Errorf("etcd: key %q: %v", key, err)
	}
	a := discovery.Address{HostPort: e.Addr}
	if md, ok := e.Metadata.(map[string]any); ok {
		a.Metadata = md
		if w, ok := md["weight"]; ok {
			// A JSON number decodes as a finite float64.
			f, ok := w.(float64)
			if !ok || f < 0 {
				return discovery.Address{}, fmt.Errorf("etcd: key %q: Metadata.weight is %v, must be a number >= 0", key, w)
			}
			a.Weight = f
		}
	}
	return a, nil
}

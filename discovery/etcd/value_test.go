package etcd

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/discovery"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		value string
		want  discovery.Address
		err   string
	}{
		{`{"Op":0,"Addr":"127.0.0.1:1","Metadata":null}`, discovery.Address{HostPort: "127.0.0.1:1"}, ""},
		{`{"Addr":"kv-1.example:1"}`, discovery.Address{HostPort: "kv-1.example:1"}, ""},
		{`{"Op":1,"Addr":"127.0.0.1:1"}`, discovery.Address{HostPort: "127.0.0.1:1"}, ""}, // Op ignored, as etcd's readers ignore it
		{`{"Addr":"[::1]:1","Metadata":{"weight":2.5,"zone":"a"}}`,
			discovery.Address{HostPort: "[::1]:1", Weight: 2.5, Metadata: map[string]any{"weight": 2.5, "zone": "a"}}, ""},
		{`{"Addr":"127.0.0.1:1","Metadata":"opaque"}`, discovery.Address{HostPort: "127.0.0.1:1"}, ""},
		{`{"Addr":"127.0.0.1:1","Metadata":{"weight":0}}`, discovery.Address{HostPort: "127.0.0.1:1", Metadata: map[string]any{"weight": 0.0}}, ""},
		{`not json`, discovery.Address{}, "not an endpoint's JSON"},
		{`[]`, discovery.Address{}, "not an endpoint's JSON"},
		{`null`, discovery.Address{}, "has no Addr"},
		{`{"Op":0}`, discovery.Address{}, "has no Addr"},
		{`{"Addr":"127.0.0.1"}`, discovery.Address{}, "bad host:port"},
		{`{"Addr":"127.0.0.1:1","Metadata":{"weight":-1}}`, discovery.Address{}, "Metadata.weight is -1"},
		{`{"Addr":"127.0.0.1:1","Metadata":{"weight":"3"}}`, discovery.Address{}, "Metadata.weight is 3, must be a number"},
	}
	for _, tt := range tests {
		got, err := decode("p/k", []byte(tt.value))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), `key "p/k"`) {
				t.Errorf("decode(%s) = %+v, %v; want an error naming the key, containing %q", tt.value, got, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("decode(%s) = %+v, %v; want %+v", tt.value, got, err, tt.want)
		}
	}
}

func TestEncode(t *testing.T) {
	for _, tt := range []struct {
		md   map[string]any
		want string
	}{
		{nil, `{"Op":0,"Addr":"127.0.0.1:1","Metadata":null}`},
		{map[string]any{"weight": 2.0}, `{"Op":0,"Addr":"127.0.0.1:1","Metadata":{"weight":2}}`},
	} {
		if got, err := encode("127.0.0.1:1", tt.md); err != nil || got != tt.want {
			t.Errorf("encode(%v) = %s, %v; want %s", tt.md, got, err, tt.want)
		}
	}
}

package etcdelection_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/leasing/server/etcdelection"
)

func TestConfigValidate(t *testing.T) {
	for name, tt := range map[string]struct {
		cfg  etcdelection.Config
		want string
	}{
		"no endpoints":   {etcdelection.Config{Key: "/k"}, "Config.Endpoints is empty"},
		"empty endpoint": {etcdelection.Config{Endpoints: []string{"a:1", " "}, Key: "/k"}, `Config.Endpoints[1] is " ", must be an etcd client URL`},
		"no key":         {etcdelection.Config{Endpoints: []string{"a:1"}, Key: "//"}, `Config.Key is "//"`},
		"short TTL":      {etcdelection.Config{Endpoints: []string{"a:1"}, Key: "/k", TTL: 500 * time.Millisecond}, "Config.TTL is 500ms, must be a whole number of seconds >= 1s"},
		"fractional TTL": {etcdelection.Config{Endpoints: []string{"a:1"}, Key: "/k", TTL: 1500 * time.Millisecond}, "Config.TTL is 1.5s"},
		"negative dial":  {etcdelection.Config{Endpoints: []string{"a:1"}, Key: "/k", DialTimeout: -1}, "Config.DialTimeout is -1ns"},
	} {
		err := tt.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", name, err, tt.want)
		}
		if _, err := etcdelection.New(tt.cfg); err == nil {
			t.Errorf("%s: New accepted the config", name)
		}
	}
	ok := etcdelection.Config{Endpoints: []string{"127.0.0.1:1"}, Key: "/k"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
	el, err := etcdelection.New(ok)
	if err != nil {
		t.Fatal(err)
	}
	if el.TTL() != etcdelection.DefaultTTL {
		t.Errorf("TTL() = %v, want the default %v", el.TTL(), etcdelection.DefaultTTL)
	}
	if err := el.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

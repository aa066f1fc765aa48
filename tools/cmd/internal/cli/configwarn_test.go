package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
)

// A service config that names a Thrift method by its bare name: the
// channel's warning about it is a line on the command's stderr (not the
// process's, through slog.Default), in the format of the command's other
// warnings, and bench writes it once, not once a connection.
func TestConfigWarningsGoToStderr(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "sc.json")
	if err := os.WriteFile(cfg, []byte(`{"methodConfig":[{"name":[{"service":"kv","method":"get"}],"timeout":"1s"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z sluice: the service config names method "get" of service "kv", which no call has used yet; ` +
		`calls are to "KV::get" .* channel=sluice-(call|bench)$`)
	peer := testnet.Refused(t)
	code, out, errOut := runCall("-p", peer, "-s", "kv", "-m", "KV::get", "-e", "raw", "--service-config", cfg)
	if code != 1 || out != "" || len(line.FindAllString(errOut, -1)) != 1 {
		t.Errorf("call: exit %d, stdout %q; want exit 1 and the warning once on stderr:\n%s", code, out, errOut)
	}
	// Every connection calls KV::get, so each Channel would warn.
	var bout, berr strings.Builder
	code = run([]string{"bench", "-p", peer, "-s", "kv", "-m", "KV::get", "-e", "raw", "--service-config", cfg,
		"-n", "20", "--connections", "3", "--warmup", "0"}, &bout, &berr)
	if code != 1 || len(line.FindAllString(berr.String(), -1)) != 1 {
		t.Errorf("bench: exit %d; want exit 1 (no call succeeded) and the warning once on stderr:\n%s", code, berr.String())
	}
}

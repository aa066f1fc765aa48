package cli

import (
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/uber-go/tally/v4"

	"github.com/sluice-rpc/sluice/tools/internal/debughttp"
)

const DebugListenUsage = "serve /metrics, /debug/pprof/ and the command's pages on `ADDR` " +
	"(host:port, e.g. 127.0.0.1:0 for a free port; the address is printed on stderr); off by default"

// DebugListener is a command's --debug-listen: one HTTP listener with the
// command's metrics, the runtime's profiles and its own pages. Off (the
// flag not given) it records nothing and serves nothing.
type DebugListener struct {
	addr    string
	stderr  io.Writer // where metric errors and the listener's address go
	metrics *debughttp.Metrics
	server  *debughttp.Server
}

// NewDebugListener makes the metrics of a command run with --debug-listen
// addr, reporting on stderr; Serve starts the listener. A bad addr is a
// usage error.
func NewDebugListener(addr string, stderr io.Writer) (*DebugListener, error) {
	d := &DebugListener{addr: addr, stderr: stderr}
	if addr == "" {
		return d, nil
	}
	if _, port, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("--debug-listen %q: want host:port (port 0 for a free one)", addr)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return nil, fmt.Errorf("--debug-listen %q: the port must be a number in 0..65535", addr)
	}
	d.metrics = debughttp.NewMetrics(stderr)
	return d, nil
}

// Scope is what the command records its metrics on.
func (d *DebugListener) Scope() tally.Scope {
	if d.metrics == nil {
		return tally.NoopScope
	}
	return d.metrics.Scope()
}

// Serve starts the listener with pages beside /metrics and /debug/pprof/,
// and says where on stderr.
func (d *DebugListener) Serve(name string, pages map[string]http.Handler) error {
	if d.addr == "" {
		return nil
	}
	s, err := debughttp.Serve(d.addr, d.metrics, pages)
	if err != nil {
		return fmt.Errorf("--debug-listen: %v", err)
	}
	d.server = s
	paths := append([]string{debughttp.MetricsPath, debughttp.PprofPath}, slices.Sorted(maps.Keys(pages))...)
	fmt.Fprintf(d.stderr, "%s: debug endpoints on %s (%s)\n", name, s.URL(), strings.Join(paths, " "))
	return nil
}

// Flush reports the metrics' last values; /metrics serves them until close.
func (d *DebugListener) Flush() {
	if d.metrics != nil {
		d.metrics.Close()
	}
}

// Close flushes the metrics and stops the listener.
func (d *DebugListener) Close() {
	d.Flush()
	if d.server != nil {
		d.server.Close()
	}
}

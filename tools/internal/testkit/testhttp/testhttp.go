// Package testhttp fetches pages from real HTTP servers in tests (debug
// listeners, status pages), without keeping connections: no client
// goroutine outlives the test, which goleak checks.
package testhttp

import (
	"io"
	"net/http"
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// Get fetches url and returns the answer's status code and body. It fails
// t if the request fails.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: testwait.Limit}
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// OK fetches url and returns the body of a 200 answer; it fails t on any
// other status.
func OK(t testing.TB, url string) string {
	t.Helper()
	code, body := Get(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s\n%s", url, code, http.StatusText(code), body)
	}
	return body
}

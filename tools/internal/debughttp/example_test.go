package debughttp_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/sluice-rpc/sluice/tools/internal/debughttp"
)

// A command's metrics and profiles on one listener: the scope's counter
// "requests.served" is the Prometheus series requests_served.
func Example() {
	m := debughttp.NewMetrics(nil)
	s, err := debughttp.Serve("127.0.0.1:0", m, nil)
	if err != nil {
		panic(err)
	}
	defer s.Close()

	m.Scope().Tagged(map[string]string{"peer": "127.0.0.1:4040"}).Counter("requests.served").Inc(2)
	m.Close() // report the last values now rather than within a second

	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "requests_served") {
			fmt.Println(line)
		}
	}
	// Output: requests_served{peer="127.0.0.1:4040"} 2
}

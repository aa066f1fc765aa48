package server

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(childServerEnv); spec != "" {
		os.Exit(runChildServer(spec)) // a server in a process of its own: see TestServeCapsConnections
	}
	goleak.VerifyTestMain(m)
}

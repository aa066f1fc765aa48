package thriftjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"go.uber.org/thriftrw/compile"
)

// metaIDL is the part of TChannel's Meta service that a health check
// needs: tchannel-go's Thrift servers register Meta::health under their
// service name, and yab's --health calls it.
const metaIDL = `
enum HealthState { REFUSING = 0, ACCEPTING = 1, STOPPING = 2, STOPPED = 3 }
enum HealthRequestType { PROCESS = 0, TRAFFIC = 1 }
struct HealthRequest { 1: optional HealthRequestType type }
struct HealthStatus {
  1: required bool ok
  2: optional string message
  3: optional HealthState state
}
service Meta { HealthStatus health(1: HealthRequest hr) }
`

// metaPath is where the compiler is told metaIDL lives.
const metaPath = "/sluice/meta.thrift"

// memFS serves metaIDL at metaPath and nothing else.
type memFS struct{}

func (memFS) Read(name string) ([]byte, error) {
	if name == metaPath {
		return []byte(metaIDL), nil
	}
	return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
}

// Abs has only metaPath, absolute, to resolve: metaIDL includes nothing.
func (memFS) Abs(p string) (string, error) { return p, nil }

// Health returns Meta::health, the health check every tchannel-go Thrift
// server answers. Its answer is {"result": {"ok": true, ...}}; Healthy
// reads it.
func Health() *Method {
	mod, err := compile.Compile(metaPath, compile.Filesystem(memFS{}))
	if err != nil {
		panic("thriftjson: the built-in Meta IDL does not compile: " + err.Error())
	}
	m, err := (&IDL{mod: mod}).Method("Meta::health")
	if err != nil {
		panic(err)
	}
	return m
}

// Healthy reads a Meta::health answer: whether the server said ok, and its
// message, if any.
func Healthy(a *Answer) (ok bool, message string, err error) {
	var v struct {
		Result *struct {
			OK      bool   `json:"ok"`
			Message string `json:"message"`
		} `json:"result"`
	}
	if err := json.Unmarshal(a.JSON, &v); err != nil {
		return false, "", err
	}
	if v.Result == nil {
		return false, "", errors.New("the Meta::health answer has no status")
	}
	return v.Result.OK, v.Result.Message, nil
}

package channel

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/sluice-rpc/sluice/internal/jsonheaders"
	"github.com/uber/tchannel-go"
	tthrift "github.com/uber/tchannel-go/thrift"
)

// encodeHeaders encodes application headers as format's arg2: a JSON object
// for JSON (an empty one when there are none, as tchannel-go sends), and
// TChannel's Thrift header encoding (nh:2 (k~2 v~2){nh}) for Thrift.
func encodeHeaders(format tchannel.Format, h map[string]string) ([]byte, error) {
	switch format {
	case tchannel.JSON:
		if len(h) == 0 {
			return []byte("{}"), nil
		}
		if b, ok := jsonheaders.Append(nil, h); ok {
			return b, nil
		}
		return json.Marshal(h)
	case tchannel.Thrift:
		var buf bytes.Buffer
		if err := tthrift.WriteHeaders(&buf, h); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	return nil, fmt.Errorf("sluice: no header encoding for format %q", format)
}

// decodeHeaders decodes a response's arg2 for format.
func decodeHeaders(format tchannel.Format, arg2 []byte) (map[string]string, error) {
	if len(arg2) == 0 {
		return nil, nil
	}
	switch format {
	case tchannel.JSON:
		h, plain := jsonheaders.Parse(arg2)
		if plain {
			return h, nil
		}
		if err := json.Unmarshal(arg2, &h); err != nil {
			return nil, fmt.Errorf("sluice: response headers are not a JSON object of strings: %w", err)
		}
		return h, nil
	case tchannel.Thrift:
		h, err := tthrift.ReadHeaders(bytes.NewReader(arg2))
		if err != nil {
			return nil, fmt.Errorf("sluice: bad Thrift response headers: %w", err)
		}
		return h, nil
	}
	return nil, fmt.Errorf("sluice: no header encoding for format %q", format)
}

package hostile

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// rawCodec sends request bytes as they are and keeps response bytes
// unparsed: it lets a client send a payload no message marshals to.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append((*v.(*[]byte))[:0], data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// doormanCase is one garbage request: its payload, to method.
type doormanCase struct {
	name    string
	method  string
	payload func() []byte
}

// Doorman's methods.
const (
	methodGetCapacity       = "/doorman.Capacity/GetCapacity"
	methodGetServerCapacity = "/doorman.Capacity/GetServerCapacity"
	methodReleaseCapacity   = "/doorman.Capacity/ReleaseCapacity"
	methodDiscovery         = "/doorman.Capacity/Discovery"
)

// marshal marshals one of the cases' fixed messages, which cannot fail
// (required fields are not checked, proto2 strings need not be UTF-8).
func marshal(m proto.Message) []byte {
	b, _ := proto.MarshalOptions{AllowPartial: true}.Marshal(m)
	return b
}

// tag appends field num's key of wire type t.
func tag(b []byte, num protowire.Number, t protowire.Type) []byte {
	return protowire.AppendTag(b, num, t)
}

// resourceReq is a GetCapacity request of one resource, altered by f.
func resourceReq(f func(r *pb.ResourceRequest)) []byte {
	req := capacityRequest("garbage", nil)
	f(req.Resource[0])
	return marshal(req)
}

// doormanCases are attack "doorman-malformed"'s requests.
func doormanCases() []doormanCase {
	g := methodGetCapacity
	client := func(b []byte) []byte { // a valid client_id first
		return append(protowire.AppendString(tag(nil, 1, protowire.BytesType), "garbage"), b...)
	}
	return []doormanCase{
		{"empty (required client_id missing)", g, func() []byte { return nil }},
		{"one byte 0xFF", g, func() []byte { return []byte{0xFF} }},
		{"16 random bytes", g, func() []byte { return randomBytes(16, 11) }},
		{"1 KB random", g, func() []byte { return randomBytes(1<<10, 12) }},
		{"64 KB random", g, func() []byte { return randomBytes(64<<10, 13) }},
		{"a key cut short", g, func() []byte { return []byte{0x80} }},
		{"client_id longer than the message", g, func() []byte {
			return append(protowire.AppendVarint(tag(nil, 1, protowire.BytesType), 127), 'a')
		}},
		{"client_id of length 2^32", g, func() []byte {
			return protowire.AppendVarint(tag(nil, 1, protowire.BytesType), 1<<32)
		}},
		{"client_id as a varint", g, func() []byte { return protowire.AppendVarint(tag(nil, 1, protowire.VarintType), 1) }},
		{"field number 0", g, func() []byte { return []byte{0x00, 0x01} }},
		{"field number 2^29-1", g, func() []byte {
			return client(protowire.AppendVarint(tag(nil, protowire.MaxValidNumber, protowire.VarintType), 1))
		}},
		{"group start without its end", g, func() []byte { return client(tag(nil, 5, protowire.StartGroupType)) }},
		{"group end without its start", g, func() []byte { return client(tag(nil, 5, protowire.EndGroupType)) }},
		{"wire type 6", g, func() []byte { return client([]byte{5<<3 | 6}) }},
		{"10,000 nested groups", g, func() []byte {
			b := client(nil)
			for i := 0; i < 10_000; i++ {
				b = tag(b, 5, protowire.StartGroupType)
			}
			for i := 0; i < 10_000; i++ {
				b = tag(b, 5, protowire.EndGroupType)
			}
			return b
		}},
		{"an 11-byte varint", g, func() []byte {
			return client(append(tag(nil, 9, protowire.VarintType), bytes.Repeat([]byte{0xFF}, 11)...))
		}},
		{"client_id not UTF-8", g, func() []byte { return marshal(capacityRequest("\xff\xfe\xfd", nil)) }},
		{"client_id of 1 MB", g, func() []byte { return marshal(capacityRequest(strings.Repeat("c", 1<<20), nil)) }},
		{"100,000 empty resources", g, func() []byte {
			b := client(nil)
			for i := 0; i < 100_000; i++ {
				b = protowire.AppendBytes(tag(b, 2, protowire.BytesType), nil)
			}
			return b
		}},
		{"wants NaN", g, func() []byte { return resourceReq(func(r *pb.ResourceRequest) { r.Wants = proto.Float64(math.NaN()) }) }},
		{"wants -Inf", g, func() []byte {
			return resourceReq(func(r *pb.ResourceRequest) { r.Wants = proto.Float64(math.Inf(-1)) })
		}},
		{"wants 1e308", g, func() []byte { return resourceReq(func(r *pb.ResourceRequest) { r.Wants = proto.Float64(1e308) }) }},
		{"priority -2^63", g, func() []byte {
			return resourceReq(func(r *pb.ResourceRequest) { r.Priority = proto.Int64(math.MinInt64) })
		}},
		{"has a lease of capacity Inf, expiry -1", g, func() []byte {
			return resourceReq(func(r *pb.ResourceRequest) {
				r.Has = &pb.Lease{ExpiryTime: proto.Int64(-1), RefreshInterval: proto.Int64(0), Capacity: proto.Float64(math.Inf(1))}
			})
		}},
		{"resource id of 64 KB", g, func() []byte {
			return resourceReq(func(r *pb.ResourceRequest) { r.ResourceId = proto.String(strings.Repeat("r", 64<<10)) })
		}},
		{"client_id twice", g, func() []byte {
			return protowire.AppendString(tag(client(nil), 1, protowire.BytesType), "other")
		}},
		{"GetServerCapacity: 1 KB random", methodGetServerCapacity, func() []byte { return randomBytes(1<<10, 14) }},
		{"GetServerCapacity: a band of -1 clients wanting NaN", methodGetServerCapacity, func() []byte {
			return marshal(&pb.GetServerCapacityRequest{ServerId: proto.String("garbage"), Resource: []*pb.ServerCapacityResourceRequest{{
				ResourceId: proto.String(doormanResource),
				Wants:      []*pb.PriorityBandAggregate{{Priority: proto.Int64(0), NumClients: proto.Int64(-1), Wants: proto.Float64(math.NaN())}},
			}}})
		}},
		{"ReleaseCapacity: 1 KB random", methodReleaseCapacity, func() []byte { return randomBytes(1<<10, 15) }},
		{"Discovery: 1 KB random", methodDiscovery, func() []byte { return randomBytes(1<<10, 16) }},
		{"an unknown method", "/doorman.Capacity/Nope", func() []byte { return randomBytes(64, 17) }},
		{"a 5 MB request", g, func() []byte {
			return client(protowire.AppendBytes(tag(nil, 9, protowire.BytesType), make([]byte, 5<<20)))
		}},
	}
}

// runDoormanMalformed sends each garbage request, checks the server is
// alive, and has a valid request answered after each.
func runDoormanMalformed(e *env) error {
	e.before()
	s := e.sample()
	var cc *grpc.ClientConn
	defer func() {
		if cc != nil {
			cc.Close()
		}
	}()
	for _, dc := range doormanCases() {
		if e.ctx.Err() != nil {
			break
		}
		c := Case{Name: dc.name}
		if !e.t.Alive() {
			c.Note = "not sent: the server is down"
			e.r.Cases = append(e.r.Cases, c)
			continue
		}
		if cc == nil {
			var err error
			if cc, err = dialDoorman(e.t.Addr, ""); err != nil {
				return err
			}
		}
		payload := dc.payload()
		var resp []byte
		ctx, cancel := context.WithTimeout(e.ctx, doormanCallLimit)
		t0 := time.Now()
		err := cc.Invoke(ctx, dc.method, &payload, &resp, grpc.ForceCodec(rawCodec{}), grpc.MaxCallSendMsgSize(16<<20))
		c.After = millis.Duration(time.Since(t0))
		cancel()
		if err != nil {
			st := status.Convert(err)
			msg := strings.ReplaceAll(st.Message(), "\u00a0", " ")
			if len(msg) > 70 {
				msg = msg[:70] + "..."
			}
			c.Answer = fmt.Sprintf("%s %q", st.Code(), msg)
		} else {
			c.Answer = fmt.Sprintf("OK (%d bytes)", len(resp))
		}
		e.survived(&c, 100*time.Millisecond)
		if !c.Survived {
			cc.Close()
			cc = nil
		} else {
			t0 := time.Now()
			_, o, err := askCapacity(e.ctx, pb.NewCapacityClient(cc), "valid-after", nil)
			next := Call{OK: o == "lease", Code: o, Latency: millis.Duration(time.Since(t0))}
			if err != nil {
				next.Err = err.Error()
			}
			if next.OK {
				next.Code = ""
			}
			c.Next = &next
		}
		e.r.Cases = append(e.r.Cases, c)
	}
	if cc != nil {
		cc.Close()
		cc = nil
	}
	e.peaks(s)
	e.after()
	survived, served := 0, 0
	for _, c := range e.r.Cases {
		if c.Survived {
			survived++
		}
		if c.Next != nil && c.Next.OK {
			served++
		}
	}
	e.r.fig("cases", "%d: server survived %d, answered a valid request after %d", len(e.r.Cases), survived, served)
	e.r.caseFigures()
	return nil
}

package server

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// randomRequest returns a GetCapacityRequest of n resources, some with a
// has, with odd values where they are legal on the wire.
func randomRequest(rng *rand.Rand, n int) *pb.GetCapacityRequest {
	req := &pb.GetCapacityRequest{ClientId: proto.String(fmt.Sprintf("client-%d", rng.IntN(1000)))}
	for i := range n {
		rr := &pb.ResourceRequest{
			ResourceId: proto.String(fmt.Sprintf("r%d-%x", i, rng.Uint64())),
			Priority:   proto.Int64(rng.Int64N(7) - 3),
			Wants:      proto.Float64([]float64{0, 1.5, rng.Float64() * 1e6, math.Inf(1), math.NaN(), -2}[rng.IntN(6)]),
		}
		if i%7 == 0 {
			rr.ResourceId = proto.String("") // empty and non-UTF-8 ids are legal proto2
		}
		if i%5 == 0 {
			rr.ResourceId = proto.String("\xff\xfe")
		}
		if rng.IntN(3) == 0 {
			rr.Has = &pb.Lease{ExpiryTime: proto.Int64(rng.Int64()), RefreshInterval: proto.Int64(-rng.Int64N(10)), Capacity: proto.Float64(rng.Float64())}
		}
		req.Resource = append(req.Resource, rr)
	}
	return req
}

// check decodes b with the server's decoder and with proto, and fails
// unless the results agree: both errors, or equal messages. It returns
// whether the fast path took it.
func check(t *testing.T, b []byte) bool {
	t.Helper()
	want := &pb.GetCapacityRequest{}
	wantErr := proto.Unmarshal(b, want)
	got := &pb.GetCapacityRequest{}
	fast := decodeGetCapacity(b, got)
	if fast && wantErr != nil {
		t.Fatalf("decoded %x, which proto refuses (%v), as %v", b, wantErr, got)
	}
	if fast && !proto.Equal(got, want) {
		t.Fatalf("decoded %x as %v, proto as %v", b, got, want)
	}
	// Through the codec, as gRPC calls it.
	viaCodec := &pb.GetCapacityRequest{}
	err := codec{encoding.GetCodecV2(protocodec.Name)}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, viaCodec)
	if (err == nil) != (wantErr == nil) || (err == nil && !proto.Equal(viaCodec, want)) {
		t.Fatalf("codec decoded %x as %v (%v), proto as %v (%v)", b, viaCodec, err, want, wantErr)
	}
	return fast
}

func TestDecodeGetCapacityAgreesWithProto(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fast := 0
	for round := range 300 {
		b, err := proto.Marshal(randomRequest(rng, rng.IntN(40)))
		if err != nil {
			t.Fatal(err)
		}
		if check(t, b) {
			fast++
		}
		// Mangled: truncated, a byte changed, a field appended twice.
		check(t, b[:rng.IntN(len(b)+1)])
		if len(b) > 0 {
			c := append([]byte(nil), b...)
			c[rng.IntN(len(c))] ^= byte(1 + rng.IntN(255))
			check(t, c)
		}
		check(t, append(append([]byte(nil), b...), b...))
		_ = round
	}
	if fast < 300 {
		t.Errorf("the fast path took %d of 300 well-formed requests, want all", fast)
	}
	// Unknown fields and partial messages go to proto.
	withUnknown := append(mustMarshal(t, randomRequest(rng, 3)), 0x28, 0x01) // field 5, varint 1
	if check(t, withUnknown) {
		t.Error("the fast path took a request with an unknown field")
	}
	partial := &pb.GetCapacityRequest{ClientId: proto.String("c"), Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r")}}}
	b, _ := proto.MarshalOptions{AllowPartial: true}.Marshal(partial)
	if check(t, b) {
		t.Error("the fast path took a resource without its required fields")
	}
}

func FuzzDecodeGetCapacity(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5 {
		b, _ := proto.Marshal(randomRequest(rng, 4))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { check(t, b) })
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A flood request's decode: 1,000 resources, no has.
func BenchmarkDecodeGetCapacity(b *testing.B) {
	req := &pb.GetCapacityRequest{ClientId: proto.String("flood")}
	for i := range 1000 {
		req.Resource = append(req.Resource, &pb.ResourceRequest{ResourceId: proto.String(fmt.Sprintf("flood-%07d", i)),
			Priority: proto.Int64(0), Wants: proto.Float64(1)})
	}
	data := mustMarshal(b, req)
	b.Run("proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m := &pb.GetCapacityRequest{}
			if err := proto.Unmarshal(data, m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("server", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m := &pb.GetCapacityRequest{}
			if !decodeGetCapacity(data, m) {
				b.Fatal("not decoded")
			}
		}
	})
}

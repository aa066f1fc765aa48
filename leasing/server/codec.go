package server

import (
	"math"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// Codec returns the gRPC server option Serve uses: gRPC's proto codec,
// with a decoder of its own for GetCapacityRequest. A server registered
// on a gRPC server of the caller's with Register can pass it too.
//
// proto.Unmarshal allocates per resource of a request: the resource, its
// id, and each optional scalar (proto2 fields are pointers), four to
// seven allocations a resource. A flood of 1,000-resource requests is
// refused by the handler after a lookup or two, but decoding it came
// first and took a third of the server's CPU. This decoder makes the
// same message with a few allocations per request (the resources, the
// scalars and the ids each in one block) and falls back to proto for
// anything it does not expect (unknown or repeated fields, a missing
// required field, a malformed encoding), so the result is always
// proto.Unmarshal's.
func Codec() grpc.ServerOption {
	return grpc.ForceServerCodecV2(codec{encoding.GetCodecV2(protocodec.Name)})
}

type codec struct{ encoding.CodecV2 }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*pb.GetCapacityRequest); ok {
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		ok := decodeGetCapacity(buf.ReadOnlyData(), m)
		buf.Free()
		if ok {
			return nil
		}
		m.Reset()
	}
	return c.CodecV2.Unmarshal(data, v)
}

// Field numbers of the messages decodeGetCapacity reads (doorman.proto).
const (
	fieldClientID     = 1 // GetCapacityRequest.client_id
	fieldResource     = 2 // GetCapacityRequest.resource
	fieldResourceID   = 1 // ResourceRequest.resource_id
	fieldPriority     = 2 // ResourceRequest.priority
	fieldHas          = 3 // ResourceRequest.has
	fieldWants        = 4 // ResourceRequest.wants
	fieldLeaseExpiry  = 1 // Lease.expiry_time
	fieldLeaseRefresh = 2 // Lease.refresh_interval
	fieldLeaseCap     = 3 // Lease.capacity
)

// decodeGetCapacity decodes b into m (empty) and reports whether it could;
// when it cannot, m is to be reset and decoded by proto.
func decodeGetCapacity(b []byte, m *pb.GetCapacityRequest) bool {
	// First pass: count the resources and check the top level.
	n := 0
	clientID := false
	for rest := b; len(rest) > 0; {
		num, typ, k := protowire.ConsumeTag(rest)
		if k < 0 || typ != protowire.BytesType {
			return false
		}
		rest = rest[k:]
		_, k = protowire.ConsumeBytes(rest)
		if k < 0 {
			return false
		}
		rest = rest[k:]
		switch num {
		case fieldClientID:
			if clientID {
				return false
			}
			clientID = true
		case fieldResource:
			n++
		default:
			return false
		}
	}
	if !clientID {
		return false // required: let proto say so
	}
	// One string holds every id: the ids and the client id are slices of
	// it.
	all := string(b)
	var (
		rrs    = make([]pb.ResourceRequest, n)
		ptrs   = make([]*pb.ResourceRequest, n)
		ids    = make([]string, n)
		ints   = make([]int64, n)
		floats = make([]float64, n)
		// The leases (has) and their scalars, allocated at the first:
		// most requests carry one per resource or none.
		ls       []pb.Lease
		lsInts   []int64
		lsFloats []float64
	)
	off := 0 // of rest in b
	i, j := 0, 0
	for rest := b; len(rest) > 0; {
		num, _, k := protowire.ConsumeTag(rest)
		rest, off = rest[k:], off+k
		v, k := protowire.ConsumeBytes(rest)
		start := off + k - len(v)
		rest, off = rest[k:], off+k
		if num == fieldClientID {
			s := all[start : start+len(v)]
			m.ClientId = &s
			continue
		}
		r := &rrs[i]
		has, ok := decodeResource(v, all[start:start+len(v)], r, &ids[i], &ints[i], &floats[i])
		if !ok {
			return false
		}
		if has != nil {
			if ls == nil {
				ls, lsInts, lsFloats = make([]pb.Lease, n-i), make([]int64, 2*(n-i)), make([]float64, n-i)
			}
			if !decodeLease(has, &ls[j], &lsInts[2*j], &lsInts[2*j+1], &lsFloats[j]) {
				return false
			}
			r.Has = &ls[j]
			j++
		}
		ptrs[i] = r
		i++
	}
	m.Resource = ptrs
	return true
}

// decodeResource decodes the ResourceRequest b (s is the same bytes as a
// string) into r, its id into *id, priority into *prio and wants into
// *wants, and returns its has field's encoding, if any, for the caller to
// decode, and whether it could.
func decodeResource(b []byte, s string, r *pb.ResourceRequest, id *string, prio *int64, wants *float64) (has []byte, ok bool) {
	var seenID, seenPrio, seenWants bool
	off := 0
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return nil, false
		}
		b, off = b[k:], off+k
		switch {
		case num == fieldResourceID && typ == protowire.BytesType && !seenID:
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return nil, false
			}
			*id = s[off+k-len(v) : off+k]
			r.ResourceId = id
			seenID = true
			b, off = b[k:], off+k
		case num == fieldPriority && typ == protowire.VarintType && !seenPrio:
			v, k := protowire.ConsumeVarint(b)
			if k < 0 {
				return nil, false
			}
			*prio = int64(v)
			r.Priority = prio
			seenPrio = true
			b, off = b[k:], off+k
		case num == fieldWants && typ == protowire.Fixed64Type && !seenWants:
			v, k := protowire.ConsumeFixed64(b)
			if k < 0 {
				return nil, false
			}
			*wants = math.Float64frombits(v)
			r.Wants = wants
			seenWants = true
			b, off = b[k:], off+k
		case num == fieldHas && typ == protowire.BytesType && has == nil:
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return nil, false
			}
			has = v
			if has == nil {
				has = []byte{} // present, empty: the caller finds it incomplete
			}
			b, off = b[k:], off+k
		default:
			return nil, false // unknown, repeated or mistyped: proto's to judge
		}
	}
	return has, seenID && seenPrio && seenWants
}

// decodeLease decodes the Lease b into l.
func decodeLease(b []byte, l *pb.Lease, expiry, refresh *int64, capacity *float64) bool {
	var seenExpiry, seenRefresh, seenCap bool
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return false
		}
		b = b[k:]
		switch {
		case num == fieldLeaseExpiry && typ == protowire.VarintType && !seenExpiry:
			v, k := protowire.ConsumeVarint(b)
			if k < 0 {
				return false
			}
			*expiry, l.ExpiryTime, seenExpiry = int64(v), expiry, true
			b = b[k:]
		case num == fieldLeaseRefresh && typ == protowire.VarintType && !seenRefresh:
			v, k := protowire.ConsumeVarint(b)
			if k < 0 {
				return false
			}
			*refresh, l.RefreshInterval, seenRefresh = int64(v), refresh, true
			b = b[k:]
		case num == fieldLeaseCap && typ == protowire.Fixed64Type && !seenCap:
			v, k := protowire.ConsumeFixed64(b)
			if k < 0 {
				return false
			}
			*capacity, l.Capacity, seenCap = math.Float64frombits(v), capacity, true
			b = b[k:]
		default:
			return false
		}
	}
	return seenExpiry && seenRefresh && seenCap
}

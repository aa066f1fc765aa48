package tframe

import (
	"bytes"
	"testing"
)

func TestCutRoutingDelegate(t *testing.T) {
	hs := func(rd string) [][2]string {
		h := [][2]string{{"as", "raw"}, {"cn", "client"}}
		if rd != "" {
			h = append(h, [2]string{"rd", rd})
		}
		return append(h, [2]string{"sk", "key"})
	}
	req := func(rd string) []byte {
		return AppendCallReq(nil, 9, Call{TTL: 100, Service: "kv", Headers: hs(rd), Fragment: okArgs})
	}
	for _, tc := range []struct{ in, want string }{
		{"relay\x001", "relay"},
		{"\x004", ""}, // nothing left: no header at all
		{"a\x00b\x00c", "a"},
	} {
		got, cut := CutRoutingDelegate(req(tc.in), 0)
		if !cut {
			t.Errorf("%q: not cut", tc.in)
			continue
		}
		if want := req(tc.want); !bytes.Equal(got, want) {
			t.Errorf("%q: got\n%x\nwant\n%x", tc.in, got, want)
		}
		if _, err := Parse(got); err != nil {
			t.Errorf("%q: the cut frame does not parse: %v", tc.in, err)
		}
	}
	for _, f := range [][]byte{
		req("relay"), req(""),
		AppendCallRes(nil, 9, Call{Headers: [][2]string{{"rd", "x\x00y"}}, Fragment: okArgs}),
		req("relay\x001")[:20], // not whole
	} {
		if got, cut := CutRoutingDelegate(f, 0); cut || &got[0] != &f[0] {
			t.Errorf("%x: cut, or not returned as it was", f)
		}
	}
	f := req("relay")
	if n := testing.AllocsPerRun(100, func() { CutRoutingDelegate(f, 0) }); n != 0 {
		t.Errorf("an unmarked frame costs %v allocations", n)
	}
}

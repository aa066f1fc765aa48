package criticality

import (
	"context"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/internal/classctx"
)

func TestParseAndString(t *testing.T) {
	for _, c := range []Class{Sheddable, SheddablePlus, Critical, CriticalPlus} {
		got, err := Parse(c.String())
		if err != nil || got != c {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.String(), got, err, c)
		}
		if !c.Valid() {
			t.Errorf("%v is not Valid", c)
		}
	}
	if !(Sheddable < SheddablePlus && SheddablePlus < Critical && Critical < CriticalPlus) {
		t.Error("the classes do not rise in order")
	}
	for _, s := range []string{"", "CRITICAL", "unset", "critical-plus"} {
		if _, err := Parse(s); err == nil || !strings.Contains(err.Error(), "critical_plus, critical, sheddable_plus or sheddable") {
			t.Errorf("Parse(%q): error %v, want one naming the classes", s, err)
		}
	}
	if Class(0).Valid() || Class(5).Valid() || Class(0).String() != "unset" || Class(7).String() != "Class(7)" {
		t.Error("invalid classes: Valid or String wrong")
	}
}

func TestContext(t *testing.T) {
	ctx := context.Background()
	if got := FromContext(ctx); got != Critical {
		t.Errorf("no class: %v, want critical", got)
	}
	in := classctx.WithInbound(ctx, uint8(SheddablePlus))
	if got := FromContext(in); got != SheddablePlus {
		t.Errorf("inbound class: %v", got)
	}
	if got := FromContext(WithClass(in, CriticalPlus)); got != CriticalPlus {
		t.Errorf("a set class over the inbound one: %v", got)
	}
	if got := FromContext(WithClass(WithClass(in, CriticalPlus), 0)); got != SheddablePlus {
		t.Errorf("a cleared class: %v, want the inbound one", got)
	}
}

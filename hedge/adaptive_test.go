package hedge

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/codes"
)

func TestAdaptiveValidate(t *testing.T) {
	ok := Adaptive{Quantile: 0.95, Window: 100, Floor: time.Millisecond, Cap: time.Second, Budget: 0.1}
	bad := []struct {
		field string
		mod   func(*Adaptive)
	}{
		{"quantile", func(a *Adaptive) { a.Quantile = 1 }},
		{"window", func(a *Adaptive) { a.Window = 5 }},
		{"window", func(a *Adaptive) { a.Window = MaxWindow + 1 }}, // a Channel would hold that many
		{"floor", func(a *Adaptive) { a.Floor = 0 }},
		{"cap", func(a *Adaptive) { a.Cap = time.Microsecond }},
		{"budget", func(a *Adaptive) { a.Budget = 2 }},
	}
	for _, tt := range bad {
		field, mod := tt.field, tt.mod
		a := ok
		mod(&a)
		p := Policy{MaxAttempts: 2, NonFatalCodes: codes.NewSet(codes.Busy), Adaptive: &a}
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), "Policy.Adaptive."+strings.ToUpper(field[:1])+field[1:]) {
			t.Errorf("%s: %v", field, err)
		}
	}
}

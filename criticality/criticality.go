// Package criticality names how much a call matters when there is not
// room for every call: Google's four criticality classes, from
// CriticalPlus (the requests a user waits on, whose loss is an outage) to
// Sheddable (prefetches, batch work, anything that can be dropped and
// retried later).
//
// A Sluice client sends each call's class to the server; a Sluice server
// admits higher classes first when it sheds load, answers Busy naming the
// class it refuses, and its handlers' outbound calls made with their
// context carry the inbound call's class unless something sets another.
// A call with no class, and every call from a peer that sends none (plain
// tchannel-go, yab), is Critical.
//
// Where a call's class comes from, first found wins: WithClass on the
// call's context; the method's "criticality" in the Client's service
// config; the Client's channel.WithCriticality; the class of the inbound
// call whose handler makes it; Critical.
package criticality

import (
	"context"
	"fmt"

	"github.com/sluice-rpc/sluice/internal/classctx"
)

// Class is a criticality class. Higher classes matter more: classes
// compare with < and >. The zero Class is no class (a call without one is
// Critical).
type Class uint8

// The four classes, lowest first.
const (
	// Sheddable work can be dropped under any overload and retried later.
	Sheddable Class = iota + 1
	// SheddablePlus work is dropped under overload; partial unavailability
	// is expected.
	SheddablePlus
	// Critical is the default: serving errors are visible to users.
	Critical
	// CriticalPlus is the most important traffic; it is refused only when
	// it alone is over capacity.
	CriticalPlus
)

var names = [...]string{Sheddable: "sheddable", SheddablePlus: "sheddable_plus", Critical: "critical", CriticalPlus: "critical_plus"}

// String returns the class's name as Parse reads it ("critical_plus",
// "critical", "sheddable_plus", "sheddable"); the zero Class is "unset".
func (c Class) String() string {
	if c == 0 {
		return "unset"
	}
	if int(c) < len(names) {
		return names[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Parse returns the class named s, spelled as String spells it, or an
// error naming the four.
func Parse(s string) (Class, error) {
	for c, n := range names {
		if n != "" && n == s {
			return Class(c), nil
		}
	}
	return 0, fmt.Errorf("criticality: unknown class %q: want critical_plus, critical, sheddable_plus or sheddable", s)
}

// Valid reports whether c is one of the four classes.
func (c Class) Valid() bool { return c >= Sheddable && c <= CriticalPlus }

// WithClass returns a copy of ctx whose calls carry class c: it overrides
// every other source of a call's class (see the package comment). A
// Class that is not Valid clears the setting.
func WithClass(ctx context.Context, c Class) context.Context {
	if !c.Valid() {
		c = 0
	}
	return classctx.WithSet(ctx, uint8(c))
}

// FromContext returns the class ctx gives its calls: the one WithClass
// set, else the class of the inbound call a handler serves with ctx (the
// class its client sent, within what the server trusts that caller with),
// else Critical. It does not know a Client's configured classes.
func FromContext(ctx context.Context) Class {
	set, inbound := classctx.Get(ctx)
	if set != 0 {
		return Class(set)
	}
	if inbound != 0 {
		return Class(inbound)
	}
	return Critical
}

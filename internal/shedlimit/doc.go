// Package shedlimit is the machinery of package shed: the adaptive
// concurrency limit, Limiter, that a Channel's server side runs for
// channel.ShedConfig.Adaptive (and, with a fixed limit, for
// channel.ShedConfig.MaxInFlight), shared by the shedding simulator
// (tools/internal/sim/shedsim, `sluice-lab sim shed`) and the tests, which
// run the very same code. Package shed's doc describes the model, its
// numbers and the classes and callers rules; this one how the code is
// called.
//
// New makes a Limiter from a shed.Config, its zero fields taking the
// shed.Default* values; it refuses a Config that fails
// shed.Config.Validate. Acquire admits a request first come, first served;
// AcquireFor knows its criticality class and its caller, and admits by the
// classes and callers rules. Each returns a Token, given back to Release
// when the request is done (its latency recorded) or to Cancel when it
// never ran. A refused request is answered busy with Pushback, and, after
// AcquireFor, naming Refusing, the highest class refused wholesale. Limit,
// InFlight, Level and State read the Limiter, for load reports, status
// pages and simulations.
//
// A Limiter is safe for concurrent use. Acquire is one atomic add;
// Release takes a short mutex to add the latency to the window. Neither
// allocates. Far from the limit (in flight within the limit less its
// reserve and a quarter) AcquireFor costs what Acquire does and two atomic
// loads (the level and the reserve), and an atomic add more for a request
// of the boundary class: no mutex, no caller lookup, no allocation (about
// 75 ns with Release, as Acquire). Near the limit it takes a short mutex.
// `go test -bench . ./internal/shedlimit` measures these.
//
// Times come from an injected clock.Clock (shed.Config.Clock), and the
// AcquireAt, AcquireForAt and ReleaseAt variants take them as arguments,
// so the simulator and the tests drive the very code a server runs.
package shedlimit

// Package event is the discrete-event core the simulators share: a queue
// that hands back events in the order they are due, and a loop that runs
// scheduled functions on a fake clock.
//
// Events due at the same moment come out in the order they were pushed, so
// a simulation that schedules the same events gets them back in the same
// order on every run: its result is a function of its inputs (and its
// seed), never of how a heap happened to break a tie.
//
// Queue is for simulations that keep their own time and pass it to the code
// they drive (ratesim's clients and server, shedsim's worker pool); Loop is
// for those that drive code reading a clock.Fake (doormansim's leasing
// clients and servers). busysim steps through whole seconds and has no
// events to order; shedsim's processor-sharing model orders requests by
// the work they still need, not by time, and keeps its own heap for them.
package event

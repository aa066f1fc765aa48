// Package event is the discrete-event core the simulators share: a Queue
// that hands back events in the order they are due, ties in the order
// pushed (so runs replay exactly), and a Loop that runs scheduled
// functions on a clock.Fake.
package event

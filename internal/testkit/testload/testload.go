// Package testload keeps calls going on a few goroutines while a test
// changes the world under them (peers come and go, servers shut down,
// etcd dies), counting the calls and their failures, so that the test can
// then say how many failed and show the first failure.
package testload

import (
	"sync"
	"sync/atomic"
)

// Loop runs call over and over on its goroutines until Stop.
type Loop struct {
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	calls    atomic.Int64
	failed   atomic.Int64
	mu       sync.Mutex
	first    error
}

// Start starts workers goroutines, each calling call in a loop. call
// bounds its own call (a deadline).
func Start(workers int, call func() error) *Loop {
	l := &Loop{stop: make(chan struct{})}
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				err := call()
				l.calls.Add(1)
				if err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					if l.first == nil {
						l.first = err
					}
					l.mu.Unlock()
				}
			}
		}()
	}
	return l
}

// Calls returns the calls made so far.
func (l *Loop) Calls() int64 { return l.calls.Load() }

// Failed returns the calls that failed so far.
func (l *Loop) Failed() int64 { return l.failed.Load() }

// FirstErr returns the first failure, or nil.
func (l *Loop) FirstErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

// Stop stops the goroutines and waits for their last calls. Calling it
// again does nothing.
func (l *Loop) Stop() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// Package balance configures how a Channel shares a service's calls among
// its peers (Config, from the service config's balancing section), and
// states the rules, all in one place: the choice between equal peers, the
// weighted lottery, slow peers and their probes, slow start and its cold
// rule, outlier ejection, and shard keys on a consistent-hash ring with
// bounded loads. The rules' arithmetic is the Channel's own, pure
// functions of their inputs in one internal package that the Channel's
// peer list, the simulators and the tests all run; Config is what a user
// sets.
//
// Slow start. A peer that becomes ready while its list already serves
// (added by discovery, or back from a transient failure) does not take a
// full share at once: its weight is multiplied by
//
//	max(MinWeight, (time since ready / Window) ^ (1 / Aggression))
//
// until Window has passed, as Envoy defines it (defaults: 10 s, 1, 10%).
// A list whose peers are all new (a client starting) applies none. Within its window a peer answering over twice as slowly as
// the others, and 1 ms slower, is cold: held to probes until it warms up
// (the cold rule).
//
// Slow peers. A peer whose fresh latency estimate is more than 5 times the
// lowest of the other ready peers', and 5 ms above it, is slow: it
// is chosen once every 2 s as a probe, so that its recovery is seen,
// and otherwise only when no other peer takes the call.
//
// Weights. A list whose peers' effective weights differ (discovery's
// weights, or a peer in slow start) chooses a peer at random with
// probability in proportion to w / (1 + pending / w), w being its
// effective weight relative to the mean weight: its weight, discounted by
// its calls pending per unit of weight. Under light load calls split in
// proportion to the weights; under load, a peer with more calls pending
// than its weight warrants gets fewer. (Envoy's least-request balancer
// uses w / (pending + 1), which under load gives a heavy peer less than
// its weight's share: a server with four times the workers has fewer than
// four times the calls queued at the same utilization.) Equal weights
// keep the strict rule: fewest pending calls, then a latency estimate
// under half the other's and over 1 ms below it, ties broken at random.
//
// Outlier ejection. A peer that answers UNEXPECTED or NETWORK errors
// ConsecutiveErrors times in a row (default 5; an OK, BUSY or BAD_REQUEST
// answer breaks the run, a timeout, cancellation or DECLINED neither
// counts nor breaks it) is ejected: not chosen for
// BaseTime x k (default 30 s), k being 1 for its first ejection and one
// more for each ejection that follows within BaseTime of the last one
// ending, capped at MaxTime (default 300 s), unless the failure is
// shared: while every other ready peer that has answered (and is not
// ejected) last answered such an error too, none is ejected (ejecting one
// would only move its calls onto peers that fail alike). At most
// MaxPercent of the list's peers (default 10%, and always at least one)
// are ejected at once; when fewer than PanicThreshold percent (default
// 50%) of the peers are ready and not ejected, ejections are ignored, so
// that a fleet with many failing peers keeps using all of them rather than
// overloading a few.
//
// Shard keys. A call carrying a shard key goes to the key's home on a
// consistent-hash ring over the list's peers (each peer holds points in
// proportion to its weight, 160 for a peer of average weight), unless the
// home already has as many calls in flight as its capacity,
// ceil(BalanceFactor x (m + 1) x w / W), m being the calls in flight to
// all peers, w the home's weight and W the sum of the weights (Google's consistent hashing with bounded loads, with
// BalanceFactor c = 1.25 by default). Then the call, and any retry or
// hedge, walks on to the next distinct peers on the ring.
package balance

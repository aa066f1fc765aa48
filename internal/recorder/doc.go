// Package recorder hands out the metrics a Channel reports per call, per
// peer and per connection, under the names, tags, buckets and caps that
// package stats defines (its doc comment is the reference for each
// metric). It is the Channel's machinery, shared by package channel and
// the peer pool and list (internal/pool, internal/peerlist); a user sees
// only the metrics, through the tally.Scope given to channel.WithScope.
//
// The Recorder makes each tagged scope and metric once and caches it, so
// recording a call, its latency and its attempts allocates nothing. A
// Recorder made with a nil scope hands out metrics that do nothing.
//
// It hands out a server's metrics too, per registered method and caller
// (Recorder.Server), under Sluice's names and, if asked, tchannel-go's.
//
// Series are capped, by one mechanism (capped): the first
// stats.MaxPeerSeries (service, host:port) pairs, and as many
// connections, get series of their own, later ones share
// stats.PeerOther's; the first stats.MaxCallerSeries callers of each
// method get theirs, later ones share stats.CallerOther's.
package recorder

// Package etcd finds peers in etcd v3 and registers servers there, in the
// key and value layout of etcd's own go.etcd.io/etcd/client/v3/naming/endpoints,
// so that gRPC programs using etcd's naming and Sluice programs can share a
// prefix:
//
//	key:   PREFIX/<anything>      (a Registrar writes PREFIX/<host:port>)
//	value: {"Op":0,"Addr":"host:port","Metadata":{"weight":3,...}}
//
// Op may be absent and is ignored, as etcd's own readers ignore it; a
// peer's weight is Metadata.weight, a JSON number, when Metadata is an
// object.
//
// # Resolver
//
// A Resolver reads the prefix (a Get per 16 keys, all at the first one's
// revision), reports the whole set, then
// watches the prefix from the revision after the Get's, applying each
// event to the set and reporting it again after each watch response. It
// never trusts a watch that may have missed something: it reads the
// prefix afresh (a resync) and watches again from the new revision when
//
//   - the watch fails or closes (etcd unreachable, a member without a
//     leader: the watch requires one, so that a member cut off from its
//     cluster is not followed into staleness);
//   - etcd has compacted the revisions the watch had not reached yet;
//   - etcd does not answer a progress request on the watch within
//     CheckInterval: every CheckInterval the resolver asks for the watch's
//     progress (clientv3's RequestProgress), and a watch whose stream is
//     stuck, or waits on a reconnecting client, is given up after at most
//     two intervals;
//   - the store's revision goes backwards: an answer on the watch whose
//     header revision is below the highest revision seen means that etcd
//     came back with another store (a new data directory), whose
//     revisions start again from 1. A watch resumed from the old revision
//     would otherwise wait, silently, until the new store caught up;
//   - every ResyncInterval, whatever happened: the bound for the one case
//     the checks above cannot see, a store replaced within one
//     CheckInterval whose revision had already passed the highest one seen.
//
// So once the client reaches etcd again after an outage, or reaches a
// replaced store, the set reported follows etcd's contents within
// 2*CheckInterval (10 s by default) and one read; in the last case above,
// within ResyncInterval (5 min by default). When the client reaches etcd
// again is the client's affair: gRPC's connection backoff waits up to
// 120 s by default, which clientv3.Config.DialOptions
// (grpc.WithConnectParams) may shorten. A read
// that fails is reported as an error and tried again with backoff; the
// the Channel's Client keeps the last good set meanwhile. A value that is not
// an endpoint's JSON, or has no valid Addr, is left out and reported as an
// error naming its key, after the rest of the set: one bad key never
// freezes the others. When no key holds a peer, only the error is
// reported: the registry's answer is unusable, not an empty service. etcd's own gRPC resolver stops following its
// prefix after a watch error; this one does not.
//
// # Bounds
//
// Anyone who can write under the prefix can write anything, so the
// Resolver bounds what it reads before it believes it: the number of
// keys (MaxKeys, checked from the first page's count, before any value
// is read, and as the watch adds keys), the size of each key and value
// (MaxValueSize: a value over it is left out without being decoded, as a
// bad value is), and the bytes kept in all (MaxBytes). A prefix over
// MaxKeys or MaxBytes is a failure wrapping ErrOverCap and naming the
// bound: the Resolver keeps nothing of it, the Channel's Client keeps
// the last good set, and a client that never had one gets no peers and
// an error naming the cap (calls that wait for peers report it). A read
// holds at most one page (16 keys) of values it has not checked.
//
// # Registrar
//
// A Registrar announces a server: Register returns at once and a loop of
// its own grants a lease of TTL, writes PREFIX/<host:port> under it and
// keeps the lease alive. When etcd stops renewing it (unreachable for
// longer than the TTL, restarted without it, the lease expired during a
// partition) the loop grants a new lease and writes the key again, with
// backoff between failures, so the address is back within about the TTL
// of etcd answering again. A server cut off from etcd keeps serving: no
// failure reaches the caller, only the Registration's State and the
// metrics. Deregister stops the loop, deletes the key (if it is still
// under this registration's lease) and revokes the lease.
//
// Importing this package links etcd's client; package discovery and the
// Channel do not.
package etcd

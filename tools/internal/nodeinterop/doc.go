// Package nodeinterop tests Sluice against tchannel-node peers, both ways: a
// Node client calling a Sluice server, and a Sluice client calling a Node
// server, with raw and JSON calls. Sluice's additions on the wire (the
// signal carrier negotiated at the handshake, the criticality and retry mark
// in the routing delegate, the notes in Busy messages, load reports, deadline
// refusals) are for Sluice peers; these tests show a Node peer works as it
// did with plain tchannel-go.
//
// The Node peers are the scripts server.js and client.js in this folder,
// run with the tchannel npm package that package.json and package-lock.json
// pin: `npm ci --prefix tools/internal/nodeinterop` installs it. Without
// `node` or the installed packages the tests skip, unless the environment
// has SLUICE_NODE_INTEROP set (CI sets it), when they fail.
package nodeinterop

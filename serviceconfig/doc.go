// Package serviceconfig reads Sluice's JSON service config: the shape of
// gRPC's service config as gRPC's retry design (gRFC A6, "gRPC Retry
// Design", section "Integration with Service Config") uses it, with
// TChannel code names, extended with Sluice's own sections.
//
//	{
//	  "methodConfig": [{
//	    "name": [{"service": "kv", "method": "Get"}, {"service": "search"}],
//	    "retryPolicy": {
//	      "maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s",
//	      "backoffMultiplier": 2, "retryableStatusCodes": ["BUSY"]
//	    },
//	    "timeout": "1s",
//	    "waitForReady": false
//	  }],
//	  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1},
//	  "balancing": [{"services": ["kv"], "slowStart": {...}, "outlierEjection": {...}}]
//	}
//
// A method config names the methods it applies to; a name without a method
// applies to every method of its service, and a name with neither service
// nor method applies to every call.
//
// Names are TChannel names, as calls spell them: service is the TChannel
// service the servers register under, method the TChannel method name
// (arg1). A TChannel Thrift method is named "Service::method", the Thrift
// service of the IDL, two colons and the method, so a Thrift call to
// KeyValue.Get on the TChannel service "keyvalue" is named
//
//	{"service": "keyvalue", "method": "KeyValue::Get"}
//
// and a name {"service": "keyvalue", "method": "Get"} matches no Thrift
// call. Nothing here can tell the two apart (both are valid names); a
// channel.Channel reports a configured name that no call has used in its
// Debug state (unmatchedMethods), and logs once the first call whose method
// differs from a configured name only in its "Service::" prefix. Lookup prefers the exact (service,
// method), then (service, ""), then ("", ""). Each method config has a
// retryPolicy or a hedgingPolicy or neither, never both. waitForReady, as in
// gRPC, makes calls wait for a ready peer until their deadline when every
// peer is in transient failure, instead of failing at once with UNAVAILABLE.
//
// The "balancing" section configures how each service's calls are shared
// among its peers (slow start, outlier ejection, shard keys' bounded load);
// see Balancing for its fields.
//
// Durations are proto3 JSON strings: decimal seconds with an "s" suffix
// ("0.1s", "1.5s", at most nine decimal places). Status codes are TChannel
// code names in upper case (BUSY, DECLINED, UNEXPECTED, TIMEOUT, NETWORK,
// CANCELLED, BAD_REQUEST, PROTOCOL). Field names are matched exactly, in
// lowerCamelCase.
//
// Parse validates everything with gRFC A6's rules and rejects an invalid
// config with an *Error naming the field path and the rule
// ("serviceconfig: methodConfig[0].retryPolicy.maxAttempts is 1, must be
// >= 2"); it never adjusts a value to make it valid. Unknown fields are
// rejected too; so are the "busyThrottling" and "lease" sections, which
// no Channel reads from a service config (the error names what to use:
// channel.WithBusyConfig, channel.WithLease). maxAttempts above the client-side cap (5 by default) is
// not an error: gRFC A6 says such values are treated as the cap,
// which retry.Policy.Attempts and hedge.Policy.Attempts do.
package serviceconfig

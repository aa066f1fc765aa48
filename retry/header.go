package retry

// AttemptsHeader is the application header that carries, on a retried or
// hedged attempt of a JSON or Thrift call, the number of attempts made
// before it (Attempt.Number), as gRPC's retry design names it. It is absent
// on the first attempt; handlers can read it. A server's answer about
// retrying travels back in PushbackHeader.
const AttemptsHeader = "previous-rpc-attempts"

// Package pacing is what a user sees of rate-limit pacing: how a client
// configures it, what a call fails with when a server's quota is spent,
// and how a server announces its quota.
//
// A client paces the calls of a Client with
// channel.WithPacing(channel.PacingConfig{Pacer: pacing.Config{...}}): it
// follows Aliyun's throttle-aware backoff (the Alibaba Cloud SDK's
// "Advanced backoff mechanism based on the throttling policy"), holds back
// new calls to a dimension whose quota is spent until its window ends
// (Aliyun's "disable requests during throttling"), and sleeps before calls
// as one of the client rate throttling strategies of Heroku's article "A
// Fast Car Needs Good Brakes: How We Added Client Rate Throttling to the
// Platform API Gem" says (Strategy; Config configures it), or as Sluice's
// reserve strategy, which beats the article's winner in simulation (see
// tools/benchmarks/README.md). A call refused because the server's window
// outlasts its maximum delay or deadline fails with a *WindowError, which
// matches ErrRateLimited.
//
// A server announces its quota in the headers of its answers: the
// Aliyun headers X-RateLimit-User-API and X-RateLimit-User
// ("Remain:1,Limit:2,Time:1000,TimeLeft:122,Reset:1637835220000"), the
// RateLimit-Remaining, RateLimit-Limit and RateLimit-Reset headers and
// Retry-After (the Header* constants). A Quota counts a fixed-window quota
// and gives the Signal to send back; SetHeaders writes it. A client that
// sets HeaderMode: ModeDebug (channel.PacingConfig.Debug) asks an
// Aliyun-style server for quota headers on every answer.
//
// The client side (parsing the headers, the pacers, the throttling
// windows) is the Channel's own; the simulator of "sluice-lab sim ratelimit",
// the tests and the Channel run the very same code.
package pacing

// Package ratelimit is the client side of package pacing: the machinery a
// Channel runs for a Client configured with channel.WithPacing, shared by
// the rate-limit simulator (tools/internal/sim/ratesim, "sluice-lab sim
// ratelimit") and the tests, which run the very same code.
//
// It implements Aliyun's throttle-aware backoff (the Alibaba Cloud SDK's
// "Advanced backoff mechanism based on the throttling policy") and the
// client rate throttling strategies of Heroku's article "A Fast Car Needs
// Good Brakes: How We Added Client Rate Throttling to the Platform API
// Gem". It knows nothing of TChannel. Time is passed in or comes from an
// injected clock, and randomness from an injected source.
//
// The pieces, one file each:
//
//   - Signals (signal.go): ParseHeaders reads the quota headers of a
//     response (X-RateLimit-User-API, X-RateLimit-User, RateLimit-Remaining,
//     RateLimit-Limit, RateLimit-Reset, Retry-After) into a pacing.Signal.
//     Malformed headers are ignored and reported as errors matching
//     ErrMalformedHeader, for a metric; parsing never panics and, on
//     well-formed input, never allocates. Throttled, Wait and
//     RemainingFraction read a Signal as a client does.
//   - Throttle-aware backoff (windows.go): Delay is Aliyun's retry wait,
//     max(TimeLeft, EqualJitter backoff), and whether it exceeds the
//     policy's maximum delay. Windows remembers throttling windows per
//     dimension ("service", "service::method") so that new calls wait until
//     a window ends, or fail at once with a *pacing.WindowError
//     (pacing.ErrRateLimited) when the wait would exceed their maximum
//     delay or deadline.
//   - Pacers (pacer.go, reserve.go): the strategies of Heroku's study
//     behind one interface, Pacer, made by New from a Config: a null
//     pacer, exponential backoff, and exponential increase with gradual,
//     proportional or proportional-remaining decrease; plus Sluice's
//     reserve pacer, which beats the article's winner
//     (proportional-remaining decrease) in simulation (see
//     tools/benchmarks/README.md).
//
// # How a call uses it
//
// Before sending an attempt to service::method, a call waits out the
// recorded windows of both dimensions, then the pacer's sleep:
//
//	windows.Wait(ctx, ratelimit.ServiceKey(svc), maxDelay)
//	windows.Wait(ctx, ratelimit.MethodKey(svc, m), maxDelay)
//	sleep(ctx, pacer.Before(clk.Now()))   // first attempt only
//
// After the response it parses the headers and tells the pacer:
//
//	sig, err := ratelimit.ParseHeaders(respHeaders, clk.Now())  // err: count it
//	if rateLimited {                       // a Busy answer
//		windows.RecordSignal(svc, m, sig)  // hold back new calls meanwhile
//		pause := pacer.OnRateLimited(clk.Now(), sig)
//		wait, tooLong := ratelimit.Delay(backoff, n, rnd, ratelimit.Wait(sig), maxDelay)
//		if tooLong {                       // fail now, saying for how long
//			return &pacing.WindowError{Key: ratelimit.Key(sig.Dimension, svc, m), Remaining: wait, Limit: maxDelay}
//		}
//		// sleep max(pause, wait), then retry
//	} else {
//		if ratelimit.Throttled(sig) {      // a success that spent the quota
//			windows.RecordSignal(svc, m, sig)
//		}
//		pacer.OnSuccess(clk.Now(), sig)
//	}
package ratelimit

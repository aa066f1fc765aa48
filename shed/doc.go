// Package shed configures the adaptive concurrency limit by which a server
// decides, before a handler runs, whether it takes a request or answers it
// "busy": a limit that follows the handler's measured latency, in the
// family of TCP Vegas and Netflix's Gradient2. A service sets it on its
// Channel, channel.WithShedding(channel.ShedConfig{Adaptive:
// &shed.Config{}}): one limit per method, or one for all of them with
// channel.ShedConfig.AdaptiveShared. This doc says what the limit does
// with a Config; `sluice-lab sim shed` runs the very same code in virtual
// time.
//
// The limit admits a request while fewer than it are in flight. Each
// finished request reports how long it took. The limit keeps two
// latencies: the no-load latency L0, measured by probes, and the mean
// latency L of the requests that finished in the last window (Window,
// 100 ms by default). At the end of each window the limit becomes
//
//	gradient = clamp(L0 * (1 + Buffer) / L, 0.5, 2)
//	limit    = clamp(limit * gradient + sqrt(limit), MinLimit, MaxLimit)
//
// While requests finish within L0 plus the buffer the gradient is at least
// 1 and the limit grows each window (by a quarter of itself plus its square
// root when requests take L0); once requests queue behind each other the
// gradient falls below 1 and the limit shrinks in proportion. The limit
// does not grow in a window whose requests in flight never reached half of
// it: an idle server learns nothing about its capacity.
//
// For a server that runs N requests at once and queues the rest (a worker
// pool of N), latency is L0 up to N requests in flight and L0*x/N at x > N,
// so the limit settles where limit = (1+Buffer)*N + sqrt(limit): 13.7 for N
// = 8 with the default Buffer of 0.25, between N and 2N, with requests
// queueing for about 0.7 of L0 (a little more in practice, 14-16, as the
// window means are noisy and the probe's median is a little above L0). On
// a CPU-bound handler N is the number of cores; the limit settles just
// above it, never below MinLimit (1).
//
// L0 cannot be read while the server is busy, because every request then
// waits behind others. So the limit probes: at start and every
// ProbeInterval (5 s, with 10% jitter so a fleet does not probe at once,
// and at least 200 L0 apart for a slow handler) it pins the limit to
// ProbeLimit (3) until ProbeSamples (25) requests admitted during the
// probe have finished, and takes their median latency as L0. A probe costs
// a server at twice its capacity about a dozen service times of extra
// shedding; it is what lets the limit follow a handler that became slower
// or faster. A Config with MinLimit == MaxLimit is a fixed limit: it
// starts at that limit and never probes (a Channel's
// channel.ShedConfig.MaxInFlight is such a limit, and the classes and
// callers rules below apply to it too).
//
// A request the limit refuses is answered busy with a pushback hint: the
// current queueing delay (L - L0), at least L0 and at least a millisecond,
// so a client waits about as long as a slot takes to free
// (channel.ShedConfig.Pushback and NoRetry replace the hint).
//
// A probe that cannot finish (requests admitted before it that never end
// hold its slots) ends anyway after a second, or 20 L0 if longer, keeping
// the L0 it had.
//
// # Classes and callers
//
// The limit admits a request knowing its criticality class (package
// criticality; a request without one counts as criticality.Critical) and
// its caller (a TChannel caller name), so that under overload the requests
// that matter get through and no caller takes the limit from the others.
// With channel.ShedConfig.FirstComeFirstServed it knows neither: first
// come, first served. Four mechanisms share one limit, each working per
// Window:
//
//   - The level is the lowest class admitted; lower classes are refused
//     wholesale, before they count in flight, and the Busy answer names the
//     highest of them (a client refuses it and below locally for a while).
//     The level rises a class when the classes above it flooded the limit
//     (more than 1 in 10 of their requests near it refused) or overflowed
//     it while the boundary class left them all the room it can; it falls
//     a class when the window saw nothing refused, or nothing above the
//     boundary, and to the lowest class after a quiet window. It never
//     rises to the highest class present: that class is the one protected.
//     (It is DAGOR's admission level, moved by refusals at the limit rather
//     than by queueing time, which the limit already bounds.)
//   - The boundary class, the level itself, is admitted only while the
//     limit has a reserve left: a share of the limit, from a quarter up to
//     seven eighths, kept for the classes above. The reserve grows by an
//     eighth in a window where more than 1 in 250 requests above the
//     boundary were refused at the full limit while the boundary class
//     held slots, and shrinks by a sixty-fourth in a window where none
//     was: it settles just above what the higher classes' bursts need.
//     So the boundary class is partially admitted by the limit itself, and
//     the level does not flap between it and the class below (that would
//     let sheddable requests leak in and starve the boundary class every
//     other window).
//   - The highest class present keeps room the limit would not give it.
//     Outside probes it may borrow a quarter of the limit beyond it while
//     requests of the boundary class hold slots: they give the slots back
//     as they end, and none of their class replaces them meanwhile.
//     During a latency probe, while lower classes are refused, it keeps a
//     quarter of the normal limit beyond ProbeLimit (its requests are
//     probe samples too: within that they do not queue on a server whose
//     limit sits above its worker count). Without these, each probe and
//     each dip of the adaptive limit refused a burst of the class the
//     limit protects: at three times capacity on a real server, 0.8% of
//     critical_plus, about 60 calls a probe. And a rising level passes a
//     class with no request near the limit, so that it reaches the class
//     to shed a window sooner when overload begins.
//   - Callers share the limit. A fixed table of 32 callers (and one
//     overflow bucket for callers without an entry) counts each caller's
//     requests near the limit. At the end of a window each caller gets its
//     max-min fair share of the window's admissions near the limit, but
//     never less than a quarter of those admissions or of the limit (with
//     more callers than admissions the max-min share falls towards
//     nothing, and a flood of names sending one request each would mark
//     every caller over it); a caller whose demand went more than 1.5
//     times beyond its share is over its share, and in the next window is
//     admitted only within the limit less a quarter, while callers within
//     their shares may use all of it. The heavy caller is not starved: it
//     keeps what the others leave below that (in simulation at 1.5 times
//     capacity, ten callers, one sending ten times each other's rate: the
//     nine served at 97-98%, the heavy one gets 30% of capacity). Callers
//     that all exceed their shares alike are none of them over. The table
//     never grows: a new caller takes a free entry or one whose caller
//     sends little (its decaying count below 2) and has nothing in flight,
//     else it shares the overflow bucket, so a flood of invented names
//     costs no memory, lands in one bucket that is itself over its share,
//     and cannot take the entries of callers that keep sending.
//
// In simulation (an 8 x 2 ms server at three times its capacity,
// critical_plus 20%, critical 30%, sheddable 50%, no retries),
// critical_plus is 99.8% served with a p99 of 4.5 ms, critical 44%,
// sheddable none, and goodput is 99.8% of capacity (under a fixed limit of
// 16: 99.8%, 44%, none and 99.7%); on a real server with client busy
// throttling (sluice bench --closed-loop --mix), 99.6-99.8% of
// critical_plus.
//
// Far from the limit (in flight within the limit less its reserve and a
// quarter) the classes and callers cost a request two atomic loads (the
// level and the reserve), and an atomic add more for a request of the
// boundary class: no mutex, no caller lookup, no allocation; admitting and
// releasing a request costs about 75 ns. Near the limit a request takes a
// short mutex. The limit's times come from Config.Clock (on a Channel, the
// Channel's clock).
package shed

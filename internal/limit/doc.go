// Package limit decides how many requests may be in flight to one CouchDB
// host at a time, and how long to wait before retrying a request.
//
// A Limiter is an adaptive concurrency limit for one host. Every HTTP request
// to that host takes a Token with Acquire and returns it with Token.Done,
// reporting what happened (status, latency, bytes). From those outcomes the
// limiter moves its limit:
//
//   - slow start: the limit grows by one for every request that completed
//     while the limit was nearly used, so it doubles every round trip, until
//     the first overload signal;
//   - congestion avoidance: then it grows by about one per round trip
//     (1/limit per completed request), four times slower near the level that
//     last failed;
//   - decrease: an overload signal (429, 503, a timeout, or a caller-flagged
//     condition such as CouchDB's all_dbs_active) sets the limit to 0.9× the
//     number of requests that were in flight when the rejected request
//     started (one decision at most halves the limit: requests the limiter
//     does not count may hold the server), at most once per round trip
//     ("epoch"); a round whose median
//     latency exceeds 1.5× the baseline (the smallest round median seen
//     over the last minute) twice in a row sets it to 0.9× the concurrency the server
//     really sustains (in flight × baseline / median, by Little's law), at
//     most halving it and never below Options.LatencyFloor (4): latency
//     alone does not push a single-threaded server into idling between
//     round trips; growth pauses while the median is above 1.125× the
//     baseline, since with the limit in use, throughput = in flight /
//     latency (Little's law) stops growing once latency grows with it;
//   - memory: the level that failed is forgotten after two minutes without
//     overload, so growth speeds up again.
//
// The limit never leaves [Min, Max]. Options.Fixed pins it at Max. An
// optional token bucket (Options.RPS) caps request starts per second.
// Every change of the integer limit is kept in a bounded decision log
// (Limiter.Stats) and logged at debug level.
//
// Backoff and RetryAfter give the per-request retry schedule: full-jitter
// exponential delays, capped, bounded by a total budget, honouring the
// server's Retry-After.
package limit

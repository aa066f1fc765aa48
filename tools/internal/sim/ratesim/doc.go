// Package ratesim replays the rate-throttling simulation of Heroku's client
// rate throttling article ("A Fast Car Needs Good Brakes: How We Added
// Client Rate Throttling to the Platform API Gem") in virtual time: a GCRA
// server (a bucket of 4500 requests refilled at 4500 per hour, answering
// with RateLimit-Remaining and refusing requests when empty) and greedy
// clients, each paced by a pacing Pacer: the very code the channel
// runs.
//
// Run plays one Scenario as a discrete-event loop: no goroutines, no
// sleeping, deterministic for a seed; a 30-minute run takes milliseconds.
// Steady is the article's 30-minute run with 10 clients and Clear its "time
// to clear workload" run; Compare measures the article's four metrics
// (average retry rate, maximum sleep, standard deviation of request counts,
// time to clear) for every pacer, next to the figures the article
// published.
// "sluice-lab sim ratelimit" prints them.
package ratesim

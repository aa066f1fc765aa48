// Package ratesim replays the simulation of Heroku's client rate
// throttling article ("A Fast Car Needs Good Brakes") in virtual time: a
// GCRA server (4500 requests refilled at 4500 per hour, answering with
// RateLimit-Remaining) and greedy clients, each paced by the pacer the
// channel runs. Compare measures the article's four metrics for every
// pacer beside its published figures, for "sluice-lab sim ratelimit".
package ratesim

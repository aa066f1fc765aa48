// Package channelz describes a Sluice Channel's live state: its peers,
// retry tokens, lease gate, pacing and method policies, as
// channel.Channel.Debug returns them and channel.Channel.DebugHandler serves
// them as JSON (after grpc-go's channelz).
//
// Package channel builds these values; this package imports nothing of
// Sluice, so a program that reads a debug page (the sluice command, a
// dashboard) decodes State with it alone. State's doc gives the JSON form.
package channelz

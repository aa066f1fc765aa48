package peer

// Member is one peer of a service as a resolver or SetPeers gives it.
type Member struct {
	HostPort string
	// Weight is the peer's share relative to the others; 0 means 1.
	Weight float64
}

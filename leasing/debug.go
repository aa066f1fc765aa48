package leasing

// Capacity returns the capacity the limiter follows now, in calls per
// second: its source's Capacity (+Inf when unlimited). It is for
// introspection (a channel's Debug reports it as the lease capacity of the
// service the limiter gates); admissions read the source themselves.
func (l *RateLimiter) Capacity() float64 { return l.src.Capacity() }

package doormanpb

// Conn is a connection to a Doorman server: the service's client and a way
// to close it. The leasing client and an intermediate server dial their
// server through a func(addr string) (Conn, error) (leasing.ClientConfig.Dial;
// for a server's parent, internal/serverhook.DriveParent); by default that
// is gRPC, and a simulation passes one that calls a server in the same
// process.
type Conn interface {
	CapacityClient
	// Close releases the connection; the Conn is not used afterwards.
	Close() error
}

package channel

import (
	"os"

	"github.com/uber/tchannel-go"
)

// discardLogger is the tchannel-go logger of a Channel given none. It
// logs nothing, as tchannel-go's NullLogger, but keeps no fields either:
// tchannel-go adds fields to its logger for every connection (its id and
// addresses) and for each of its exchange sets, and NullLogger copies and
// keeps them all, about 2.7 KB a connection (27 MB for 10,000 idle
// ones).
type discardLogger struct{}

func (discardLogger) Enabled(tchannel.LogLevel) bool                    { return false }
func (discardLogger) Fatal(string)                                      { os.Exit(1) } // as NullLogger: tchannel-go exits on an unrecoverable accept error
func (discardLogger) Error(string)                                      {}
func (discardLogger) Warn(string)                                       {}
func (discardLogger) Infof(string, ...any)                              {}
func (discardLogger) Info(string)                                       {}
func (discardLogger) Debugf(string, ...any)                             {}
func (discardLogger) Debug(string)                                      {}
func (discardLogger) Fields() tchannel.LogFields                        { return nil }
func (l discardLogger) WithFields(...tchannel.LogField) tchannel.Logger { return l }

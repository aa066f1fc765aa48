package channel

import (
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/uber/tchannel-go"
	"golang.org/x/time/rate"
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

// The limits on the lines a Channel lets through to the tchannel-go
// logger a user gives it (WithTChannelOptions). tchannel-go logs what
// peers do wrong through that logger, at Info, Warn and Error (a frame
// for an unknown exchange, a failed handshake, a connection error): one
// line per bad frame or connection, which any peer can send by the
// thousand. So each message, at each of those levels, gets LogBurst
// lines, then LogLinesPerSecond; the next line of a message written
// after some were left out carries the field suppressedBefore, their
// number. Debug lines, which a user turns on to see everything, and
// Fatal pass as they are.
const (
	// LogLinesPerSecond is the rate of lines of one message.
	LogLinesPerSecond = 10
	// LogBurst is how many lines of one message pass at once.
	LogBurst = 20
	// maxLogMessages bounds the messages given a budget of their own;
	// the lines of any other share one (a logger called with
	// ever-changing messages must not grow the table without bound).
	maxLogMessages = 256
)

// limitedLogger is a tchannel-go logger that writes at most LogBurst
// lines of each message at once, and LogLinesPerSecond after that,
// through the user's logger (see LogLinesPerSecond). Loggers made by
// WithFields share the budgets.
type limitedLogger struct {
	tchannel.Logger // the user's, with this logger's fields
	b               *logBudgets
}

// newLimitedLogger limits l; now is the clock of the budgets (nil:
// time.Now).
func newLimitedLogger(l tchannel.Logger, now func() time.Time) tchannel.Logger {
	if now == nil {
		now = time.Now
	}
	return &limitedLogger{Logger: l, b: &logBudgets{now: now, byMsg: map[logKey]*logBudget{}}}
}

type logBudgets struct {
	now   func() time.Time
	mu    sync.Mutex
	byMsg map[logKey]*logBudget
	other logBudget // for messages past maxLogMessages
}

type logKey struct {
	level tchannel.LogLevel
	msg   string
}

type logBudget struct {
	lim        *rate.Limiter
	suppressed int64 // lines left out since the last one written
}

// allow reports whether a line of msg at level may be written now, and
// how many were left out since the last one that was.
func (b *logBudgets) allow(level tchannel.LogLevel, msg string) (bool, int64) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	lb := b.byMsg[logKey{level, msg}]
	if lb == nil {
		if len(b.byMsg) < maxLogMessages {
			lb = &logBudget{lim: rate.NewLimiter(LogLinesPerSecond, LogBurst)}
			b.byMsg[logKey{level, msg}] = lb
		} else {
			lb = &b.other
			if lb.lim == nil {
				lb.lim = rate.NewLimiter(LogLinesPerSecond, LogBurst)
			}
		}
	}
	if !lb.lim.AllowN(now, 1) {
		lb.suppressed++
		return false, 0
	}
	n := lb.suppressed
	lb.suppressed = 0
	return true, n
}

// with returns the logger to write a line with: the user's, with the
// number of lines left out when there are some.
func (l *limitedLogger) with(suppressed int64) tchannel.Logger {
	if suppressed == 0 {
		return l.Logger
	}
	return l.Logger.WithFields(tchannel.LogField{Key: "suppressedBefore", Value: suppressed})
}

func (l *limitedLogger) Error(msg string) {
	if ok, n := l.b.allow(tchannel.LogLevelError, msg); ok {
		l.with(n).Error(msg)
	}
}

func (l *limitedLogger) Warn(msg string) {
	if ok, n := l.b.allow(tchannel.LogLevelWarn, msg); ok {
		l.with(n).Warn(msg)
	}
}

func (l *limitedLogger) Info(msg string) {
	if ok, n := l.b.allow(tchannel.LogLevelInfo, msg); ok {
		l.with(n).Info(msg)
	}
}

// Infof is budgeted by its format: the message without its values.
func (l *limitedLogger) Infof(format string, args ...any) {
	if ok, n := l.b.allow(tchannel.LogLevelInfo, format); ok {
		l.with(n).Infof(format, args...)
	}
}

func (l *limitedLogger) WithFields(fields ...tchannel.LogField) tchannel.Logger {
	return &limitedLogger{Logger: l.Logger.WithFields(fields...), b: l.b}
}

// WithLogger sets the logger of the Channel's own lines, all at Warn:
// its configuration (a service config method name that matches no call,
// see WithServiceConfig), and what its peers do wrong (a frame that
// breaks the protocol, a refused TLS handshake, a connection closed for a
// limit, a fallback to plaintext), at most 10 of those at once and 10 a
// second after, the next line written saying in suppressedBefore how many
// were left out. Default: slog.Default() when a line is written, so that
// a program that sets no logger still sees them. Any slog.Handler will
// do; zap users can pass slog.New(zapslog.NewHandler(core)) from
// go.uber.org/zap/exp/zapslog. tchannel-go's own lines go elsewhere: to
// the Logger of WithTChannelOptions, and nowhere without one.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// warn logs msg at Warn on the Channel's logger.
func (c *Channel) warn(msg string) {
	l := c.o.logger
	if l == nil {
		l = slog.Default()
	}
	l.Warn(msg, "channel", c.name)
}

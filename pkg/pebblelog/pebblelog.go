// Package pebblelog routes Pebble's printf-style logging into an injected
// *slog.Logger with static messages, so every Pebble user in Sluice (the
// embedded catalog and bookkeeping stores, the bookie's index) logs alike.
package pebblelog

import (
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
)

// New returns a pebble.Logger writing to l. Pebble's routine progress
// ("Found 0 WALs") is Debug, so it is not noise in tests and `sluice dev`.
func New(l *slog.Logger) pebble.Logger { return logger{l} }

type logger struct{ l *slog.Logger }

func (p logger) Infof(format string, args ...any) {
	p.l.Debug("pebble", "detail", fmt.Sprintf(format, args...))
}

func (p logger) Errorf(format string, args ...any) {
	p.l.Error("pebble error", "detail", fmt.Sprintf(format, args...))
}

// Fatalf is called by Pebble on unrecoverable errors (e.g. corruption) and
// must not return (Pebble's contract). Crashing is right: continuing could
// spread bad state.
func (p logger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error("pebble fatal", "detail", msg)
	panic("pebble: " + msg)
}

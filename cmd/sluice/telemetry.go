package main

import (
	"context"

	"github.com/sluicemq/sluice/internal/telemetry"
)

// shutdownTelemetry flushes the spans still queued (within
// telemetry.ShutdownTimeout: a collector that is down must not hold the
// exit) and stops the meters. Every server main defers it first, so it
// runs last.
func shutdownTelemetry(tel *telemetry.Telemetry) {
	ctx, cancel := context.WithTimeout(context.Background(), telemetry.ShutdownTimeout)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		tel.Logger.Warn("telemetry shutdown failed", "err", err)
	}
}

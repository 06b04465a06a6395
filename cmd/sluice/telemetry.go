package main

import (
	"context"
	"crypto/tls"

	"github.com/sluicemq/sluice/internal/rpcclient"
	"github.com/sluicemq/sluice/internal/telemetry"
)

// tracedPeers is how a server main reaches its peers: over cfg's TLS (nil:
// cleartext), every call traced by tel (a client span; its context in the
// request headers).
func tracedPeers(tel *telemetry.Telemetry, cfg *tls.Config) (rpcclient.Peers, error) {
	ic, err := tel.ClientInterceptor()
	if err != nil {
		return rpcclient.Peers{}, err
	}
	return rpcclient.New(cfg).WithInterceptors(ic), nil
}

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

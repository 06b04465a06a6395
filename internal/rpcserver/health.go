package rpcserver

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"connectrpc.com/connect"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// HealthService is the fully-qualified name of the standard health service.
const HealthService = "grpc.health.v1.Health"

// health serves grpc.health.v1.Health with the standard messages of
// grpc/health/v1/health.proto (the generated types of
// google.golang.org/grpc/health/grpc_health_v1), so every protocol answers
// what the standard says: over Connect JSON {"status":"SERVING"}, the proto3
// JSON name of the enum value. connectrpc.com/grpchealth, used before,
// ships its own copy of the proto with renamed values and answered
// {"status":"SERVING_STATUS_SERVING"}, which probes do not recognise; the
// binary encoding (gRPC, gRPC-web) is the same either way.
//
// Statuses: "" (the server as a whole) and every registered service start
// SERVING (NOT_SERVING while a readiness gate is open: Server.Gate); drain
// sets them all NOT_SERVING and ends every Watch stream once
// it has sent that, so streams do not hold up the server's shutdown.
type health struct {
	mu       sync.Mutex
	status   map[string]healthpb.HealthCheckResponse_ServingStatus
	changed  chan struct{} // closed and replaced on every change
	draining bool
}

func newHealth(services []string) *health {
	h := &health{status: map[string]healthpb.HealthCheckResponse_ServingStatus{"": healthpb.HealthCheckResponse_SERVING}, changed: make(chan struct{})}
	for _, s := range services {
		h.status[s] = healthpb.HealthCheckResponse_SERVING
	}
	return h
}

// handler returns the service's path and handler.
func (h *health) handler(opts ...connect.HandlerOption) (string, http.Handler) {
	mux := http.NewServeMux()
	check := "/" + HealthService + "/Check"
	watch := "/" + HealthService + "/Watch"
	mux.Handle(check, connect.NewUnaryHandler(check, h.check, opts...))
	mux.Handle(watch, connect.NewServerStreamHandler(watch, h.watch, opts...))
	return "/" + HealthService + "/", mux
}

// healthz answers a plain HTTP GET with the server's overall status:
// 200 "SERVING" while it serves, 503 "NOT_SERVING" before its readiness
// gate opens and once it drains — the readiness check of a load balancer
// whose health checks are HTTP GETs (AWS's NLB and ALB).
func (h *health) healthz(w http.ResponseWriter, _ *http.Request) {
	st, _, _, _ := h.get("")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if st != healthpb.HealthCheckResponse_SERVING {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintln(w, st.String())
}

// setAll sets the status of the server and every service (a readiness
// gate: Server.Gate); a draining server stays NOT_SERVING.
func (h *health) setAll(st healthpb.HealthCheckResponse_ServingStatus) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.draining {
		return
	}
	for s := range h.status {
		h.status[s] = st
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

// drain turns every status NOT_SERVING for good.
func (h *health) drain() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.status {
		h.status[s] = healthpb.HealthCheckResponse_NOT_SERVING
	}
	h.draining = true
	close(h.changed)
	h.changed = make(chan struct{})
}

// get returns a service's status, whether it is known, whether the server
// drains, and a channel closed at the next change.
func (h *health) get(service string) (st healthpb.HealthCheckResponse_ServingStatus, known, draining bool, changed <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st, known = h.status[service]
	return st, known, h.draining, h.changed
}

func unknownService(service string) error {
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", service))
}

// check answers the status, or NOT_FOUND for a service the server does not
// serve (as the standard says).
func (h *health) check(_ context.Context, req *connect.Request[healthpb.HealthCheckRequest]) (*connect.Response[healthpb.HealthCheckResponse], error) {
	st, known, _, _ := h.get(req.Msg.GetService())
	if !known {
		return nil, unknownService(req.Msg.GetService())
	}
	return connect.NewResponse(&healthpb.HealthCheckResponse{Status: st}), nil
}

// watch sends the status at once and again on every change. A service the
// server does not serve gets SERVICE_UNKNOWN and the stream stays open, as
// the standard says (the set of services never changes here, so that is
// the only message). The stream ends when the client goes away, or after
// the NOT_SERVING of a drain.
func (h *health) watch(ctx context.Context, req *connect.Request[healthpb.HealthCheckRequest], stream *connect.ServerStream[healthpb.HealthCheckResponse]) error {
	last := healthpb.HealthCheckResponse_ServingStatus(-1)
	for {
		st, known, draining, changed := h.get(req.Msg.GetService())
		if !known {
			st = healthpb.HealthCheckResponse_SERVICE_UNKNOWN
		}
		if st != last {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		if draining {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

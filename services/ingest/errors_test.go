package ingest

import (
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/apierr"
)

// The edge maps ingest's typed errors: a retry condition is UNAVAILABLE
// even when it wraps the Connect error of the RPC that broke a forwarding
// stream (that code is not the answer); a copy at its limit is
// RESOURCE_EXHAUSTED with the copy's retry delay.
func TestProduceErrorMapsTypedErrors(t *testing.T) {
	s := &Service{cfg: Config{RetryAfter: 250 * time.Millisecond}}
	broke := retry("forwarding to the owner at b:1 broke: %w; retry", connect.NewError(connect.CodeCanceled, errors.New("stream reset")))
	if err := s.produceError(broke); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("a broken forwarding stream: %v (code %v); want UNAVAILABLE", err, connect.CodeOf(err))
	}
	err := s.produceError(limitError{errors.New("this ingest copy writes 2 partitions, its limit; retry later")})
	if d, ok := apierr.RetryDelay(err); connect.CodeOf(err) != connect.CodeResourceExhausted || !ok || d != 250*time.Millisecond {
		t.Errorf("a copy at MaxWriters: %v (code %v, retry after %v %v); want RESOURCE_EXHAUSTED after 250ms", err, connect.CodeOf(err), d, ok)
	}
	if pe := streamError(s.produceError(retry("%s/%d: ownership is moving; retry", "t", 3))); connect.Code(pe.GetCode()) != connect.CodeUnavailable {
		t.Errorf("on a stream: code %v; want UNAVAILABLE", connect.Code(pe.GetCode()))
	}
}

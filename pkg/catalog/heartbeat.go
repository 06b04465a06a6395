package catalog

import (
	"context"
	"errors"
	"time"
)

// Bounds of RetryHeartbeat's backoff.
const (
	heartbeatRetryFirst = 50 * time.Millisecond
	heartbeatRetryMax   = time.Second
)

// RetryHeartbeat calls beat until it succeeds or ctx ends, waiting 50 ms
// before the first resend and doubling up to 1 s. A heartbeat renews a
// record's expiry and is idempotent, so resending it after any failure,
// even one that may have been applied, is safe; resending within the
// interval instead of waiting for the next tick keeps a transient catalog
// error from eating into the TTL. Errors the catalog gives as answers
// (ErrLimitExceeded, *ValidationError) are returned at once. When ctx ends
// first, the last error is returned.
func RetryHeartbeat(ctx context.Context, beat func(context.Context) error) error {
	wait := heartbeatRetryFirst
	for {
		err := beat(ctx)
		var ve *ValidationError
		if err == nil || errors.Is(err, ErrLimitExceeded) || errors.As(err, &ve) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, heartbeatRetryMax)
	}
}

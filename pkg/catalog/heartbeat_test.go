package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func TestRetryHeartbeatResendsUntilItSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		err := catalog.RetryHeartbeat(t.Context(), func(context.Context) error {
			calls++
			if calls < 3 {
				return errors.New("connection reset")
			}
			return nil
		})
		if err != nil || calls != 3 {
			t.Fatalf("err %v after %d calls; want success on the 3rd", err, calls)
		}
	})
}

func TestRetryHeartbeatStopsWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		calls := 0
		start := time.Now()
		err := catalog.RetryHeartbeat(ctx, func(context.Context) error { calls++; return errors.New("unavailable") })
		if err == nil || err.Error() != "unavailable" || time.Since(start) != 3*time.Second {
			t.Fatalf("err %v after %v; want the last error when the context ends at 3s", err, time.Since(start))
		}
		// 50, 100, 200, 400, 800 ms, then 1 s: 7 calls by 2.55 s, none after 3 s.
		if calls != 7 {
			t.Fatalf("%d calls in 3 s; want 7 (doubling backoff from 50 ms, capped at 1 s)", calls)
		}
	})
}

func TestRetryHeartbeatReturnsAnswersAtOnce(t *testing.T) {
	for _, e := range []error{fmt.Errorf("registry full: %w", catalog.ErrLimitExceeded), catalog.Invalid("ttl", "negative")} {
		calls := 0
		err := catalog.RetryHeartbeat(context.Background(), func(context.Context) error { calls++; return e })
		if !errors.Is(err, e) || calls != 1 {
			t.Errorf("%v: err %v after %d calls; want it returned after 1", e, err, calls)
		}
	}
}

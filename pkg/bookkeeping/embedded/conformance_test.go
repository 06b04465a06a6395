package embedded_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
	"github.com/sluicemq/sluice/pkg/bookkeeping/bookkeepingtest"
	"github.com/sluicemq/sluice/pkg/bookkeeping/embedded"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// epoch is where every fake clock starts; any fixed instant works.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// openStore opens a store on a fresh directory with a fake clock and closes
// it when t ends.
func openStore(t *testing.T, opts ...embedded.Option) (*bookkeeping.Store, *bookkeepingtest.FakeClock) {
	t.Helper()
	clock := bookkeepingtest.NewFakeClock(epoch)
	s, err := embedded.Open(t.TempDir(), append([]embedded.Option{embedded.WithClock(clock.Now)}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, clock
}

// TestConformance runs the whole bookkeeping suite against the embedded
// store, on real disk (synced writes included), one store per test.
func TestConformance(t *testing.T) {
	bookkeepingtest.Run(t, bookkeepingtest.HarnessFunc(func(t *testing.T) bookkeepingtest.Store {
		s, clock := openStore(t)
		return bookkeepingtest.Store{Members: s, Leases: s, Offsets: s, Groups: s, Producers: s, Transactions: s,
			Timing: clock.Timing(10 * time.Second), ListTxnsInIDOrder: true}
	}))
}

package catalogtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// racers is how many goroutines contend in each race.
const racers = 16

func runRaces(t *testing.T, h Harness) {
	subtests(t, h, map[string]func(e *env){
		"AcquireWriterOneWinnerPerEpoch": raceAcquireWriter,
		"CloseLedgerOneWinner":           raceCloseLedger,
		"CreateTopicOneWinner":           raceCreateTopic,
		"CreateLedgerUniqueIDs":          raceCreateLedger,
	})
}

// race runs f(i) for i in [0, racers) at once and returns their errors.
func race(f func(i int) error) []error {
	errs := make([]error, racers)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range racers {
		done.Go(func() {
			start.Wait()
			errs[i] = f(i)
		})
	}
	start.Done()
	done.Wait()
	return errs
}

// raceAcquireWriter: all owners are live and race for one partition, twice.
// Each round exactly one wins, taking the next epoch; the others end with
// ErrOwned. A loser of a CAS race (ErrVersionConflict) re-reads and tries
// again, as an ingest copy's balancer would.
func raceAcquireWriter(e *env) {
	e.topic("t", 1)
	owners := make([]string, racers)
	for i := range owners {
		owners[i] = fmt.Sprintf("ingest-%02d", i)
	}
	heartbeatAll := func() {
		for _, o := range owners {
			e.heartbeat(o, 10*time.Second)
		}
	}
	heartbeatAll()
	prevWinner := ""
	for round := 1; round <= 2; round++ {
		var mu sync.Mutex
		var leases []catalog.WriterLease
		errs := race(func(i int) error {
			if owners[i] == prevWinner {
				return catalog.ErrOwned // the expired winner sits this round out
			}
			for range 100 {
				p, err := e.b.AcquireWriter(e.ctx, "t", 0, owners[i])
				if errors.Is(err, catalog.ErrVersionConflict) {
					continue
				}
				if err == nil {
					mu.Lock()
					leases = append(leases, p.Lease())
					mu.Unlock()
				}
				return err
			}
			return fmt.Errorf("%s: 100 version conflicts in a row", owners[i])
		})
		if len(leases) != 1 {
			e.t.Fatalf("round %d: %d winners %v, want exactly 1", round, len(leases), leases)
		}
		for i, err := range errs {
			if err != nil && !errors.Is(err, catalog.ErrOwned) {
				e.t.Fatalf("round %d: racer %d: %v, want success or ErrOwned", round, i, err)
			}
		}
		won := leases[0]
		if won.Epoch != int64(round) {
			e.t.Fatalf("round %d: winner has epoch %d, want %d", round, won.Epoch, round)
		}
		if p := e.partition("t", 0); p.Owner != won.Owner || p.Epoch != won.Epoch {
			e.t.Fatalf("round %d: partition = %+v, winner %v", round, p, won)
		}
		// Let the winner expire; everyone else renews.
		prevWinner = won.Owner
		e.clk.Advance(10 * time.Second)
		for _, o := range owners {
			if o != prevWinner {
				e.heartbeat(o, 10*time.Second)
			}
		}
	}
}

// raceCloseLedger: racers CAS the same OPEN ledger to CLOSED with different
// last entries; exactly one wins and its last entry is the one stored.
func raceCloseLedger(e *env) {
	m := e.ledgerFor(lease(0), 0)
	winners := make(chan int64, racers)
	errs := race(func(i int) error {
		p := m
		p.State, p.LastEntry, p.LastOffset = catalog.LedgerClosed, int64(i), int64(i)
		if _, err := e.b.UpdateLedger(e.ctx, p); err != nil {
			return err
		}
		winners <- int64(i)
		return nil
	})
	close(winners)
	if len(winners) != 1 {
		e.t.Fatalf("%d racers closed the ledger, want exactly 1", len(winners))
	}
	for i, err := range errs {
		if err != nil && !errors.Is(err, catalog.ErrVersionConflict) {
			e.t.Fatalf("racer %d: %v, want success or ErrVersionConflict", i, err)
		}
	}
	won := <-winners
	if got := e.getLedger(m.ID); got.State != catalog.LedgerClosed || got.LastEntry != won || got.Version != 2 {
		e.t.Fatalf("ledger after the race = %+v, want CLOSED with the winner's last entry %d at version 2", got, won)
	}
}

func raceCreateTopic(e *env) {
	errs := race(func(i int) error {
		_, err := e.b.CreateTopic(e.ctx, "contended", i+1, catalog.DefaultTopicConfig())
		return err
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			e.t.Fatalf("racers %d and %d both created the topic", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, catalog.ErrAlreadyExists):
			e.t.Fatalf("racer %d: %v, want success or ErrAlreadyExists", i, err)
		}
	}
	if winner < 0 {
		e.t.Fatal("no racer created the topic")
	}
	tp, err := e.b.GetTopic(e.ctx, "contended")
	if err != nil || tp.Partitions != winner+1 {
		e.t.Fatalf("GetTopic = %+v, %v; want the winner's %d partitions", tp, err, winner+1)
	}
}

func raceCreateLedger(e *env) {
	ids := make([]catalog.LedgerID, racers)
	errs := race(func(i int) error {
		m, err := e.b.CreateLedger(e.ctx, spec(lease(i%4), 0))
		ids[i] = m.ID
		return err
	})
	seen := map[catalog.LedgerID]bool{}
	for i, err := range errs {
		if err != nil {
			e.t.Fatalf("racer %d: %v", i, err)
		}
		if seen[ids[i]] || ids[i] < 1 {
			e.t.Fatalf("ledger id %d allocated twice or invalid: %v", ids[i], ids)
		}
		seen[ids[i]] = true
	}
	if got := listByState(e, catalog.LedgerOpen, 0); len(got) != racers {
		e.t.Fatalf("%d OPEN ledgers listed after %d creates", len(got), racers)
	}
}

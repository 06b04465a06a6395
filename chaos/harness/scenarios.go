package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/chaos/fault"
	"github.com/sluicemq/sluice/harness/bookieproc"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// Scenarios returns the scenarios in the order `task chaos` runs them.
// Their fault phases are sized for 2 cores at Scale 1 (the short version);
// the full version multiplies them.
func Scenarios() []*Scenario {
	return []*Scenario{KillBookies(), PauseWriter(), PauseConsumer(), CutBookie(), CrashQuorum(), PowerLoss(), KillFetch(), LoseBookies(), ClockSkew(), CutMetadata()}
}

// ScenarioByName returns the named scenario, or nil.
func ScenarioByName(name string) *Scenario {
	for _, s := range Scenarios() {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// KillBookies (1): under idempotent load with two group members, SIGKILL a
// random bookie every few seconds (restarting it 1.5 s later) and an
// ingest copy every ~10 s (restarting it 2 s later), and every round mute
// the producers' link to an ingest copy (answers dropped) then cut it for
// a second. Four
// bookies, so an ensemble of 3 can always be formed while one is down.
// Sabotage "sabotage_dedup" (no producer deduplication) must then show
// duplicates: retries of stored batches whose answers were lost (with a
// muted link or a killed copy) are written again.
func KillBookies() *Scenario {
	return &Scenario{
		Name:        "kill-bookies",
		Description: "SIGKILL a random bookie every ~3 s and an ingest copy every ~10 s under idempotent load; heal; drain",
		Cluster:     ClusterConfig{Bookies: 4, Ingests: 2, ProxyIngests: true},
		Partitions:  4,
		Members:     2,
		Phase:       30 * time.Second,
		MinPhase:    12 * time.Second, // one ingest kill at least
		Sabotage:    "sabotage_dedup",
		// Two ingest kills and several producer-link cuts: a duplicate
		// needs a retry of a batch that was stored but whose answer was
		// lost.
		SabotageMinPhase: 20 * time.Second,
		Faults: func(ctx context.Context, r *Run) error {
			nextIngest := time.Now().Add(r.Jitter(8 * time.Second))
			turn := 0
			for i := 0; i < 1000 && fault.Sleep(ctx.Done(), r.Jitter(3*time.Second)); i++ {
				{
					// Every round, mute the producers' link to an ingest
					// copy for a moment (the batches sent meanwhile are
					// stored, their answers dropped), then cut it for a
					// second: the producers retry every unanswered batch,
					// so a build without deduplication stores duplicates
					// each round.
					link := r.Cluster.IngestLinks[r.Rand.IntN(len(r.Cluster.IngestLinks))]
					if err := r.Inject.MuteFrom(link, Harness); err != nil {
						return err
					}
					fault.Sleep(ctx.Done(), 300*time.Millisecond)
					if err := r.Inject.CutFrom(link, Harness); err != nil {
						return err
					}
					fault.Sleep(ctx.Done(), time.Second)
					if err := r.Inject.HealFrom(link, Harness); err != nil {
						return err
					}
				}
				if time.Now().After(nextIngest) {
					in := r.Cluster.Ingests[turn%len(r.Cluster.Ingests)]
					turn++
					if err := killFor(ctx, r, in, 2*time.Second); err != nil {
						return err
					}
					nextIngest = time.Now().Add(r.Jitter(10 * time.Second))
					continue
				}
				if err := killFor(ctx, r, r.Pick(r.Cluster.Bookies), 1500*time.Millisecond); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// killFor kills p, waits d (or until ctx ends) and restarts it.
func killFor(ctx context.Context, r *Run, p *bookieproc.Proc, d time.Duration) error {
	if err := r.Kill(p); err != nil {
		return err
	}
	fault.Sleep(ctx.Done(), d)
	return r.Restart(p)
}

// PauseWriter (2): SIGSTOP the ingest copy that owns partitions, for
// three owner TTLs, while the other copy takes its partitions over
// (bumping the epoch, fencing and recovering its open ledgers); then
// SIGCONT it. Whatever the paused writer still had to add must fail at the
// bookies (fenced) and its producers retry to the new owner: nothing
// acknowledged may be lost, nothing written twice. Sabotage
// "sabotage_fencing" (bookies accept adds to fenced ledgers) must then
// show acknowledged writes beyond the recovered end of a ledger: lost.
func PauseWriter() *Scenario {
	return &Scenario{
		Name:        "pause-writer",
		Description: "SIGSTOP a partition-owning ingest copy past its owner lease while the other copy takes over; SIGCONT; heal; drain",
		Cluster:     ClusterConfig{Bookies: 3, Ingests: 2},
		Partitions:  4,
		Members:     1,
		Phase:       36 * time.Second,
		MinPhase:    16 * time.Second,
		Sabotage:    "sabotage_fencing",
		// A resumed writer writes to its fenced ledger only when it handles
		// the requests that waited for it before its balancing round sees
		// the takeover — most pauses, not every one (two CI runs out of
		// many found nothing in three 16 s runs): a sabotage run pauses
		// about three times as often.
		SabotageMinPhase: 45 * time.Second,
		Faults: func(ctx context.Context, r *Run) error {
			for i := 0; i < 100 && fault.Sleep(ctx.Done(), r.Jitter(4*time.Second)); i++ {
				in := r.Cluster.Ingests[i%len(r.Cluster.Ingests)]
				if err := r.Inject.Pause(in); err != nil {
					return err
				}
				// Three TTLs: the lease lapses, the other copy takes over
				// and writes, and only then does the old writer wake.
				fault.Sleep(ctx.Done(), 3*r.Cluster.OwnerTTL)
				if err := r.Inject.Resume(in); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// PauseConsumer (3): member c1 reads everything but commits only when it
// resumes or leaves. Producers stop; once both members have caught up, c1
// pauses (no credits, no commits) past its session timeout, c2 takes its
// partitions over and commits them, then c1 resumes and commits what it
// read with its old lease epochs: the server must reject that commit
// (LEASE_FENCED), and no record may be skipped. Producing then resumes.
// Sabotage "sabotage_commitepoch" (commits not fenced by lease epoch)
// must then show a stale commit accepted.
func PauseConsumer() *Scenario {
	return &Scenario{
		Name:        "pause-consumer",
		Description: "pause a group member past its session; the new owner commits; the zombie's late commit must be rejected; no record skipped",
		Cluster:     ClusterConfig{Bookies: 3, Ingests: 2},
		Partitions:  4,
		Members:     2,
		MemberCfg: func(i int, c *MemberConfig) {
			c.SessionTimeout = 3 * time.Second
			if i == 0 {
				c.CommitEvery = -1 // c1 commits only on resume, revoke and stop
			}
		},
		Phase:    25 * time.Second,
		MinPhase: 17 * time.Second,
		Sabotage: "sabotage_commitepoch",
		Faults: func(ctx context.Context, r *Run) error {
			// A round, once started, runs to its end (rctx): a zombie left
			// paused or producers left stopped would prove nothing. The
			// phase only decides whether another round starts.
			rctx := context.WithoutCancel(ctx)
			for round := 0; round < 10 && fault.Sleep(ctx.Done(), 5*time.Second); round++ {
				if err := pauseConsumerRound(rctx, r); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// pauseConsumerRound is one round of PauseConsumer.
func pauseConsumerRound(ctx context.Context, r *Run) error {
	if err := r.StopProducers(ctx); err != nil {
		r.T.Logf("pause-consumer: stopping producers: %v", err)
	}
	if err := r.Inject.Note("producers-stopped", "all"); err != nil {
		return err
	}
	fault.Sleep(ctx.Done(), 3*time.Second) // the members catch up
	c1 := r.Members[0]
	if err := r.Inject.Do("pause", c1.Name(), func() error { c1.Pause(); return nil }); err != nil {
		return err
	}
	// Session timeout, a balance round for c2 to take the leases, and
	// c2's commit interval.
	fault.Sleep(ctx.Done(), 8*time.Second)
	if err := r.Inject.Do("resume", c1.Name(), func() error { c1.Resume(ctx); return nil }); err != nil {
		return err
	}
	for range r.Cluster.Ingests {
		if err := r.StartProducer(ctx); err != nil {
			return err
		}
	}
	return nil
}

// CutBookie (4): cut the link between one ingest copy and one bookie —
// only that pair: the other ingest copy, the fetch copy and the bookie's
// heartbeats to the catalog still get through, so the bookie looks alive —
// then kill the other ingest copy, so that the cut-off copy takes its
// partitions over and recovers their ledgers (fence, recovery reads,
// re-replication, close) without reaching that bookie. Alternates a hard
// cut (connections reset) and a blackhole (silent). Four bookies.
func CutBookie() *Scenario {
	return &Scenario{
		Name:        "cut-bookie",
		Description: "cut/blackhole the link between one ingest copy and one bookie, kill the other ingest copy so the cut-off one recovers its ledgers; heal; drain",
		Cluster:     ClusterConfig{Bookies: 4, Ingests: 2, ProxyBookies: true},
		Partitions:  4,
		Members:     1,
		Phase:       30 * time.Second,
		MinPhase:    11 * time.Second,
		Faults: func(ctx context.Context, r *Run) error {
			for i := 0; i < 100 && fault.Sleep(ctx.Done(), r.Jitter(3*time.Second)); i++ {
				b := r.Rand.IntN(len(r.Cluster.Bookies))
				link := r.Cluster.BookieLinks[b]
				if link == nil {
					return errors.New("cut-bookie needs ProxyBookies")
				}
				n := len(r.Cluster.Ingests)
				victim, recoverer := r.Cluster.Ingests[i%n], r.Cluster.Ingests[(i+1)%n]
				cut := r.Inject.CutFrom
				if i%2 == 1 {
					cut = r.Inject.BlackholeFrom
				}
				if err := cut(link, recoverer.ID); err != nil {
					return err
				}
				fault.Sleep(ctx.Done(), time.Second)
				if err := killFor(ctx, r, victim, 2*time.Second); err != nil {
					return err
				}
				fault.Sleep(ctx.Done(), 4*time.Second) // recovery runs with the link cut
				if err := r.Inject.HealFrom(link, recoverer.ID); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// CrashQuorum: SIGKILL two of three bookies at the same instant — every
// entry's whole ack quorum at once for some entries — and restart them:
// every acknowledged entry must come back from the journals. The harness's
// bookies run on internal/volatilefs, so each kill also loses the bytes the
// bookie wrote and did not fsync.
func CrashQuorum() *Scenario {
	return &Scenario{
		Name:        "crash-quorum",
		Description: "SIGKILL two of three bookies at once every ~6 s and restart them; heal; drain",
		Cluster:     ClusterConfig{Bookies: 3, Ingests: 2},
		Partitions:  4,
		Members:     1,
		Phase:       25 * time.Second,
		MinPhase:    9 * time.Second,
		Faults: func(ctx context.Context, r *Run) error {
			for i := 0; i < 100 && fault.Sleep(ctx.Done(), r.Jitter(6*time.Second)); i++ {
				a := r.Rand.IntN(3)
				b := (a + 1 + r.Rand.IntN(2)) % 3
				pa, pb := r.Cluster.Bookies[a], r.Cluster.Bookies[b]
				if err := errors.Join(r.Kill(pa), r.Kill(pb)); err != nil {
					return err
				}
				fault.Sleep(ctx.Done(), 1500*time.Millisecond)
				if err := errors.Join(r.Restart(pa), r.Restart(pb)); err != nil {
					return fmt.Errorf("restart after a quorum crash: %w", err)
				}
			}
			return nil
		},
	}
}

// PowerLoss (5): a power cut of the whole ledger tier — SIGKILL all three
// bookies at the same instant, each losing everything it wrote and did not
// fsync and, at its restart, every directory entry made since its
// directory's last sync (internal/volatilefs), and restart them. Only fsync
// before ack keeps acknowledged entries: sabotage "sabotage_fsync" (the
// journal acknowledges groups without fsyncing them) must then lose
// acknowledged records, and so must "sabotage_dirsync" (a new journal
// file's directory entry is never synced: the file, synced, vanishes).
func PowerLoss() *Scenario {
	return &Scenario{
		Name:        "power-loss",
		Description: "SIGKILL all three bookies at once (unsynced writes lost) every ~6 s and restart them; heal; drain",
		// No checkpoint during the run: every acknowledged entry lives in
		// the journals only, so each power loss tests journal replay — and
		// a journal that does not fsync loses every acknowledged entry.
		Cluster:       ClusterConfig{Bookies: 3, Ingests: 2, BookieArgs: []string{"--checkpoint-interval", "1h"}},
		Partitions:    4,
		Members:       1,
		Phase:         25 * time.Second,
		MinPhase:      9 * time.Second,
		Sabotage:      "sabotage_fsync",
		MoreSabotages: []string{"sabotage_dirsync"},
		Faults: func(ctx context.Context, r *Run) error {
			for i := 0; i < 100 && fault.Sleep(ctx.Done(), r.Jitter(6*time.Second)); i++ {
				var errs []error
				for _, p := range r.Cluster.Bookies {
					errs = append(errs, r.Kill(p))
				}
				if err := errors.Join(errs...); err != nil {
					return err
				}
				fault.Sleep(ctx.Done(), 1500*time.Millisecond)
				errs = errs[:0]
				for _, p := range r.Cluster.Bookies {
					errs = append(errs, r.Restart(p))
				}
				if err := errors.Join(errs...); err != nil {
					return fmt.Errorf("restart after a power loss: %w", err)
				}
			}
			return nil
		},
	}
}

// KillFetch (7): faults of the consume path itself. Two fetch copies, one
// group member on each; every few seconds one copy is, in turn, cut off
// from Cassandra for 4–6 s while it goes on serving its member, SIGKILLed
// (restarted 2 s later), or SIGSTOPped past its member's session timeout
// (then SIGCONT). The member on it loses its session; the other member
// takes its partitions over and commits them; and whatever the copy still
// holds — its member's commits with the old lease epochs — reaches
// Cassandra only when it wakes or its driver reconnects, and must be
// refused. Nothing acknowledged may be lost and no record skipped.
// Sabotage "sabotage_commitepoch" (commits not conditioned on the lease
// owner and epoch) must then accept a stale commit. The pauses alone never
// showed one (a woken copy learns its session is gone before it commits);
// the cut does: its member commits as soon as the driver reconnects, before
// the copy's next membership refresh.
func KillFetch() *Scenario {
	return &Scenario{
		Name:        "kill-fetch",
		Description: "one of two fetch copies, a group member on each, every ~5 s in turn: cut off from Cassandra for 4-6 s, SIGKILL (restart after 2 s), SIGSTOP past the session timeout; heal; drain",
		Cluster:     ClusterConfig{Bookies: 3, Ingests: 2, Fetches: 2, ProxyMetadata: true},
		Partitions:  4,
		Members:     2,
		MemberCfg: func(_ int, c *MemberConfig) {
			c.SessionTimeout = 3 * time.Second
		},
		Phase:    30 * time.Second,
		MinPhase: 25 * time.Second, // one of each (the pause may end with the phase)
		Sabotage: "sabotage_commitepoch",
		Faults: func(ctx context.Context, r *Run) error {
			for i := 0; i < 100 && fault.Sleep(ctx.Done(), r.Jitter(5*time.Second)); i++ {
				f := r.Cluster.Fetches[i%len(r.Cluster.Fetches)]
				switch i % 3 {
				case 1:
					if err := killFor(ctx, r, f, 2*time.Second); err != nil {
						return err
					}
				case 2:
					if err := r.Inject.Pause(f); err != nil {
						return err
					}
					// Past the member's 3 s session, a balance round for the
					// other member to take the leases, and its commit interval.
					fault.Sleep(ctx.Done(), 7*time.Second)
					if err := r.Inject.Resume(f); err != nil {
						return err
					}
				default:
					if err := r.Inject.CutFrom(r.Cluster.CassandraLink, f.ID); err != nil {
						return err
					}
					fault.Sleep(ctx.Done(), 4*time.Second+time.Duration(r.Rand.Int64N(int64(2*time.Second))))
					if err := r.Inject.HealFrom(r.Cluster.CassandraLink, f.ID); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
}

// LoseBookies (8): bookies lost for good, one after another. Four bookies,
// a topic written at E2/Qw2/Qa2, and a compactor re-replicating (grace
// 3 s); twice, under load, a bookie is killed and its disk deleted, never
// to return, and the next loss waits until no ledger on bookies names it
// any more: the ingest copies rolled the open ledgers that named it and
// the compactor rebuilt every closed ledger's copies elsewhere. The two are
// the bookies the oldest ledger was first written to, so at the end none
// of its original copies is left: only re-replication keeps its records.
// Nothing acknowledged may be lost. Sabotage "sabotage_rereplicate" (the
// catalog is pointed at the new bookie without any copy written) must
// then lose acknowledged records.
func LoseBookies() *Scenario {
	return &Scenario{
		Name:        "lose-bookies",
		Description: "twice: delete a bookie's disk for good (kill -9, never back) and wait until re-replication leaves no ledger naming it; heal; drain",
		Cluster: ClusterConfig{Bookies: 4, Ingests: 2,
			CompactorArgs: []string{"--interval", "1s", "--rereplicate-grace", "3s", "--offload-age", "1h", "--rereplicate-mib-per-sec", "64"}},
		Partitions: 4,
		// Two copies: two losses take every original copy of a ledger (on
		// four bookies, two remain for new ensembles).
		TopicConfig: map[string]string{"replication.ensemble": "2", "replication.write.quorum": "2", "replication.ack.quorum": "2"},
		Members:     1,
		Phase:       40 * time.Second,
		MinPhase:    30 * time.Second, // two losses, each waiting for its repair (~8 s)
		Sabotage:    "sabotage_rereplicate",
		Faults: func(ctx context.Context, r *Run) error {
			// The victims: the bookies of the oldest ledger (lowest id) as
			// it was first written, in turn — so that, without
			// re-replication, its every original copy is gone at the end.
			var victims []string
			for i := 0; (victims == nil || i < len(victims)) && fault.Sleep(ctx.Done(), r.Jitter(4*time.Second)); i++ {
				if victims == nil {
					first, err := oldestLedger(ctx, r.Cluster.Catalog)
					if err != nil {
						return err
					}
					victims = first.Ensembles[0].Bookies
				}
				var victim *bookieproc.Proc
				for _, b := range r.Cluster.Bookies {
					if b.ID == victims[i] {
						victim = b
					}
				}
				if victim == nil {
					return fmt.Errorf("lose-bookies: no bookie %s", victims[i])
				}
				if err := r.Lose(victim); err != nil {
					return err
				}
				// Wait for the repair: no ledger on bookies names it.
				for ctx.Err() == nil {
					counts, err := namedBy(ctx, r.Cluster.Catalog)
					if err == nil && counts[victim.ID] == 0 {
						break
					}
					fault.Sleep(ctx.Done(), 500*time.Millisecond)
				}
			}
			return nil
		},
	}
}

// oldestLedger is the ledger on bookies (OPEN, IN_RECOVERY, CLOSED) with
// the lowest id.
func oldestLedger(ctx context.Context, cat *catalog.Catalog) (catalog.LedgerMetadata, error) {
	var best catalog.LedgerMetadata
	found := false
	err := eachLedgerOnBookies(ctx, cat, func(m catalog.LedgerMetadata) {
		if !found || m.ID < best.ID {
			best, found = m, true
		}
	})
	if err == nil && !found {
		err = errors.New("no ledger on bookies yet")
	}
	return best, err
}

func eachLedgerOnBookies(ctx context.Context, cat *catalog.Catalog, f func(catalog.LedgerMetadata)) error {
	for _, st := range []catalog.LedgerState{catalog.LedgerOpen, catalog.LedgerInRecovery, catalog.LedgerClosed} {
		for token := ""; ; {
			page, err := cat.ListLedgersByState(ctx, st, token, catalog.MaxPageSize)
			if err != nil {
				return err
			}
			for _, m := range page.Items {
				f(m)
			}
			if token = page.NextPageToken; token == "" {
				break
			}
		}
	}
	return nil
}

// namedBy counts, per bookie, the ledgers on bookies (OPEN, IN_RECOVERY,
// CLOSED) whose segments name it.
func namedBy(ctx context.Context, cat *catalog.Catalog) (map[string]int, error) {
	out := map[string]int{}
	err := eachLedgerOnBookies(ctx, cat, func(m catalog.LedgerMetadata) {
		var seen []string
		for _, seg := range m.Ensembles {
			for _, b := range seg.Bookies {
				if !slices.Contains(seen, b) {
					seen = append(seen, b)
					out[b]++
				}
			}
		}
	})
	return out, err
}

// ClockSkew (9): one process at a time runs with its wall clock off by
// 2–10 s, ahead or behind, as an NTP step would leave it: an ingest copy
// (two times in three, always past the owner TTL), a fetch copy or a
// bookie, every ~4 s another. Every lease and heartbeat
// is judged by a clock — owner records in the catalog (4 s TTL), bookie
// registrations, group members' sessions (3 s) — so a copy ahead takes
// partitions over from a live owner, one behind looks dead to the others,
// a bookie behind looks gone from the registry (its open ledgers roll
// over). Correctness must never rest on the clocks: epochs and ledger
// fencing must keep nothing acknowledged lost, no duplicate, no reorder,
// and commits fenced. Sabotage "sabotage_fencing" (bookies accept normal
// adds to fenced ledgers) must then lose acknowledged writes: an owner
// that another copy's fast clock declared dead goes on writing to the
// ledger the new owner has recovered and closed.
func ClockSkew() *Scenario {
	return &Scenario{
		Name:        "clock-skew",
		Description: "every ~4 s set one process's wall clock (an ingest copy 2 times in 3, else a fetch copy or a bookie) 2-10 s ahead or behind, putting the last one right; heal; drain",
		Cluster:     ClusterConfig{Bookies: 4, Ingests: 2, Fetches: 2},
		Partitions:  4,
		Members:     2,
		MemberCfg: func(_ int, c *MemberConfig) {
			c.SessionTimeout = 3 * time.Second
		},
		Phase:            30 * time.Second,
		MinPhase:         12 * time.Second,
		Sabotage:         "sabotage_fencing",
		SabotageMinPhase: 30 * time.Second,
		Faults: func(ctx context.Context, r *Run) error {
			var last *bookieproc.Proc
			for i := 0; i < 100 && fault.Sleep(ctx.Done(), r.Jitter(4*time.Second)); i++ {
				if last != nil {
					if err := r.Skew(last, 0); err != nil {
						return err
					}
				}
				// Ingest copies two times in three, always past their
				// owner TTL: a takeover from a live writer is what
				// fencing must make safe.
				var p *bookieproc.Proc
				d := 2*time.Second + time.Duration(r.Rand.Int64N(int64(8*time.Second)))
				switch k := r.Rand.IntN(6); {
				case k < 4:
					p = r.Pick(r.Cluster.Ingests)
					d = max(d, r.Cluster.OwnerTTL+time.Second)
				case k == 4:
					p = r.Pick(r.Cluster.Fetches)
				default:
					p = r.Pick(r.Cluster.Bookies)
				}
				if r.Rand.IntN(2) == 0 {
					d = -d
				}
				if err := r.Skew(p, d.Round(100*time.Millisecond)); err != nil {
					return err
				}
				last = p
			}
			return nil
		},
	}
}

// CutMetadata (10): the metadata stores go away for a while, as a network
// partition or a crash of the store would take them. Every ~5 s, for
// 2–7 s, one of: a single ingest copy loses the AWS emulator (the catalog:
// owner records, ledger chains, the bookie registry) but not its bookies,
// for 6–9 s — it cannot renew its owner record; a single fetch copy loses
// Cassandra for 4–6 s (its members' sessions lapse, their leases move while
// it still serves them); every process loses Cassandra (group membership, leases,
// offsets, producer ids); every process loses the catalog; or both — in
// that turn (the last three at random), the fetch copy's first. Links are blackholed
// (connections dropped, new ones hang) or cut (refused). Nothing
// acknowledged may be lost, nothing duplicated or reordered, commits stay
// fenced and never go backwards. Sabotage "sabotage_commitepoch" (commits
// not conditioned on the lease owner and epoch) must then accept a stale
// commit: the member on the cut-off fetch copy commits, once Cassandra is
// back, with the epoch of a lease the other member was granted meanwhile.
// (A copy cut off from the catalog is not taken over until the catalog is
// back — the other copy's balancing round waits on it — and by then it
// learns of it too, so this scenario does not exercise ledger fencing;
// pause-writer and clock-skew do.)
func CutMetadata() *Scenario {
	return &Scenario{
		Name:        "cut-metadata",
		Description: "every ~5 s, in turn: one fetch copy loses Cassandra for 4-6 s, one ingest copy loses the catalog (AWS emulator) for 6-9 s, every process loses Cassandra, the catalog or both for 2-7 s (blackholed or cut); heal; drain",
		Cluster:     ClusterConfig{Bookies: 3, Ingests: 2, Fetches: 2, IngestBookkeeping: true, ProxyMetadata: true},
		Partitions:  4,
		Members:     2,
		MemberCfg: func(_ int, c *MemberConfig) {
			c.SessionTimeout = 3 * time.Second
		},
		Phase:    30 * time.Second,
		MinPhase: 15 * time.Second,
		Sabotage: "sabotage_commitepoch",
		// A stale commit needs the cut-off copy's driver back before its
		// membership refresh tells it the lease moved: a race each
		// fetch-copy outage runs once.
		SabotageMinPhase: 40 * time.Second,
		Faults: func(ctx context.Context, r *Run) error {
			aws, cass := r.Cluster.AWSLink, r.Cluster.CassandraLink
			for i := 0; i < 100 && fault.Sleep(ctx.Done(), r.Jitter(5*time.Second)); i++ {
				blackhole := r.Rand.IntN(2) == 0
				var heal func() error
				// In turn: one fetch copy loses Cassandra (1), one ingest
				// copy loses the catalog (0), everyone loses Cassandra, the
				// catalog or both (2, 3, 4: one at random).
				k := [3]int{1, 0, 2 + r.Rand.IntN(3)}[i%3]
				switch k {
				case 0, 1: // one process loses one store
					link, src := aws, r.Pick(r.Cluster.Ingests).ID
					if k == 1 {
						link, src = cass, r.Pick(r.Cluster.Fetches).ID
					}
					cut := r.Inject.CutFrom
					if blackhole {
						cut = r.Inject.BlackholeFrom
					}
					if err := cut(link, src); err != nil {
						return err
					}
					heal = func() error { return r.Inject.HealFrom(link, src) }
				default:
					links := [][]*fault.Proxy{{cass}, {aws}, {cass, aws}}[k-2]
					cut := r.Inject.Cut
					if blackhole {
						cut = r.Inject.Blackhole
					}
					for _, l := range links {
						if err := cut(l); err != nil {
							return err
						}
					}
					heal = func() error {
						var errs []error
						for _, l := range links {
							errs = append(errs, r.Inject.Heal(l))
						}
						return errors.Join(errs...)
					}
				}
				outage := 2*time.Second + time.Duration(r.Rand.Int64N(int64(5*time.Second)))
				switch k {
				case 0: // past the owner TTL
					outage = r.Cluster.OwnerTTL + 2*time.Second + time.Duration(r.Rand.Int64N(int64(3*time.Second)))
				case 1: // past the members' 3 s sessions and a balancing round
					outage = 4*time.Second + time.Duration(r.Rand.Int64N(int64(2*time.Second)))
				}
				fault.Sleep(ctx.Done(), outage)
				if err := heal(); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

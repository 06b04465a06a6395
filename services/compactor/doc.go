// Package compactor moves sealed ledgers from the bookies to segment
// objects in object storage, enforces retention, compacts
// cleanup.policy=compact topics by key and removes deleted topics
// (DESIGN.md §2.9). It is one library behind two mains: `sluice compactor`
// (and `sluice dev`) call Run, a loop of passes; the Lambda function in
// ./lambda calls Pass once per scheduled event.
//
//	c, err := compactor.New(cfg, compactor.Deps{Catalog: cat, Ledgers: ledgerClient, Objects: bucket})
//	err = c.Run(ctx)          // a pass every cfg.Interval until ctx ends
//	report, err := c.Pass(ctx) // one bounded pass
//
// # A pass
//
// Each step is bounded by a Config limit and re-derives its work from the
// catalog and the bucket, so a pass never depends on what an earlier one
// (maybe in another process, maybe killed) remembered:
//
//  1. retention (retention.go, plan.go): per partition of a delete-policy
//     topic, trim whole ledgers at the front of the chain past
//     retention.ms (sealed that long ago) or retention.bytes (segment
//     sizes), never the tail, then mark them DELETED; per partition of a
//     compact-policy topic, key compaction (compact.go).
//  2. deleted topics (topics.go): seal (recover) and mark DELETED every
//     ledger of a deleted topic; purge the topic once it has none.
//  3. offload (offload.go): CLOSED ledgers sealed OffloadAge ago → segment
//     object (pkg/segment) at a key derived from the ledger (keys.go),
//     verified by reading it back, then CLOSED → OFFLOADED with the key as
//     Location (compare-and-set).
//  4. pending (pending.go): after BookieDeleteGrace, OFFLOADED ledgers are
//     deleted from their bookies.
//  5. purge (pending.go): after DeleteGrace, DELETED ledgers lose their
//     objects, bookie copies and finally their metadata.
//  6. orphan sweep (sweep.go): one page of segment objects; those no
//     ledger points at and older than OrphanGrace are deleted.
//
// # Crash safety
//
// Nothing is deleted before what replaces it is durable and the catalog
// says so: bookie copies only after the catalog says OFFLOADED, which is
// written only after the object verified; objects and bookie copies of a
// ledger only after it left the chain and is DELETED; metadata last. A
// pending marker (an object under pending/) is written before each catalog
// change whose follow-up must not be forgotten, and removed after the
// follow-up. Object keys are deterministic, so a redone upload overwrites
// rather than orphans. The README walks through a crash at every step; the
// crash tests kill a pass at each one (Hooks) and check the next pass
// repairs it with no gap, duplicate or orphan.
//
// # Goroutines
//
// Run owns its loop; Pass runs steps one after another on the caller's
// goroutine, and fans ledgers out to at most Workers goroutines that it
// waits for before the step ends (each). Passes never overlap (a mutex).
//
// # Files
//
//	config.go    Config, defaults, Validate; env.go: ConfigFromEnv (Lambda)
//	compactor.go New, Deps, Pass, Run, Report, the worker fan-out
//	keys.go      object key layout
//	objects.go   ranged reads, verification, pending markers
//	offload.go   CLOSED → segment → OFFLOADED
//	pending.go   bookie deletes after the grace; purge of DELETED ledgers
//	plan.go      retention decisions as pure functions
//	retention.go trimming chains, leftovers of a crashed trim
//	compact.go   key compaction of offloaded segments
//	txns.go      the outcome of each transactional batch in a compaction run
//	topics.go    cleanup of deleted topics
//	sweep.go     orphan sweep
//	hooks.go     Step and Hooks, the crash tests' seam
//	metrics.go   metric names and instruments
package compactor

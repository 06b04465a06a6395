// Package ledger is the ledger client's protocol logic: Apache BookKeeper's
// replication protocol (DESIGN.md §2.2) as pure, deterministic state
// machines, in the style of etcd-io/raft. Nothing here does I/O, starts a
// goroutine or reads a clock. A machine is fed Events — a caller's request,
// a bookie's answer, the wrapper's catalog decision, the passing of time
// (Tick, SpeculativeTimeout) — and returns the Actions to carry out: send a
// request to a bookie, hand a result to the caller, store a decision in the
// catalog with compare-and-set. A thin goroutine wrapper owns the
// connections, the timers and the catalog calls, and must report exactly
// one answer (success, failure or timeout) per request it sent.
//
// # Machines
//
//   - Schedule: BookKeeper's round-robin distribution. Entry e goes to the
//     Qw ensemble positions (e+i) mod E; it is acknowledged once Qa of them
//     stored it; "ack quorum coverage" of a cohort of n bookies is n-Qa+1 of
//     them, enough that every Qa-subset contains one.
//   - Writer (LedgerHandle + PendingAddOp): Append assigns the next entry
//     id and sends it to its write set with the piggybacked LAC; entries are
//     acknowledged strictly in order once each has Qa acks; an idle Tick
//     pushes the LAC with WriteLac; a failed bookie leads to
//     EnsembleChangeNeeded (the wrapper picks a replacement and stores the
//     new segment, from LAC+1, with compare-and-set), then BookieReplaced
//     re-sends every unacknowledged entry whose write set held it; a fenced
//     answer stops the writer and fails its pending appends; at most
//     MaxInFlight entries are unacknowledged (Append fails with
//     ErrInFlightLimit beyond); Close seals the ledger at the LAC once
//     nothing is pending.
//   - Recovery (LedgerRecoveryOp): fences the last segment, reads forward
//     from the highest LAC with fencing reads, writes back what it found,
//     and decides the end for the wrapper to store IN_RECOVERY → CLOSED.
//     See Recovery for the rules and why they are safe.
//   - Reader: reads only up to the LAC of an open ledger and the last entry
//     of a closed one, from a replica of the entry's write set, with a
//     speculative second replica on a timeout event.
//
// # Invariants
//
// The protocol keeps these (Jack Vanlightly's TLA+ specification of
// BookKeeper states the same; each is also written on the struct field that
// carries it, and the simulation test checks them under faults):
//
//  1. No acknowledged entry is lost: an entry is acknowledged only once Qa
//     bookies of its write set, in the segment the catalog assigns it to,
//     stored it durably; acks from a bookie being replaced never count.
//  2. Acknowledged entries form a prefix: entry N is acknowledged only after
//     N-1, each exactly once.
//  3. LAC <= last acknowledged entry: the writer's LAC is its last
//     acknowledged entry, and no message carries a higher one, so no bookie
//     or reader sees an LAC beyond an acknowledged entry.
//  4. Recovery's closed end >= every acknowledged entry, however the old
//     writer races it: an acknowledged entry cannot be judged absent (at
//     most Qw-Qa bookies of its write set lack it), and an entry judged
//     absent can never be acknowledged afterwards (Qw-Qa+1 bookies of its
//     write set are fenced without it — the fencing recovery read of
//     BookKeeper PR #2616).
//  5. No entry beyond the closed end is ever readable: readers never read
//     beyond the LAC while the ledger is open, and the LAC never exceeds an
//     acknowledged entry (3), which the end includes (4); after the close
//     they never read beyond the end.
//  6. Recovery considers only the last ensemble segment, from its first
//     entry on (BookKeeper PR #2654): earlier segments are immutable and
//     fully acknowledged (a segment starts at the writer's LAC+1), and
//     answers from bookies outside an entry's write set in that segment are
//     ignored.
//
// Concurrent or repeated recoveries may decide different ends (an entry on
// fewer than Qa bookies may be found by one and missed by another; either
// choice is safe because such an entry was never acknowledged); the
// catalog's compare-and-set from IN_RECOVERY makes exactly one of them the
// ledger's end, and readers follow the catalog.
//
// # What the bookie must guarantee
//
// The client's reasoning holds only if bookies: acknowledge an add only
// once it is durable; make an accepted entry visible to reads before
// acknowledging it; persist a fence before answering it, and after
// answering a fenced read of an entry with "no such entry" never accept a
// normal add of it; answer "no such entry" only when their cookie proves
// they never lost data (otherwise fail the read).
//
// # Actions and events on the wire (sluice.bookie.v1.BookieService)
//
//	SendAdd            one Add{entry_id, lac, payload, crc32c, recovery} of an AddEntries
//	                   message (the client batches the adds queued for a bookie); its
//	                   AddResult's status OK → AddAcked,
//	                   FENCED → AddFailed{FailFenced}, UNAUTHORIZED → FailUnauthorized,
//	                   anything else or no answer in time → FailUnavailable
//	SendWriteLac       WriteLac (no event back)
//	SendFence          Fence; FenceResponse.lac → FenceOK, error or timeout → FenceFailed
//	SendRecoveryRead   ReadEntries{first_entry = last_entry = Entry, fence_and_read, master_key};
//	                   the entry → ReadOK, NOT_FOUND → ReadNoEntry, anything else → ReadFailed
//	SendRead           ReadEntries{first_entry = last_entry = Entry}; same mapping
//	                   ReadLac answers (and piggybacked LACs) → LacLearned
//
// # Testing
//
// testdata/*.txt are transcripts (events in, actions out) run by
// TestTranscripts; regenerate them with
// `go test ./bookkeeper/ledger -run Transcripts -rewrite` and review the
// diff. TestScheduleExhaustive and TestScheduleQuick compare the quorum
// rules with a naive model that enumerates quorums; TestWriterAgainstModel
// quick-checks the writer against a model of its promises.
// TestSimulation runs the machines over a seeded simulated cluster with
// faults (-seeds N for more, -seed N -v to replay one);
// TestRegressionPR2616 and TestRegressionPR2654 replay the two BookKeeper
// bugs found with TLA+, with and without the fix; and
// TestSimulationCatchesUnfencedRecoveryReads shows the simulation finds the
// lost entry once recovery reads stop fencing.
//
// # Not here
//
// Retries and timers, connection handling, choosing replacement bookies,
// the catalog calls and offsets are the wrapper's. When a recovery add
// fails on more than Qw-Qa bookies of a write set, Recovery fails and must
// be retried; BookKeeper instead changes the ensemble in memory and stores
// it with the close.
package ledger

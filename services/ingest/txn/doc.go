// Package txn is the transaction coordinator's logic (issue 24; the plan is
// in docs/open-work.md, "Transactions"): what an InitProducer, an
// AddPartitions, an AddGroup, an EndTxn or the sweeper's Expire does to a
// transactional id's State, as a pure function (Step) in the style of the
// repository's other machines. Nothing here does I/O or reads a clock. The
// driver (services/ingest/coordinator.go) loads the State from bookkeeping
// (or uses the one it remembers, checked by the compare-and-set), steps,
// stores the result with compare-and-set, writes the markers the Decision
// asks for, answers, and then steps MarkersWritten and stores that.
//
// # Rules (Kafka's, KIP-98/447/890)
//
//   - InitProducer gives a fresh producer id at epoch 0, or bumps the
//     epoch, fencing every earlier session of the transactional id; an
//     open transaction is aborted first, at the bumped epoch, and the
//     caller retries once that abort is complete.
//   - A request with an older epoch is fenced (ErrFenced); one with
//     another producer id, or an epoch never given out, is refused
//     (ErrUnknownProducer).
//   - AddPartitions and AddGroup open a transaction (its deadline is now +
//     the producer's timeout) or join the open one.
//   - EndTxn decides commit or abort and stores it first (Prepare), then
//     the markers are written to every partition, then the transaction is
//     complete. Every EndTxn bumps the epoch (KIP-890): a late write of the
//     transaction that ended carries the old epoch and is fenced by the
//     marker's. A retry of an EndTxn (the epoch before the bump, the bump
//     being the client's own) gets the same outcome.
//   - An EndTxn may name the partitions the producer writes next (Next):
//     its Prepare stores them with the next transaction's deadline, and its
//     Complete is that transaction, Ongoing with them (Ended says how the
//     last one ended, for a retry of its EndTxn), so a producer that
//     writes where it said needs no AddPartitions: one compare-and-set per
//     transaction. The answer names the partitions as stored.
//   - The sweeper aborts an Ongoing transaction past its deadline, at a
//     bumped epoch, and finishes one left in Prepare by a coordinator that
//     died. A timeout's bump leaves the session timed out (TimedOut), not
//     fenced (KIP-588): its requests get ErrTimedOut, and an InitProducer
//     naming it (Resume) starts a new epoch; a session any other bump
//     replaced stays fenced.
//
// # Invariants
//
// On State's fields; the transcripts' harness checks them at every store:
// the epoch never moves back for a producer id, a decided outcome never
// changes, partitions and groups belong only to an open or ending
// transaction, and only Ongoing has a deadline. The simulation drives the
// machine as ingest's driver does — copies deciding on remembered, possibly
// stale states, folding a carried-out Prepare's Complete into the next
// decision, storing a Complete later once; producers name Next partitions
// and resume their sessions at random — and checks the outcomes: every
// marker agrees with the one decision stored for its transaction, a
// transaction a producer was told is committed has a commit marker in every
// partition it added and its offsets applied (an abort's never are), no
// Prepare is left before its markers are written, a fenced epoch never gets
// a request accepted, and the sweeper leaves nothing open or half-written.
// Dropping any of the driver's three rules (re-read before a decision that
// stores nothing; fold only the Prepare this copy carried out; never apply
// a deferred Complete to a newer state) makes it fail.
//
// # Files
//
//	doc.go               this overview
//	state.go             Status, Partition, State and its invariants
//	machine.go           events, Decision, Step and the rules
//	transcript_test.go   transcripts in testdata/: commit, fencing, timeout (and
//	                     KIP-588's resume), epochs, offsets, next (Next)
//	decided_test.go      Decided: which EndTxn is a retry of the decision
//	sim_test.go          coordinators with their memories racing over a compare-and-set store,
//	                     crashes between decision and markers, zombie producers, offsets,
//	                     the sweeper: no torn, flipped or lost transaction, no fenced
//	                     epoch accepted
package txn

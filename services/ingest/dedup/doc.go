// Package dedup is the idempotent-producer state of one partition: what the
// partition writer consults before giving a batch offsets, so that a
// producer's retry is answered with the original offsets instead of being
// written twice, and a gap or a zombie is refused (DESIGN §2.7). The
// semantics are those of Kafka's ProducerStateManager.
//
// It is a pure state machine: no I/O, no goroutines, no clock (time is an
// argument). It is not safe for concurrent use; the partition writer owns
// one State per partition and calls it under its own lock.
//
// # Rules
//
// A batch carries (producer id, epoch, first sequence, record count); its
// last sequence is first+count-1, wrapping from math.MaxInt32 to 0 as in
// Kafka. Per producer id the State knows the epoch and the last
// WindowBatches batches (first and last sequence, base and last offset) of
// the producer's current run — the batches of the current epoch since the
// producer was last seen starting afresh. Check decides, in this order:
//
//	producer id -1 (NoProducerID)        Append: not idempotent, never tracked
//	id < -1, epoch < 0, sequence < 0,
//	  count < 1                          ErrInvalidSequence
//	producer unknown (never seen,
//	  evicted or expired):
//	    first sequence != 0              ErrUnknownProducer (Kafka UNKNOWN_PRODUCER_ID)
//	    MaxProducers tracked, all with
//	      batches in flight              ErrTooManyProducers
//	    else                             Append
//	epoch < known epoch                  ErrProducerFenced
//	epoch > known epoch:
//	    first sequence != 0              ErrOutOfOrderSequence (a new epoch starts at 0)
//	    else                             Append (subject to the in-flight bound)
//	same epoch:
//	    (first, last) sequence equal to
//	      a batch in the window          Duplicate or DuplicateInFlight, with its offsets
//	    first sequence = last + 1        Append (subject to the in-flight bound)
//	    else                             ErrOutOfOrderSequence (a gap, or a retry
//	                                     older than the window)
//	Append when the producer already has
//	  WindowBatches batches in flight     ErrTooManyInFlight
//
// A Duplicate is answered at once with the original offsets. The window
// only dedups what a client may still retry: a Kafka client keeps at most
// max.in.flight (5) batches unacknowledged per partition, so a retry is
// always one of its last five batches. Clients must keep their in-flight
// batches per partition at or below WindowBatches; ErrTooManyInFlight is the
// refusal (retriable) when they do not.
//
// # Batches in flight
//
// Offsets are assigned when the writer enqueues a batch, long before the
// batch is durable, so the State tracks batches in three steps, all in
// offset order:
//
//  1. Check, then Pending(h, baseOffset, now) when the writer gives the batch
//     its offsets. Check and Pending must be called together under the
//     writer's lock; Pending panics unless Check would answer Append at that
//     moment (a programmer error). Pending batches count for dedup at once:
//     a retry of a batch still in flight is DuplicateInFlight, and its
//     BaseOffset is the key of the pending batch, so the writer attaches the
//     retry to that batch's result (offsets are unique among pending
//     batches).
//  2. Commit(through) when the ledger acknowledged every offset up to and
//     including through: each pending batch ending at or before it is
//     committed. Acknowledgements come in offset order, as ledger entries do.
//  3. Abort(from) when every batch at offset from and after is known not to
//     be stored: those pending batches — of every producer — are dropped, as
//     if they had never been Pending. Per producer that is always a suffix of
//     its pending batches, so its next expected sequence rolls back to the
//     first sequence of its earliest aborted batch, and its epoch and window
//     to what they were before it (an aborted epoch bump is undone too). Every
//     later pending batch of that producer is aborted with it — it could not
//     be committed out of sequence anyway — and so are the retries attached
//     to them: the writer must fail all of them. The offsets from on are free
//     again for the next Pending.
//
// Commit and Abort work on offsets, not on individual batches, because that
// is how the writer learns outcomes: an entry is acknowledged (Commit through
// its last offset), or a ledger failed and its recovery found the last
// durable entry (Commit through the recovered end, then Abort from the next
// offset). A batch whose outcome is not yet known — its ledger failed and is
// being recovered — must stay pending until recovery says which; aborting a
// batch that recovery later finds stored would let its retry be written
// twice. Commit and Abort panic if the offset falls inside a pending batch,
// and Abort panics if from is at or below an offset already committed.
//
// # Rebuild after failover
//
// A new writer rebuilds the State by feeding Rebuild every acknowledged
// batch of the ledger tail, in offset order, before the first Pending. The
// log is trusted: Rebuild applies no sequence or epoch rules, it only replays
// them — a batch that does not continue its producer's run (another epoch, or
// a sequence that is not the next) starts a new run, as a fresh start or an
// epoch bump did when it was appended. Rebuilding from the whole log yields
// exactly the state the previous writer had after committing it (bar the
// producers it had evicted or expired, see below).
//
// How far back to read: far enough to include, for every producer that may
// still retry, the last WindowBatches batches of its current run (or the
// whole run, if shorter). Reading less is safe but weaker for the producers
// cut off: one whose window is only partly read answers retries older than
// what was read with ErrOutOfOrderSequence (the batch is stored, the client
// is told it failed, nothing is written twice); one not read at all is
// unknown — its next batch gets ErrUnknownProducer unless it is a sequence-0
// batch, which is appended. That last case is the one hole: the retry of a
// producer's very first batch (sequence 0), if that batch is older than what
// was read, is written twice. Read back at least as far as a client's
// delivery timeout (the longest it retries a batch) to close it.
//
// # Transaction markers
//
// A marker (issue 24) of a producer at an epoch above the one it is at —
// the coordinator bumps the epoch at every EndTxn — is kept as a one-offset
// batch that takes no sequence (CheckMarker, PendingMarker, and
// RebuildMarker from the log): it starts a new run, so the producer's next
// batch is at the new epoch from sequence 0, and a late batch at the ended
// transaction's epoch is fenced (ErrProducerFenced). A marker at the
// producer's own epoch changes nothing. The naive model in model_test.go
// has markers too.
//
// # Bounds, eviction and expiry
//
// At most MaxProducers producer ids are tracked, each with at most
// WindowBatches committed and WindowBatches pending batches: memory is
// O(MaxProducers × WindowBatches), about 450 bytes per producer with the
// default window. A producer with no batch in flight that has been idle
// (no Pending or Rebuild) for ProducerExpiry is forgotten (Kafka's
// producer.id.expiration.ms, default 24 h), and when a new producer needs a
// slot at MaxProducers the one idle longest is evicted — never one with
// batches in flight; if every tracked producer has some, a new producer gets
// ErrTooManyProducers (retriable). A forgotten producer is unknown: its next
// batch with a sequence other than 0 gets ErrUnknownProducer, and the client
// must start over (a new epoch or producer id, at sequence 0). Eviction is
// how the bound holds against many producers, but it has the sequence-0
// hole above: size MaxProducers so that only producers idle for longer than
// a delivery timeout are ever evicted.
//
// Idle order is kept by a list: a producer moves to the front when its last
// pending batch settles or Rebuild replays one of its batches. Expired
// producers are dropped from the idle end during Pending, and any expired one
// still tracked counts as unknown in Check.
package dedup

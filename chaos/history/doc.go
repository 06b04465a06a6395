// Package history is the record of a chaos run: every produce attempt,
// every record consumed, every offset commit, lease grant, offset reset and
// final drain, as seen by the clients. The chaos harness writes it with a
// Recorder while faults are injected; package chaos/checker reads it back
// with a Reader and looks for anomalies (lost acknowledged writes,
// duplicates, inconsistent offsets, stale commits, ...).
//
// The history holds only what clients observed, never server state: the
// checker's verdicts rest on what a user of Sluice could see.
//
// # Format (version 2; version 1 is version 2 without fault ops)
//
// A history is UTF-8 text, one JSON object per line ("JSON lines"). The
// first line is the header:
//
//	{"format":"sluice-history","version":2,"start":"2026-12-01T10:00:00Z","scenario":"kill-bookies","seed":42}
//
// "start" is the wall-clock time of time zero; "scenario" (optional) and
// "seed" say how to reproduce the run. Every later line is an op, named by
// its "op" field:
//
//	{"op":"produce","time":5100,"invoke":4000,"producer":"p1","producer_id":7,"producer_epoch":0,"sequence":3,"topic":"t","partition":0,"offset":12,"value":"p1-3","outcome":"ok"}
//	{"op":"consume","time":6000,"topic":"t","partition":0,"offset":12,"value":"p1-3","group":"g","member":"c1","lease_epoch":2}
//	{"op":"commit","time":7000,"invoke":6500,"topic":"t","partition":0,"offset":13,"outcome":"accepted","group":"g","member":"c1","lease_epoch":2}
//	{"op":"lease","time":900,"topic":"t","partition":0,"group":"g","member":"c1","lease_epoch":2}
//	{"op":"reset","time":9000,"invoke":8800,"topic":"t","partition":0,"offset":0,"group":"g"}
//	{"op":"drain","time":9900,"topic":"t","partition":0,"offset":40,"member":"drainer"}
//	{"op":"fault","time":3000,"fault":"kill","target":"bookie-2"}
//
// Times ("time", "invoke") are integer nanoseconds since "start", from a
// monotonic clock: wall-clock steps cannot reorder a history. "time" is the
// op's completion, stamped by the Recorder under its lock, so lines are in
// completion order and "time" never decreases from one line to the next
// (the Reader enforces it). For ops that take a round trip, "invoke" is when
// the client sent the request; the op took effect at some instant in
// [invoke, time], and the checker assumes nothing more.
//
// Fields per op (R required, O optional, - must be absent):
//
//	field            produce  consume  commit  lease  reset  drain  fault
//	time             R        R        R       R      R      R      R
//	invoke           R        -        R       -      R      -      -
//	producer         R        -        -       -      -      -      -
//	producer_id,
//	producer_epoch,
//	sequence         O (all three or none: the producer is idempotent)
//	topic            R        R        R       R      R      R      -
//	partition        R        R        R       R      R      R      -
//	offset           ok only  R        R       -      R      R      -
//	value            R        R        -       -      -      -      -
//	outcome          R        -        R       -      -      -      -
//	error            O        -        O       -      -      -      O
//	group            -        O        R       R      R      O      -
//	member           -        R        O       R      -      O      -
//	lease_epoch      -        O        R       R      -      -      -
//	fault, target    -        -        -       -      -      -      R
//
// Meanings:
//
//   - produce: one attempt to write one value, unique in the whole history
//     (the harness never produces a value twice; a client library's internal
//     retries of the same attempt are part of the one op). "partition" is
//     where the record was sent, or -1 when the server chose and the outcome
//     did not say. "outcome" is "ok" (acknowledged; "partition" and "offset"
//     say where it is), "failed" (a definite error: the record was not
//     written) or "indeterminate" (timeout, connection lost: it may or may
//     not have been written). "error" is the client's error text.
//   - consume: one record a consumer received: where ("topic", "partition",
//     "offset") and what ("value"). "member" names the reader; "group" and
//     "lease_epoch" say under which group and partition lease it read (both
//     absent for a reader with assigned partitions). A member's consume ops
//     for one partition must be recorded in the order it received them.
//   - commit: one attempt to commit "offset" (the next offset to read, as
//     in Kafka) for a group's partition, carrying the member's
//     "lease_epoch" (0 and no "member" for a standalone commit, which the
//     server allows only while the group has no live members). "outcome"
//     is "accepted", "rejected" or "indeterminate".
//   - lease: a partition lease of epoch "lease_epoch" granted to "member",
//     recorded when the member learned of it (so "time" is at or after the
//     grant).
//   - reset: an explicit change of the group's committed offset to
//     "offset" (an operator's seek). Record every reset that may have taken
//     effect — succeeded or indeterminate; a reset known to have failed may
//     be left out.
//   - drain: after the faults healed, the history's consumers together have
//     read every record of the partition below "offset" (the end offset the
//     drain observed). Record it only after the drain reached that offset.
//   - fault (version 2): the harness injected or healed a fault: "fault"
//     says what ("kill", "restart", "pause", "resume", "cut", "heal", ...)
//     and "target" what it hit (a process or a link). "error" says why
//     an injection failed, if it did. Faults are context for a human
//     reading a report; the checker judges only what clients saw.
//
// # Limits and errors
//
// Everything is bounded: a line by MaxLineBytes (default 64 KiB, at most
// 16 MiB), the Recorder's buffer by Config.BufferBytes, the ops a Reader
// accepts by ReaderConfig.MaxOps. The Recorder validates every op before
// writing it and never drops one silently: an invalid op is refused with
// ErrInvalidOp, and once the writer fails every call returns ErrWrite (a
// history with a hole proves nothing). The Reader rejects unknown fields,
// fields that do not belong to the op, missing fields, out-of-range values
// and times out of order, with a *FormatError naming the line and field.
//
// # Versions
//
// The format moves forward only. A change that an older reader could
// misread (a new op, a new field, a new meaning) bumps Version; a Reader
// refuses versions it does not know rather than guess, and keeps reading
// every version from MinVersion on.
//
//	1  produce, consume, commit, lease, reset, drain (testdata/v1.jsonl)
//	2  adds the fault op and its "fault" and "target" fields (testdata/v2.jsonl)
package history

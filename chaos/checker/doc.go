// Package checker reads a chaos history (package chaos/history) and looks
// for the anomalies that would break Sluice's promises: no acknowledged
// record lost, no duplicate from an idempotent producer, per-partition order
// of each producer's records, one value per offset, and no offset commit
// accepted from a stale lease. It is the judge of the chaos harness, in the
// spirit of Jepsen's queue checkers: it knows only what clients observed,
// and it reports an anomaly only when no correct execution could have
// produced the history (under the assumptions each check states below).
//
//	res, err := checker.CheckFile("history.jsonl", checker.Options{})
//	if err != nil { ... }          // unreadable or malformed history
//	res.Report(os.Stdout)          // counts, one row per check, first anomalies
//	if !res.OK() { os.Exit(1) }
//
// Fault ops (what the harness did to the servers) are counted in
// Result.Faults and otherwise ignored: the verdict rests on what clients
// observed alone.
//
// # Model and vocabulary
//
// A position is a (topic, partition, offset). An acknowledgement is a
// produce with outcome ok: the server said its value is at a position. A
// read is a consume op: a client saw a value at a position. Values are
// unique per produce attempt, so a value names the one produce that may
// have written it. Offsets may be sparse (a log may hold records no client
// sees), so no check assumes that offset o+1 exists.
//
// Ops take effect at some instant between their invoke and completion
// times; the checker assumes nothing more. "A certainly happened before B"
// means A completed before B was invoked. A lease op's time is when the
// member learned of the grant, hence after the grant took effect. Because
// the Recorder stamps completion times, lines are in completion order.
//
// # Checks
//
// lost-write. An acknowledged produce missing from the final log. A drain
// op names the member that read the partition from offset 0 to the drain's
// end after the faults healed: its reads are the final log. An
// acknowledged value that member did not read is lost, whoever read it
// before — a log that loses its tail after members consumed it (a power
// loss under a journal that does not fsync) is caught — and so is one
// acknowledged at or above the drain's end (the log shrank below it); a
// drain that carries an error could read no further than its end, and the
// acknowledged records past it are unreadable — lost writes too. A
// drain that names no member asserts only that the history's consumers
// together read every record below its end: a value nobody read, below
// that end, is lost. Not counted: indeterminate and failed produces (they
// may legitimately be absent); acknowledged produces in an undrained
// partition that nobody read (Result.Undrained: their fate is unknown, and
// the report warns about them); acknowledged values read at another
// position (that is an inconsistent offset, below).
//
// duplicate and retry-duplicate. A value read at two or more distinct
// positions. Whether that is an anomaly depends on the producer: an
// idempotent producer's retries carry the same producer id, epoch and
// sequence, and the broker must write the record once; a producer without
// idempotence that lost an answer and retried may write it twice. The
// duplicate policy (Options.AllowDuplicates, by default: allowed exactly for
// producers without idempotence) sorts each duplicated value into duplicate
// (fails the check) or retry-duplicate (counted and shown, tolerated).
// Reading the same position twice (a re-read, or two members) is no
// duplicate, and a value acknowledged at one offset and read at another is
// an inconsistent offset instead. Values nobody produced are left to
// unknown-value.
//
// inconsistent-offset. The log and its clients disagree about what is
// where, in one of three forms:
//
//  1. One position observed with two different values, counting both reads
//     and acknowledgements: two reads disagree, a read contradicts an
//     acknowledgement, or two produces were acknowledged at one offset.
//     Reported once per position.
//  2. A misplaced read: a value read in a partition its produce cannot have
//     written to — another partition than the acknowledged one, or for an
//     unacknowledged produce another topic, or another partition when the
//     produce named one. Reported once per value.
//  3. A moved write: an acknowledged value read in its partition but never
//     at its acknowledged offset, while nobody read anything at that offset
//     (had someone read another value there, form 1 reports it).
//
// Swapping two records' offsets therefore shows as two form-1 anomalies,
// not as lost writes or duplicates.
//
// sequence-order. For each idempotent producer session (producer id and
// epoch) and partition, offsets must strictly increase with sequence
// numbers, and no sequence number may be written at two offsets. A
// produce's offset is its acknowledged one, or for an unacknowledged
// produce its one read position (if it was read at several, it is a
// duplicate and its place is ambiguous, so it is left out). Sequences of
// different epochs, producers or partitions are independent; gaps in
// sequences or offsets are fine.
//
// failed-write-read. A produce that failed definitely, yet its value was
// read. A definite failure promises the record was not written; a client
// library that reports a possibly-written record as failed misleads its
// user into a retry that duplicates it.
//
// unknown-value. A value read that no produce op in the history wrote:
// corruption, or a read of another run's data. Reported once per value.
//
// stale-commit. An accepted commit carrying lease epoch e for a group
// partition, where a lease of a higher epoch for the same group partition
// had been granted before the commit was invoked: its lease op (recorded
// when the new holder learned of the grant) completed before the commit's
// invoke. The newer grant certainly took effect before the commit did, so a
// server that checks the commit's epoch against the partition's current
// lease (the fencing the design promises) had to reject it. A grant seen
// only after the commit was invoked is concurrent with it: the server may
// have applied the commit first, and nothing is reported. Rejected and
// indeterminate commits are not checked, nor are standalone commits (lease
// epoch 0, no member): the server accepts those while the group has no
// live members, and the history has no op for a lease's release to judge
// that by.
//
// commit-backwards. An accepted commit C of offset c for a group partition
// such that another accepted commit P of a higher offset certainly happened
// before it (P completed before C was invoked), with no reset in between.
// Then the group's committed offset moved from at least P's to c: backwards.
// A reset R of the group partition excuses the pair when it may have taken
// effect between them: R was invoked before C completed and completed after
// P was invoked. Concurrent commits may apply in either order and are not
// compared; rejected and indeterminate commits are ignored on both sides
// (an indeterminate commit may or may not have applied, so neither verdict
// would be safe). Equal offsets are fine.
//
// consumer-skip. Within one session — a member's reads of one partition
// under one lease epoch (or without a lease), in the order recorded — a
// read of offset o followed by a read of o' > o+1 such that some read in
// the history (by anyone, including the member itself earlier) saw an
// offset strictly between them. The record was in the log, and this member
// jumped over it without a new lease to explain a new starting point.
// Offsets nobody read do not count: a hole in a sparse log, or a record
// that is missing (which lost-write judges). Going backwards (a re-read)
// is fine. This needs every reader of one history to see the same records
// (the same isolation level), and a member name never to be reused by two
// independent readers.
//
// # Limits and cost
//
// The history is read once, streaming, into compact tables (values and
// names interned, positions and sessions as small integers); the checks
// then make a constant number of passes over them, with maps keyed by value,
// position, session and group partition. Memory is O(n) in the ops; the
// Reader's MaxOps bounds n. The only super-linear steps are sorts and
// binary searches inside one partition, session or group partition
// (offsets read, sequence numbers, commits and grants), O(n log n) at
// worst. All anomalies are counted; the first Options.MaxExamples of each
// kind (by line) are kept with a description naming lines, values and
// positions.
//
// Errors from Check are about the input — unreadable, malformed (a
// *history.FormatError naming the line and field) or invalid as a whole
// (ErrInvalidHistory: a value produced twice) — never about the system
// under test.
package checker

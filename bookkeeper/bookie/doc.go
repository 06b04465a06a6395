// Package bookie is the ledger storage node (Apache BookKeeper's Bookie):
// bookkeeper/journal and bookkeeper/storage composed into one write path,
// served as sluice.bookie.v1.BookieService, with checkpoints, garbage
// collection, a disk watermark and a heartbeat in the catalog's bookie
// registry. `sluice bookie --dir D --addr A` runs one.
//
// # Write path
//
// An add (AddEntries) is validated, then:
//
//  1. storage.AddEntry: master key and fence checked, checksum verified,
//     entry put in the write buffer where reads see it at once;
//  2. journal.Append of a record holding the whole add (record.go);
//  3. the answer OK goes out once the journal's group holding the record
//     is fsynced — never before.
//
// Adding to the storage first makes an entry readable before it is
// acknowledged, and lets a fence count every add that will ever be
// acknowledged (bookkeeper/storage, "Durability" and "Fencing"). An add
// refused up front (fenced, wrong key, bad checksum, read-only, buffer or
// journal queue full after Config.AddQueueWait) is answered at once with its
// status and never journaled.
//
// One AddEntries message carries adds of one or more ledgers, grouped by
// ledger (a client shares one stream per bookie among all its ledgers),
// handled one by one: each is answered with its own status, so a bad add
// or group fails alone. A group may also carry an explicit LAC, applied
// after its adds as WriteLac would, unanswered. One AddEntries stream has
// at most Config.MaxInFlightAdds adds (entries, not messages) unanswered;
// the handler stops reading beyond that, so HTTP/2 flow control pushes
// back on the client. A message with no groups, a group with neither adds
// nor a LAC, or more than MaxInFlightAdds adds ends the stream
// (INVALID_ARGUMENT); one above Config.MaxAddMessageBytes too
// (RESOURCE_EXHAUSTED, before it is read; behind internal/rpcserver, as
// in `sluice bookie`, the server's request limit answers first,
// INVALID_ARGUMENT, when it is not above that). Acknowledgements are sent in
// journal order, hence in order within a ledger; refusals at once. The
// sender puts every answer ready when it is free into one response,
// grouped by ledger, never waiting for more.
//
// # Checkpoints and restart
//
// Run checkpoints every Config.CheckpointInterval or Config.CheckpointBytes
// of journaled records: mark := journal.Durable(); storage.Checkpoint();
// journal.Checkpoint(mark). Open opens the storage, then the journal,
// replaying every record after the checkpoint into storage.AddEntry (Replay
// set: passes fences, dropped for deleted ledgers), then checkpoints once so
// repeated crashes never replay more. Fences and deletions are not journaled:
// the storage persists them synchronously before they are answered.
//
// # Identity
//
// Every directory has a cookie (bookkeeper/storage, "Cookies and identity");
// the journal directory's is written by the bookie, naming the same storage
// id. At start:
//
//   - journal cookie present: the storage must carry its storage id, so a
//     wiped ledger or index disk is refused rather than served as empty;
//   - journal files without a cookie: refused;
//   - no journal cookie and no journal files: a new journal, adopted only if
//     the storage never held a ledger (a wiped journal may have held
//     acknowledged entries the storage had not flushed), else refused.
//
// Config.RequireStorageID (the id the cluster recorded) catches every
// directory wiped at once. Because of these checks, NOT_FOUND from this
// bookie means "never had it", which the ledger client's recovery relies on.
//
// # Failure
//
// A failed journal or storage write (or fsync) fails the bookie: every call
// answers UNAVAILABLE and Run returns the error so the process restarts and
// Open rebuilds from what is really on disk (no fsync retries: see
// "fsyncgate" in bookkeeper/journal). A corrupt entry found by a read is
// answered DATA_LOSS (the client reads another replica); found by garbage
// collection, it stops GC and turns the bookie read-only for an operator.
//
// # Read-only mode
//
// When the fuller of the journal, ledger and index disks reaches
// Config.ReadOnlyAt of its size the bookie refuses normal adds (REJECTED;
// writers replace it in their ensembles) and advertises read-only in the
// registry; below Config.WritableBelow it takes adds again. Recovery adds are
// still taken so ledgers can be closed.
//
// # Draining
//
// SetDraining (the SetDraining RPC, from `sluice bookie decommission`)
// makes the bookie read-only for good and says "draining" in its
// heartbeat, so the compactor moves its ledgers' copies elsewhere while it
// still serves reads. The state is the checksummed, versioned file
// DRAINING in the journal directory (format in drain.go), so it survives
// restarts; a damaged one stops Open.
//
// # Metrics and traces
//
// Config.MeterProvider gets the instruments below (names in metrics.go;
// the Prometheus exporter writes dots as underscores and adds the unit and
// _total: sluice_bookie_journal_fsync_duration_seconds). They sit at the
// edges — the journal's GroupCommitted hook (its writer goroutine), the
// RPC handlers, Run's loop — never in the journal or storage themselves.
// An add costs no SDK call: counters on the add path are atomics that
// observable instruments read when the provider collects, and histograms
// are recorded once per group commit or per ReadEntries call with
// attribute sets bound at Open.
//
//	sluice.bookie.journal.fsync.duration   histogram s    fdatasync of each group commit that succeeded
//	sluice.bookie.journal.commit.duration  histogram s    a group's first record queued → its fdatasync done
//	sluice.bookie.journal.group.entries    histogram      records (adds) per group commit
//	sluice.bookie.journal.written          counter By     bytes written by group commits, framing included
//	sluice.bookie.journal.entries          counter        records made durable
//	sluice.bookie.journal.rotations        counter        journal files started after the first
//	sluice.bookie.journal.queue_full       counter        adds refused: journal queue full for AddQueueWait
//	sluice.bookie.adds                     counter        adds answered, by status: ok, fenced, unauthorized, bad_checksum, rejected, error
//	sluice.bookie.read.entries, .bytes     counter        entries and payload bytes returned, by rpc: ReadEntries, ReadLac, WatchLac
//	sluice.bookie.read.duration            histogram s    ReadEntries calls, by outcome: ok, not_found, error
//	sluice.bookie.fences                   counter        fences that succeeded (Fence, fencing recovery reads)
//	sluice.bookie.ledgers                  gauge          ledgers stored, counted by Run at most once a minute
//	sluice.bookie.disk.used, .available, .size  gauge By  each directory's disk, by dir: journal, ledger, index
//	sluice.bookie.read_only                gauge 0/1      refusing normal adds, by reason: disk, operator, draining
//	sluice.bookie.failed                   gauge 0/1      a write or fsync failed: every call refused until restart
//	sluice.bookie.entrylog.files           gauge          entry log files
//	sluice.bookie.entrylog.files_created   counter        entry log files started (rotations)
//	sluice.bookie.storage.flushes          counter        write buffer flushes to the entry log and index
//	sluice.bookie.gc.files_removed, .reclaimed (By), .entries_moved  counter  entry log garbage collection
//
// Config.TracerProvider makes one span per traced add, SpanJournalCommit
// ("bookie.journal.commit"): the client puts its add span's context in
// the add (Add.trace_context, bookkeeper/wire) because one AddEntries
// stream, and so its RPC headers, carries every ledger's adds for minutes.
// The span is that span's child, from the bookie taking the add to its
// group's fdatasync (or its refusal, then with an error status), with the
// ledger, entry, payload size and bookie id. A span per add rather than
// one per group commit with links: each trace then shows the bookie's
// share of its own add's latency without a hop, untraced adds cost one
// length check, and no commit ever makes a root span (a trace per group
// commit, thousands a second, whatever the sampling of the adds).
//
// # Goroutines and locks
//
// Open starts none of its own (the journal and storage start theirs). Run
// is the owner of the background loop; each AddEntries and WatchLac call
// starts one sender goroutine and waits for it. Heartbeat runs in the caller's goroutine.
// Locks: lacWatch.mu, then a WatchLac stream's lacStream.mu (never held
// while calling the journal or storage); drainMu alone (held across the
// marker file's write or removal, never with another lock); the journal's
// and storage's own lock orders apply below.
//
// # Files
//
//	doc.go       this overview
//	config.go    Config, defaults, Validate
//	record.go    the journal record format (version 1)
//	bookie.go    Open (identity, replay), Add, Read, Fence, LACs, Status, Run, Close
//	lac.go       LAC long-poll wake-ups and watch registrations
//	service.go   the RPC edge: BookieService, error and status mapping
//	metrics.go   metric names and instruments, the add's journal-commit span
//	watch.go     the RPC edge: the WatchLac stream
//	registry.go  the registry heartbeat
//	drain.go     draining: the DRAINING marker's format, SetDraining
//	catalog_gc.go  garbage collection against the catalog (bookkeeper/DESIGN.md §4.3)
package bookie

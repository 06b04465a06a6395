// Package client is the ledger client: the thin I/O wrapper that drives
// bookkeeper/ledger's pure state machines (Writer, Recovery, Reader) over
// the bookies' RPCs (sluice.bookie.v1.BookieService) and the catalog
// (pkg/catalog Ledgers and Bookies). Ingest writes through it, fetch and
// the compactor read through it (DESIGN.md §2.1–2.2).
//
//	c, _ := client.New(client.Config{Ledgers: cat, Bookies: cat})
//	w, _ := c.CreateLedger(ctx, spec)           // ensemble picked from the registry
//	w.AppendAsync(batch, func(entry int64, err error) {...})
//	w.Close(ctx, lastOffset)                    // OPEN → CLOSED (CAS)
//	m, _ := c.Recover(ctx, id, lastOffsetOf)    // fence, recover, IN_RECOVERY → CLOSED
//	r, _ := c.OpenReader(ctx, id)
//	lac, _ := r.WaitLAC(ctx, prev); ents, _ := r.Read(ctx, prev+1, lac)
//
// The protocol decisions — quorums, LAC, ensemble change, fencing, the
// recovered end, what a reader may return — are the machines'; this package
// only carries out their actions and reports exactly one answer per request
// (an answer, a failure or a timeout). Read bookkeeper/ledger's doc first.
//
// # Goroutines
//
// Every goroutine has an owner that stops it and waits for it:
//
//   - Writer: one loop goroutine owns the ledger.Writer machine and calls
//     Step serially. Appends come to it through a channel; it answers
//     nothing directly. It owns, and waits for before it exits: at most one
//     catalog operation (an ensemble change or the seal) and the callback
//     dispatcher, which runs append callbacks in entry order so a slow
//     callback never stalls the protocol. Its adds and LAC pushes go over
//     the client's shared streams (below). The loop stops when the ledger
//     is sealed, when the machine stops (fenced, too many ensemble
//     changes), or when its context ends (Abort, Close's context,
//     Client.Close). A writer that stopped on its own releases everything
//     without Close; an open writer nobody closes lives until Client.Close.
//   - The shared AddEntries stream per bookie (addMux, mux.go): a sender
//     and a receiver goroutine per stream generation, owned by the client
//     (Client.Close waits for them). A generation ends when it breaks, when
//     an add on it times out, when its last writer leaves, or when the
//     client closes; the next add opens a new one.
//   - The shared WatchLac stream per bookie (lacMux, lacwatch.go): the
//     same sender/receiver pair per generation, owned by the client. The
//     long-polls of WaitLAC register watches on it (one per bookie asked)
//     and wait for their answer on a channel; the receiver routes answers
//     by watch id. A generation ends when it breaks (every watch on it
//     fails) or the client closes; an idle one stays open.
//   - Recover, Read, WaitLAC, Refresh run on the caller's goroutine, which
//     owns the machine; the RPCs they start (one goroutine each, or a
//     recovery's own add streams) all answer through channels, and the
//     call waits for every one of them — cancelling those it no longer
//     needs — before it returns. No goroutine outlives its call.
//   - Client.Close cancels the client context (every writer's and call's
//     context derives from it), then waits for every writer loop and every
//     call in progress.
//
// Append callbacks must not call Close or Abort (Close waits for the
// callbacks), nor block on something that does.
//
// # Master key
//
// Bookies check a ledger's master key on adds, WriteLac, Fence and
// recovery reads. MasterKey derives it from the catalog record alone —
// SHA-256 over a versioned domain, the ledger id, the writer's epoch and
// owner, first 20 bytes — all fields catalog.NextLedger keeps immutable,
// so a recovering client computes the same key as the writer. It guards
// against confused ids and other incarnations, not against the old writer:
// that is fencing's job, as in BookKeeper.
//
// # The wire
//
// Bookie answers map to machine events exactly as the table "Actions and
// events on the wire" in bookkeeper/ledger says (wire.go, the only place
// that reads connect codes): add status OK → AddAcked, FENCED →
// FailFenced, UNAUTHORIZED → FailUnauthorized, anything else or a timeout
// or a broken stream → FailUnavailable; a read's NOT_FOUND → ReadNoEntry,
// its entry → ReadOK only after verifying wire.EntryChecksum (the CRC32C
// the bookie stored) and the entry id, anything else → ReadFailed (a
// mismatch is logged, counted in Stats.ChecksumFailures, and the read goes
// to another replica). Adds carry the same checksum, computed here.
//
// The default transport is the gRPC protocol over cleartext HTTP/2: the
// add path is a bidi stream, which needs HTTP/2, and gRPC is that stream's
// native protocol (the bookie handler takes gRPC, gRPC-Web and Connect).
// Writers share one AddEntries stream per bookie (see addSet for why; a
// recovery uses its own), over the HTTP/2 connection shared per bookie
// address. A stream's sender batches: everything queued for the bookie
// when it is free to send — adds of any number of ledgers, grouped by
// ledger, and the idle writers' explicit LAC pushes — goes out in as few
// messages as MaxAddBatch and MaxAddBatchBytes allow, without waiting for
// more; the bookie answers several adds, of several ledgers, per response.
// Each Add carries its own checksum; the copies of one entry for its write
// set share one Add message.
//
// On first use of a bookie at an address the client asks GetStatus and
// refuses the server if it is another bookie (ErrBookieIdentity): a
// NOT_FOUND from the wrong bookie could let recovery truncate a ledger.
//
// # Timeouts and bounds
//
// Every wait is bounded (Config documents defaults and limits):
//
//   - AddTimeout: an add unanswered this long breaks its stream, failing
//     every add on it (FailUnavailable), so the writer replaces the
//     bookie; checked every TickInterval against Config.Now. Also bounds
//     one WriteLac.
//   - TickInterval: the writer's timer. An interval without adds pushes
//     the LAC (on the add stream, as WriteLac would), so tail readers see
//     the last entries within about one interval. The ticker stops while the writer is idle.
//     A bookie's stream that breaks after a push (the bookie may have
//     restarted, and explicit LACs are not journaled) gets the LAC again
//     after RetryBackoff, doubling to at most 2 s while it stays down.
//   - ReadTimeout, FenceTimeout, CatalogTimeout: one read, fence (or
//     identity check), catalog call.
//   - SpeculativeReadTimeout: a read also asks the next replica after this
//     long (and again after each further period).
//   - LacPollTimeout, MetadataRefreshInterval: WaitLAC's long-poll round
//     and how often an idle tail reader re-reads metadata.
//   - SpeculativeLacTimeout: WaitLAC long-polls one bookie (the one whose
//     answer won last time) and adds the next one after this long without
//     a new LAC, or at once when a poll fails: a busy tail costs one
//     ReadLac per advance, a stalled bookie this much latency once.
//   - RetryBackoff (doubling, capped at 40×): between ensemble change
//     attempts (the failure is reported to the machine only after the
//     delay, so MaxEnsembleChanges attempts span seconds, not ticks) and
//     between recovery attempts.
//   - Counts: MaxInFlight appends per writer (callbacks not yet run
//     included; beyond it AppendAsync fails with ledger.ErrInFlightLimit
//     and Append waits), MaxEnsembleChanges per writer, CASRetries lost
//     races per operation, RecoveryAttempts per Recover, ReadAhead reads in
//     flight and MaxReadBytes per Read; MaxAddBatch adds and
//     MaxAddBatchBytes of payload per AddEntries message. Every queue is
//     bounded by one of these: a stream's send queue and the callback
//     queue by MaxInFlight, a call's answer channel by its requests in
//     flight.
//
// # Catalog writes
//
// Ensemble change (writer): pick replacements (live, writable, not in the
// ensemble), then compare-and-set the ensembles per catalog.NextLedger —
// replace the last segment when it starts at the change's first entry,
// append one otherwise. A lost race re-reads: no longer OPEN → Stop with
// ledger.ErrFenced; the proposed segment already stored (an earlier
// attempt's answer was lost) → done; else retry. Seal: OPEN → CLOSED with
// LastEntry and the caller's LastOffset (FirstOffset-1 when empty);
// recovery: OPEN → IN_RECOVERY, then IN_RECOVERY → CLOSED, and a recovery
// that loses re-reads and returns the winner's record.
//
// # Metrics and traces
//
// Config.MeterProvider gets the instruments below (names in metrics.go;
// the Prometheus exporter writes dots as underscores and adds the unit and
// _total: sluice_ledger_add_duration_seconds). They are fed at the I/O
// edges — the writer loop, the stream code, a read's collecting loop,
// Recover, the damage reporter — never by the ledger machines. An append
// costs two atomic adds and one histogram value without attributes;
// failures, ensemble changes, fallbacks and recoveries use attribute sets
// built once per distinct value and cached (bookie ids are bounded by the
// cluster's size).
//
//	sluice.ledger.add.duration       histogram s  append taken → acknowledged (Qa fsynced it and every earlier entry)
//	sluice.ledger.add.entries        counter      appends acknowledged
//	sluice.ledger.add.bytes          counter By   their payload bytes
//	sluice.ledger.add.failed         counter      appends taken that failed (callback with an error)
//	sluice.ledger.bookie.errors      counter      requests a bookie failed, by bookie, op (add, read, fence)
//	                                              and reason: timeout, unavailable (stream broke), rejected,
//	                                              fenced, unauthorized, error, checksum
//	sluice.ledger.ensemble_changes   counter      bookies replaced in a writer's ensemble, by the reason the
//	                                              bookie failed (timeout, unavailable, rejected, error) and
//	                                              result: replaced, rejoined (no spare; it came back), failed
//	                                              (an attempt that found no bookie or no catalog; retried)
//	sluice.ledger.recoveries         counter      Recover calls, by outcome: recovered, already_closed, failed
//	sluice.ledger.recovery.duration  histogram s  the same calls' time, by outcome
//	sluice.ledger.read.fallbacks     counter      entry reads sent to another copy, by reason: speculative,
//	                                              error, checksum, no_entry
//	sluice.ledger.damaged_copies     counter      damaged copies of CLOSED ledgers, by reason (missing,
//	                                              checksum) and result (marked in the catalog, dropped)
//	sluice.ledger.ledgers.created, .closed  counter  ledgers created, sealed by their writer
//	sluice.ledger.add_streams.opened counter      AddEntries streams opened (many: streams keep breaking)
//
// Config.TracerProvider makes a span per append made with a traced
// context (AppendAsyncContext, Append): SpanAdd ("ledger.add"), a child
// of the caller's span, from the call to the acknowledgement or failure,
// with the ledger id, entry id and payload size, and an event per bookie
// answer. Its context travels with the entry (Add.trace_context,
// bookkeeper/wire) so each bookie's journal-commit span is its child
// (bookkeeper/bookie, "Metrics and traces"). An append without a traced
// context gets no span — never a root span per entry — and with a no-op
// provider nothing is done at all. Recover with a traced context gets
// SpanRecover ("ledger.recover").
//
// # Locks
//
// Every mutex is a leaf: none is held while another is taken (apart from
// a Reader's mu, held across a call, under which the registry's is taken
// briefly), nor across an RPC, a catalog call or a callback. Writer.mu
// guards the append gate (state, outstanding count, the request channel,
// whose capacity makes the send under it non-blocking); registry.mu the
// address cache and placement counts; addMux.mu a shared stream's queue and
// subscribers; sendQueue.mu, inbox.mu and callbackQueue.mu their own
// queues; Client.mu the closed flag, Client.muxMu the streams by bookie;
// Reader.mu serializes a reader's calls.
//
// # Files
//
//	doc.go        this overview
//	config.go     Config, defaults, Validate; the default h2c HTTP client
//	errors.go     the client's errors
//	client.go     Client, New, Close, call registration, catalog helpers, Stats
//	registry.go   bookie ids → RPC clients (cache, identity check), ensemble placement
//	masterkey.go  MasterKey
//	wire.go       the RPC edge: answers → machine events, checksums
//	rpc.go        the unary RPCs (Fence, ReadEntries, ReadLac)
//	stream.go     addSet: a handle's pending adds per bookie, add timeouts; a recovery's own streams
//	mux.go        addMux: the client's shared AddEntries stream per bookie
//	lacwatch.go   lacMux: the client's shared WatchLac stream per bookie
//	writer.go     CreateLedger, Writer, its loop
//	ensemble.go   the writer's catalog operations: ensemble change, seal
//	callbacks.go  the callback dispatcher
//	recover.go    Recover
//	rereplicate.go Rereplicate: a closed ledger's copies moved off a lost bookie (bookkeeper/DESIGN.md §4.1)
//	drain.go       SetBookieDraining: start or cancel a bookie's draining (bookkeeper/DESIGN.md §4.2)
//	reader.go     Reader: Read, WaitLAC, Refresh; Client.ReadEntries
//	delete.go     DeleteLedger: drop a sealed ledger from its bookies (the compactor)
//	metrics.go    metric names and instruments, the append and recovery spans
//
// # Tests
//
// The tests run real bookies (bookkeeper/bookie, on in-memory filesystems)
// behind loopback h2c servers, registered in an embedded catalog, with
// goleak: appends, striping, close, ensemble change on a killed bookie and
// on an add timeout, no spare bookie, backpressure, recovery racing a live
// writer, concurrent recoveries, recovery keeping an entry on Qa bookies
// and working with a bookie down or failing without coverage, readers never
// past the LAC, tail reading with WaitLAC, read byte bounds, checksum
// mismatches, speculative reads; the metrics through a manual reader and
// the spans through a span recorder, across the real AddEntries stream
// (metrics_test.go).
package client

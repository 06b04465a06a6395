// Package sluice is the Go client SDK for Sluice: topic and group
// administration, an idempotent, batching, asynchronous producer
// (DESIGN.md §2.4, §2.7, §2.8, §3), a partition Reader and a consumer-group
// Consumer (see "Consuming"). It depends only on the generated API (pkg/gen), the record-batch
// format (pkg/record), Connect and the OpenTelemetry API (see "Tracing"); a test keeps it that way.
//
// # Usage
//
//	c, err := sluice.NewClient("127.0.0.1:7420") // gRPC over cleartext HTTP/2
//	if err != nil { ... }
//	defer c.Close()
//	if _, err := c.CreateTopic(ctx, "orders", 16, nil); err != nil { ... }
//
//	p, err := c.NewProducer(sluice.WithLinger(5*time.Millisecond))
//	if err != nil { ... }
//	defer p.Close(ctx) // flushes
//
//	// Asynchronous: the callback runs once the record is durable, or failed.
//	p.Produce(ctx, sluice.NewRecord("orders", []byte("customer-42"), payload), func(r sluice.Result) {
//		if r.Err != nil {
//			log.Printf("order not stored: %v (retriable: %v)", r.Err, sluice.IsRetriable(r.Err))
//		}
//	})
//
//	// Synchronous.
//	res, err := p.ProduceSync(ctx, sluice.NewRecord("orders", nil, payload))
//
// Note that Record.Partition's zero value is partition 0: NewRecord sets
// AnyPartition, which lets the producer choose (murmur2 of the key, as
// Kafka's default partitioner, so Kafka clients agree on where a key lives;
// the sticky partition for records without a key, KIP-480).
//
// # Delivery semantics
//
// A record's callback reports success only once the server has the record
// durable on the ack quorum of bookies; Result.Offset is its offset.
//
// With idempotence (the default) delivery is exactly-once per partition
// within a producer's lifetime: every retry — after an error, a broken
// stream or a server restart — resends the identical batch (same producer
// id, epoch and sequence numbers), and the server answers a retry of one of
// the producer's last 5 batches with the original offsets (Result.Duplicate)
// instead of storing it again. That is why at most 5 batches per partition
// are in flight: the server's dedup window. The producer id comes from the
// server (ProducerService.InitProducer, called once before the first batch
// is sent; failures are retried with backoff while records wait within
// their delivery timeout): no other producer has it. A server without a
// producer id store answers UNIMPLEMENTED, and the producer then takes a
// random positive int63 from crypto/rand — n such producers alive on a
// partition at once share an id with probability about n²/2⁶⁴, and two that
// do break each other's dedup. A partition that must start over with a new
// id (KIP-360's recovery) takes a random one too. The epoch starts at 0 per
// partition. A new producer (a restarted process) is a new id: records it
// resends on behalf of a previous process are not deduplicated.
//
// Without idempotence (WithIdempotence(false)) delivery is at-least-once: a
// retry of a batch the server stored but whose answer was lost stores it
// again, and with more than one batch in flight a retried batch may land
// after a later one.
//
// A record fails — its callback gets Err — when:
//   - the server refuses it for good (InvalidArgument, NotFound, other
//     FailedPrecondition, ...): it is not stored;
//   - it is not acknowledged within the delivery timeout
//     (ErrDeliveryTimeout): it may or may not be stored. A batch still in
//     flight at its deadline cannot be failed while its answer may come, so
//     the producer resets the stream (the other partitions' batches in
//     flight are resent on the next one, deduplicated);
//   - Close gives up on it (ErrClosed): it may or may not be stored;
//   - it is invalid or too large, or its topic unknown, before it is even
//     buffered (then the callback runs before Produce returns).
//
// IsRetriable is the SDK's one retryability classifier, used by the
// producer itself and offered to callers for their own decisions.
//
// # Ordering
//
// Records of one partition are stored in the order Produce was called for
// them (from one goroutine; concurrent calls are ordered by the producer's
// lock), and their callbacks run in that order. Per partition, batches are
// sent in order with at most WithMaxInFlightPerPartition unacknowledged.
// When an attempt fails retriably (UNAVAILABLE, RESOURCE_EXHAUSTED after the
// server's RetryInfo delay, a broken stream), the producer stops sending to
// that partition, waits for its batches in flight to settle (the ones
// behind the failed batch are refused as "out of order sequence" because
// it is missing — expected, they are retried too), then resends from the
// first unacknowledged batch, in order. A broken stream is reopened with
// backoff and everything unacknowledged is resent in order.
//
// When a batch fails for good, the partition's sequence numbers have a
// hole the server will not let later batches cross. The producer then does
// what Kafka does (KIP-360): it bumps the partition's producer epoch, renumbers
// the unacknowledged batches from sequence 0 (re-encoding them: the
// producer fields are under the CRC) and resends them; the server accepts a
// new epoch starting at 0. If the failed batch may have been stored (a
// delivery timeout), the producer first resends the next batch unchanged:
// accepted means there was no hole; "out of order" means there was, and
// only then is the epoch bumped. Either way no record is stored twice.
// Records fail individually; records after a failed one are not failed
// with it. A fenced epoch (another producer with our id) takes a new id.
//
// # Backpressure and limits
//
// Every buffer is bounded (see the With* options for defaults and bounds).
// WithMaxBufferedBytes bounds the record bytes between Produce and the
// callback; Produce blocks for space until its context ends (then
// ErrBufferFull), as franz-go does. Batches are sealed at WithBatchBytes
// or after WithLinger, and never exceed the topic's max.message.bytes (1
// MiB by default) nor the server's 4 MiB request limit; a single record
// larger than the batch size goes in a batch of its own. The server's
// RESOURCE_EXHAUSTED answers carry a delay the producer waits before it
// retries. Retries back off exponentially (WithRetryBackoff) and stop at the
// delivery timeout. Topic metadata (partition count, max.message.bytes)
// is fetched with DescribeTopic on a topic's first record and cached; a
// NotFound or bad-partition answer marks it stale, and the next record
// fetches it again.
//
// All batches go over one ProduceStream (a bidirectional gRPC or Connect
// stream) to the address given to NewClient; the server forwards batches
// of partitions another ingest copy owns (DescribeTopic's owner field is an
// owner id, not an address, so the SDK does not route to owners itself).
//
// # Consuming
//
// A Reader reads one partition with Fetch, outside any group; the
// application keeps the position:
//
//	r, err := c.NewReader("orders", 3, sluice.StartAt(sluice.Earliest()))
//	for {
//		rec, err := r.Next(ctx) // or r.Poll(ctx) for a batch
//		...
//	}
//
// Poll is one Fetch (a long poll of WithFetchMaxWait at the end of the
// partition); the Reader then asks for the server's next_offset, which
// skips compacted gaps. UNAVAILABLE, RESOURCE_EXHAUSTED (after its
// RetryInfo delay) and broken connections are retried with backoff
// (WithReadBackoff) for up to WithReadRetryTimeout, then the error wraps
// ErrRetriesExhausted. OUT_OF_RANGE is an *OffsetOutOfRangeError carrying
// the valid range (from the answer's google.rpc.ErrorInfo, reason
// OFFSET_OUT_OF_RANGE); Seek to recover.
//
// A Consumer is a member of a consumer group:
//
//	k, err := c.NewConsumer("billing", []string{"orders"})
//	defer k.Close(ctx) // commits what Poll returned, leaves the group
//	for {
//		recs, err := k.Poll(ctx)
//		if err != nil { ... }
//		for _, r := range recs { handle(r) }
//	}
//
// One Subscribe stream is one member session. The server leases
// partitions to members (AssignmentChanged) and sends records of the
// leased partitions on the stream, never beyond the credits granted. The
// Consumer grants a window (WithCreditWindow: records and bytes, bytes
// counted as key + value + header keys and values) when it subscribes and
// grants again as Poll hands records out, once half a window is free, so
// what it buffers stays within the window. GrantCredits is also the
// session's keepalive: the Consumer calls it at least every heartbeat
// interval the server gave (with zero credits if none are free), from its
// own goroutine, whether or not the application polls. A process paused
// for longer than the session timeout loses its leases like a dead one.
//
// Records arrive as the stored record batches (Kafka RecordBatch v2, as
// the producer sent them; SubscribeRequest.record_batches), which the
// Consumer and the Reader decode themselves: the server sends the bytes
// the ledger holds, and neither side encodes or decodes a protobuf message
// per record. Records of uncompressed batches share the received
// message's memory. A batch spends the offsets it covers and its stored
// size of the credits (the server reports it with each delivery). Browsers
// and JSON clients get one message per record instead.
//
// Processed offsets and at-least-once. A record counts as processed once
// Poll is called again after the Poll that returned it: the loop above
// calls Poll only after handling the previous records. Auto-commit (every
// WithAutoCommit interval, default 5 s) and commit on revoke commit
// processed offsets, so a crash, a revocation or a fenced lease makes
// records be consumed again, never skipped. Commit, CommitOffsets and
// Close (with auto-commit) are called by the application after handling
// and commit everything Poll returned (Close: then leaves the group). With
// WithAutoCommit(0) only Commit and CommitOffsets commit.
//
// Rebalancing. When a partition is revoked and not lost, the lease is held
// until the member commits it or the server's revoke timeout passes; the
// Consumer commits it at once in the background (its processed offset; with
// auto-commit off, the offset it last committed or started at, which
// releases the lease without moving past what the application committed)
// with the lease's epoch, and drops its buffered records. Lost partitions (lost=true, or a session that ended) are
// dropped without a commit. A commit answered FAILED_PRECONDITION means a
// lease moved (fencing): the Consumer finds the fenced partitions (from
// the answer's ErrorInfo LEASE_FENCED when it names them, else by
// splitting the commit in halves until each stands alone), drops them,
// and Commit returns a *FencedError naming them. OnAssigned and OnRevoked callbacks run inside Poll, before the
// records that follow the change. A failed stream (or one the server
// ends, e.g. on session expiry) is replaced by a new session, a new member
// id, after a backoff; WithReadRetryTimeout without a session fails the
// Consumer, and so do errors a new session cannot help (unknown topic,
// invalid group).
//
// Known limits of the API (raised with the server side): credits are
// additive, so a GrantCredits whose answer is lost cannot be retried
// safely; the Consumer counts it as not granted, and the server may then
// send up to that grant beyond the window. A byte window smaller than a
// record stalls the partition (the server sends no record beyond the
// credits); keep the window above the topics' max.message.bytes.
//
// Design of the Consumer. Goroutines, each with an owner, a stop signal
// and a waiter:
//   - run (owned by the Consumer; stopped by Close cancelling runCtx,
//     waited on runDone): opens sessions one after the other, and within a
//     session calls GrantCredits (keepalive and credits).
//   - the receiver, one per session (owned by run; stopped by cancelling
//     the session's context; waited before run opens the next session):
//     reads the stream and applies assignments and records.
//   - committer (owned by the Consumer; stopped by runCtx after Close's
//     final commit, waited on commitDone): runs every commit, one at a
//     time, so commits of a partition are stored in order: Commit,
//     CommitOffsets, Close's, auto-commit ticks, commit on revoke (first).
//
// Locks: Consumer.mu guards the session, the leased partitions, their
// buffers and offsets, the credit accounting and the callback events; it
// is never held across an RPC or user code. pollMu serializes Poll (and
// the callbacks it runs) and is taken before mu. Files: consume.go
// (records, positions, errors), consume_options.go (Reader and Consumer
// options), reader.go, consumer.go (Poll, state), consumer_session.go
// (sessions, credits, keepalive), consumer_commit.go (commits, fencing),
// groups.go (group admin).
//
// # Tracing
//
// A record carries the W3C trace context of the span it was produced in, in
// its "traceparent" (and "tracestate") headers, unless it has one of these
// headers already. WithTracerProvider adds spans: a client span per RPC
// (otelconnect, the context sent in the request headers, so the servers'
// spans join the trace), and a "send <topic>" producer span per record,
// from Produce to its outcome, which the record's headers then name. A
// consumer continues the producer's trace with StartProcessSpan (a
// "process <topic>" span, child of the producer's) or RecordContext:
//
//	c, _ := sluice.NewClient(addr, sluice.WithTracerProvider(tp))
//	...
//	for _, rec := range recs {
//		ctx, span := consumer.StartProcessSpan(ctx, rec)
//		handle(ctx, rec)
//		span.End()
//	}
//
// Without WithTracerProvider the SDK starts no span and a record produced
// outside any span gets no header: tracing costs nothing when unused.
//
// # Design
//
// Files: client.go (Client, admin helpers, HTTP/2 client), options.go
// (options, defaults, bounds, the one validation), producer.go (Produce,
// Flush, Close, buffer accounting, completer), partition.go (the
// per-partition state machine: batches, sequences, retries, epoch bumps),
// stream.go (the scheduling loop, the stream session, timers),
// metadata.go (topic cache), errors.go (errors and the classifier),
// hooks.go (observability callbacks).
//
// Goroutines, each with an owner, a stop signal and a waiter:
//   - loop (owned by the Producer; stopped by Close closing stop, waited
//     on loopDone): seals batches whose linger passed, fails batches past
//     their delivery timeout, re-sequences partitions, opens the stream and
//     hands batches to it within the in-flight bounds. It never blocks on
//     I/O.
//   - sender and receiver, one pair per stream (owned by the loop; stopped
//     by cancelling the stream's context; waited on the session's
//     WaitGroup before the loop requeues what was in flight and reconnects,
//     and before the loop exits): the sender writes requests in order (a
//     Send blocked by flow control blocks only it); the receiver reads
//     answers and settles batches.
//   - completer (owned by the Producer; told to stop by Close after the
//     loop exited, waited on compDone): runs callbacks and hooks in queue
//     order, off every lock, and only then releases buffer space — so
//     Flush returning means every callback has returned.
//
// Locks: Producer.mu guards all producer state — topics, partitions,
// batches, the stream session's queues, timers, the completion queue.
// buffer.mu guards buffer accounting only and is never held with mu
// (Produce reserves space before taking mu; the completer releases it
// after its callbacks). User code (callbacks, hooks) never runs under a
// lock. Encoding a record (Builder.Append) and sealing a batch (Build,
// which compresses) happen under mu; moving compression out of the lock is
// the next step if profiles show contention.
package sluice

// Package ingest is the write path: it serves sluice.v1.ProducerService
// (Produce, ProduceStream, InitProducer) and turns records into ledger
// entries on the bookies (docs/DESIGN.md §2.3 partition ownership, §2.4
// record batches and the produce path, §2.7 delivery semantics, §2.8
// backpressure; "Acknowledged means readable" and "Topic identity" in §4).
//
// A Service is one ingest copy. Every partition has at most one writer in
// the deployment, under a lease in the catalog (owner id and epoch): a copy
// writes the partitions it holds (partition.Writer, one per partition),
// forwards requests for partitions another live copy holds to that copy,
// and takes over partitions whose owner's heartbeat expired (recovering
// the previous writer's open ledger, which fences it). Balancing rounds
// move partitions toward every copy's fair share (package balance), and
// roll over every open ledger that names a bookie draining or missing
// from the registry (bookkeeper/DESIGN.md §4.1-4.2). At
// start-up a copy first takes back the partitions its owner id held before
// a restart (Ready); at shutdown it hands every partition over (writers
// drain and seal their ledgers) before its server drains.
//
// An answer is sent only once the entry holding the records is durable on
// the ledger's ack quorum; idempotent producers' retries are recognised
// (package dedup) and answered with their original offsets.
//
// # Files
//
//	ingest.go     Service: writer slots, routing (own / forward / take over), heartbeat, start-up reclaim, shutdown hand-over
//	produce.go    Produce and ProduceStream: validation, partitioning, batch building, answers in order, error mapping, quotas
//	schemas.go    validation at produce against the topic's schema.subject; dead letters
//	producers.go  InitProducer: producer ids and epochs from bookkeeping
//	forward.go    forwarding streams to the copies that own partitions
//	balance.go    the balancing rounds over package balance; the roll-over off leaving bookies
//	budget.go     the node-wide bound on buffered produce bytes
//	metrics.go    the copy's instruments (docs/metrics.md)
//	drain.go      the open ProduceStreams, closed at shutdown
//	ledgers.go    the ledger client adapted for partition writers
//	config.go     Config (limits and intervals, validated), Deps
//
// services/DESIGN.md has the goroutines, the lock order and the formats;
// README.md the behaviour in more words.
package ingest

package sluice

import "time"

// Hooks are observability callbacks: count, time and log batches without the
// SDK depending on a metrics library (franz-go's approach). Nil fields are
// skipped. Hooks run on the producer's completion goroutine, in the order
// the events happened and interleaved with the records' callbacks, never
// with an internal lock held; like callbacks they must be quick and must not
// block on the Producer (Produce with a full buffer, Flush, Close).
type Hooks struct {
	// OnBatchSent: one attempt to send a batch (first send or retry).
	OnBatchSent func(BatchInfo)
	// OnBatchAcked: the server stored the batch (Duplicate: it recognised a
	// retry of a batch it had already stored). BaseOffset is set.
	OnBatchAcked func(BatchInfo)
	// OnBatchRetried: an attempt failed with err and the batch will be sent
	// again (after a backoff, a reconnect, or the re-sequencing that follows
	// a failed batch; see the package doc).
	OnBatchRetried func(b BatchInfo, err error)
	// OnBatchFailed: the batch's records fail with err (their callbacks
	// follow).
	OnBatchFailed func(b BatchInfo, err error)
	// OnStreamError: the produce stream broke (or could not be opened); the
	// producer reconnects after a backoff and resends what was in flight.
	OnStreamError func(err error)
	// OnEpochBump: a partition's producer epoch was bumped (or its producer
	// id replaced) and its unacknowledged batches re-sequenced from 0.
	OnEpochBump func(topic string, partition int32, producerID int64, epoch int16)
}

// BatchInfo describes one batch for Hooks.
type BatchInfo struct {
	Topic     string
	Partition int32
	// Records and Bytes (encoded, as sent) in the batch.
	Records int
	Bytes   int
	// Idempotence fields (ProducerID -1 when idempotence is off).
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// Attempt counts sends of this batch, 1 for the first.
	Attempt int
	// Age is the time since the batch's first record was produced.
	Age time.Duration
	// BaseOffset and Duplicate are set for OnBatchAcked.
	BaseOffset int64
	Duplicate  bool
}

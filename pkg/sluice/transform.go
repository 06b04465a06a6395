package sluice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// LeaseOf returns the member id of the consumer's session and the lease
// epoch it holds tp under, if tp is leased to it now: what
// TransactionalProducer.SendOffsets needs to commit tp's offset in a
// transaction.
func (k *Consumer) LeaseOf(tp TopicPartition) (memberID string, epoch int64, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	lp := k.parts[tp]
	if lp == nil || k.sess == nil {
		return "", 0, false
	}
	return k.sess.memberID, lp.epoch, true
}

// Txn is the transaction a TransformFunc writes its output to.
type Txn struct {
	ctx  context.Context
	p    *TransactionalProducer
	errs []error // what Send and Flush failed with: the producer's, not fn's
}

// Send adds r to the transaction.
func (x *Txn) Send(r *Record) error { return x.note(x.p.Send(x.ctx, r)) }

// Flush writes what was sent so far (still invisible to read_committed
// readers until the transaction commits).
func (x *Txn) Flush() error { return x.note(x.p.Flush(x.ctx)) }

func (x *Txn) note(err error) error {
	if err != nil {
		x.errs = append(x.errs, err)
	}
	return err
}

// producers reports whether err (from fn) is, or wraps, one the producer
// returned.
func (x *Txn) producers(err error) bool {
	for _, e := range x.errs {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// ID names the transaction: its producer's transactional id and epoch
// (one epoch is one transaction).
func (x *Txn) ID() (transactionalID string, epoch int16) { return x.p.tid, x.p.Epoch() }

// TransformFunc processes records of one partition (in offset order) and
// sends its output to out. Returning an error aborts the transaction and
// ends RunTransactions with it (the records will be processed again by
// whoever runs next) — unless it is an error out's Send or Flush returned,
// or wraps ErrTransactionFailed, and a retry may clear its cause (the
// server unavailable, a connection cut; see IsRetriable): then the
// transaction is run again, fn called again with the same records.
type TransformFunc func(ctx context.Context, tp TopicPartition, records []ConsumedRecord, out *Txn) error

// RunTransactions is an exactly-once consume-transform-produce loop: it
// polls records, hands each partition's to fn, and commits fn's output and
// the partition's consumer offset in one transaction, so that a
// read_committed reader of the output sees the result of every input
// record exactly once — through crashes, restarts and rebalances. It
// returns when ctx ends (nil) or on an error it cannot get past.
//
// Each input partition has its own transactional producer, of id
// prefix + "." + group + "." + topic + "." + partition: when a partition
// comes to this consumer, its producer's InitProducer fences the previous
// owner's (a zombie cannot commit any more) and waits for a transaction
// it left half-way to be aborted or completed; then the loop reads the
// group's committed offset and skips records below it — ones the previous
// owner's last transaction already committed. (Kafka's exactly-once before
// KIP-447; one producer per partition.) SendOffsets names the lease epoch,
// so a partition that moved meanwhile fails its transaction, which is
// aborted, and the partition is dropped here.
//
// The Consumer must not commit on its own: create it with
// WithAutoCommit(0) and WithCommitOnRevoke(false). Its input may be read
// committed or not (WithReadCommitted), as the input's writers need.
func (k *Consumer) RunTransactions(ctx context.Context, prefix string, fn TransformFunc, opts ...TxnOption) error {
	if k.cfg.autoCommit != 0 || k.cfg.commitOnRevoke {
		return fmt.Errorf("%w: RunTransactions commits offsets in its transactions: create the Consumer with WithAutoCommit(0) and WithCommitOnRevoke(false)", ErrInvalidOption)
	}
	if prefix == "" {
		return fmt.Errorf("%w: RunTransactions needs a transactional id prefix", ErrInvalidOption)
	}
	parts := map[TopicPartition]*txnPart{}
	defer func() {
		for _, pt := range parts {
			_ = pt.p.Close(context.WithoutCancel(ctx))
		}
	}()
	for {
		recs, err := k.Poll(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		// Producers of partitions no longer leased here are closed: a
		// new owner's fences them anyway.
		for tp, pt := range parts {
			if _, _, ok := k.LeaseOf(tp); !ok {
				_ = pt.p.Close(ctx)
				delete(parts, tp)
			}
		}
		for _, run := range byPartition(recs) {
			if err := k.transact(ctx, prefix, parts, run, fn, opts); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
}

// txnPart is RunTransactions' state of one input partition: its producer,
// and the offset from which records are still to be processed.
type txnPart struct {
	p    *TransactionalProducer
	from int64
}

// Backoff between attempts of a transaction that failed for a reason a
// retry may clear.
const (
	txnRetryMin = 100 * time.Millisecond
	txnRetryMax = 5 * time.Second
)

// transact runs one transaction over run, records of one partition. A
// transaction that fails for a reason a retry may clear (the server
// unavailable, a connection cut, the coordinator busy, its timeout) is aborted and run
// again — with a new producer session, whose InitProducer waits for the
// failed one to end and whose re-read of the committed offset skips what
// it committed if it did — for as long as the partition is leased here.
// A fenced producer or lease means the partition moved: it is dropped and
// the loop goes on. Other errors (fn's own, bad records) end
// RunTransactions.
func (k *Consumer) transact(ctx context.Context, prefix string, parts map[TopicPartition]*txnPart, run []ConsumedRecord, fn TransformFunc, opts []TxnOption) error {
	tp := TopicPartition{Topic: run[0].Topic, Partition: run[0].Partition}
	wait := txnRetryMin
	for {
		byFn, err := k.transactOnce(ctx, prefix, parts, tp, run, fn, opts)
		switch {
		case err == nil || ctx.Err() != nil:
			return err
		case errors.Is(err, ErrFenced), errors.Is(err, ErrProducerFenced):
			// The partition moved: its new owner's producer fenced this
			// one, or the lease did. Drop it; the new owner goes on.
			k.log.Info("sluice: transactional partition moved; dropping it", slog.String("partition", tp.String()), slog.Any("err", err))
			k.dropTxnPart(ctx, parts, tp)
			if _, _, ok := k.LeaseOf(tp); ok {
				// Still leased here, as far as this session knows — the
				// lease moved and the word has not come yet, or the
				// coordinator aborted the transaction (its timeout): the
				// records of run were consumed and not processed, and the
				// next ones must not be processed without them. A new
				// session starts every lease at its committed offset (as
				// Kafka Streams rejoins on a fenced producer).
				k.restartSession(fmt.Errorf("partition %s: transactional producer fenced while leased here: %w", tp, err))
			}
			return nil
		case errors.Is(err, ErrTxnTimedOut):
			// The coordinator aborted it past its timeout: run it again
			// (below), from the committed offset.
		case byFn || !IsRetriable(err):
			return err
		}
		k.dropTxnPart(ctx, parts, tp)
		if _, _, ok := k.LeaseOf(tp); !ok {
			return nil // revoked meanwhile: the next owner processes them
		}
		k.log.Warn("sluice: transaction failed; running it again", slog.String("partition", tp.String()), slog.Any("err", err), slog.Duration("wait", wait))
		if sleepCtx(ctx, wait) != nil {
			return nil
		}
		wait = min(2*wait, txnRetryMax)
	}
}

// dropTxnPart closes tp's producer (aborting what it has open) and forgets
// it.
func (k *Consumer) dropTxnPart(ctx context.Context, parts map[TopicPartition]*txnPart, tp TopicPartition) {
	if pt := parts[tp]; pt != nil {
		_ = pt.p.Close(context.WithoutCancel(ctx))
		delete(parts, tp)
	}
}

// transactOnce is one attempt of transact; byFn reports that the error is
// fn's own (not one its Txn's Send or Flush returned).
func (k *Consumer) transactOnce(ctx context.Context, prefix string, parts map[TopicPartition]*txnPart, tp TopicPartition, run []ConsumedRecord, fn TransformFunc, opts []TxnOption) (byFn bool, err error) {
	pt := parts[tp]
	if pt == nil {
		if _, _, ok := k.LeaseOf(tp); !ok {
			return false, nil // revoked meanwhile: never fence the new owner
		}
		tid := prefix + "." + k.group + "." + tp.Topic + "." + strconv.Itoa(int(tp.Partition))
		p, err := k.client.NewTransactionalProducer(ctx, tid, opts...)
		if err != nil {
			return false, err
		}
		// The previous owner's transactions are finished now: the
		// committed offset is final.
		from, err := k.committedOffset(ctx, tp)
		if err != nil {
			_ = p.Close(ctx)
			return false, err
		}
		pt = &txnPart{p: p, from: from}
		parts[tp] = pt
	}
	i := 0
	for i < len(run) && run[i].Offset < pt.from {
		i++
	}
	run = run[i:]
	if len(run) == 0 {
		return false, nil
	}
	member, epoch, ok := k.LeaseOf(tp)
	if !ok {
		return false, nil // revoked meanwhile: the next owner processes them
	}
	if err := pt.p.Begin(); err != nil {
		return false, err
	}
	out := &Txn{ctx: ctx, p: pt.p}
	if err := fn(ctx, tp, run, out); err != nil {
		_ = pt.p.Abort(ctx)
		// fn passing on the producer's error is the producer's failure;
		// ErrTransactionFailed is how fn asks for the same.
		return !out.producers(err) && !errors.Is(err, ErrTransactionFailed), err
	}
	next := run[len(run)-1].Offset + 1
	err = pt.p.SendOffsets(ctx, k.group, member, map[TopicPartition]LeasedOffset{tp: {Offset: next, Epoch: epoch}})
	if err == nil {
		err = pt.p.Commit(ctx)
	}
	if err != nil {
		_ = pt.p.Abort(ctx)
		return false, err
	}
	pt.from = next
	return false, nil
}

// committedOffset is the group's committed offset of tp; -1 when none.
func (k *Consumer) committedOffset(ctx context.Context, tp TopicPartition) (int64, error) {
	g, err := k.client.DescribeGroup(ctx, k.group)
	if err != nil {
		return 0, err
	}
	for _, p := range g.GetPartitions() {
		if p.GetTopic() == tp.Topic && p.GetPartition() == tp.Partition {
			return p.GetCommittedOffset(), nil
		}
	}
	return -1, nil
}

// byPartition splits records into runs of one partition, keeping their
// order.
func byPartition(recs []ConsumedRecord) [][]ConsumedRecord {
	var out [][]ConsumedRecord
	idx := map[TopicPartition]int{}
	for _, r := range recs {
		tp := TopicPartition{Topic: r.Topic, Partition: r.Partition}
		i, ok := idx[tp]
		if !ok {
			i = len(out)
			idx[tp] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

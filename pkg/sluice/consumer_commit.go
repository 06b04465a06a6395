package sluice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// maxCommitOffsets is the server's bound on the offsets of one Commit.
const maxCommitOffsets = 10_000

// minRevokeCommitTime is the least time a commit on revoke gets, even when
// the revoke timeout is shorter (the server decides then; a late commit is
// fenced, which is harmless).
const minRevokeCommitTime = 100 * time.Millisecond

// commitMode says which offsets a commit takes.
type commitMode uint8

const (
	// commitPolled: every record Poll returned (Commit, Close).
	commitPolled commitMode = iota + 1
	// commitDone: the records earlier Polls returned (auto-commit).
	commitDone
	// commitGiven: the offsets the application gave (CommitOffsets).
	commitGiven
)

// commitReq asks the committer for a commit and waits on reply.
type commitReq struct {
	ctx     context.Context
	mode    commitMode
	offsets map[TopicPartition]int64 // commitGiven
	reply   chan error
}

// commitEntry is one offset to commit, for a partition of the session.
type commitEntry struct {
	p      *leasedPart
	offset int64
	epoch  int64
}

// committer runs every commit, one at a time so that commits of one
// partition are stored in the order they were made: explicit ones (Commit,
// CommitOffsets, Close's), auto-commit's ticks and commit on revoke. Owned
// by the Consumer; it stops when runCtx ends (after Close's commit) and
// closes commitDone.
func (k *Consumer) committer() {
	defer close(k.commitDone)
	var tick <-chan time.Time
	if k.cfg.autoCommit > 0 {
		t := time.NewTicker(k.cfg.autoCommit)
		defer t.Stop()
		tick = t.C
	}
	for {
		// Revocations first: their leases are held for a short time only.
		select {
		case <-k.revokeWake:
			k.commitRevoked()
			continue
		default:
		}
		select {
		case <-k.runCtx.Done():
			return
		case <-k.revokeWake:
			k.commitRevoked()
		case req := <-k.commitReqs:
			req.reply <- k.commit(req.ctx, req.mode, req.offsets)
		case <-tick:
			ctx, cancel := context.WithTimeout(k.runCtx, min(k.cfg.retryTimeout, max(k.cfg.autoCommit, time.Second)))
			if err := k.commit(ctx, commitDone, nil); err != nil && k.runCtx.Err() == nil {
				k.log.Warn("sluice: auto-commit failed", slog.Any("err", err))
			}
			cancel()
		}
	}
}

// requestCommit hands a commit to the committer and waits for its result.
func (k *Consumer) requestCommit(ctx context.Context, req commitReq) error {
	req.ctx, req.reply = ctx, make(chan error, 1)
	select {
	case k.commitReqs <- req:
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-k.commitDone:
		return ErrClosed
	}
	return <-req.reply // the committer answers once req.ctx ends at the latest
}

// commit collects the offsets of mode, commits them under the session's
// member id and lease epochs, and applies the outcome. On the committer.
func (k *Consumer) commit(ctx context.Context, mode commitMode, given map[TopicPartition]int64) error {
	k.mu.Lock()
	s := k.sess
	var entries []commitEntry
	var unassigned []TopicPartition
	add := func(p *leasedPart, offset int64) {
		entries = append(entries, commitEntry{p: p, offset: offset, epoch: p.epoch})
	}
	switch mode {
	case commitPolled, commitDone:
		for _, p := range k.parts {
			o := p.polled
			if mode == commitDone {
				o = p.done
			}
			if o >= 0 && o > p.committed {
				add(p, o)
			}
		}
	case commitGiven:
		for tp, o := range given {
			if p := k.parts[tp]; p != nil {
				add(p, o)
			} else {
				unassigned = append(unassigned, tp)
			}
		}
	}
	k.mu.Unlock()
	var errs []error
	if len(unassigned) > 0 {
		errs = append(errs, fmt.Errorf("%w: group %q: %s", ErrNotAssigned, k.group, tpList(sortTPs(unassigned))))
	}
	if s == nil || len(entries) == 0 {
		return errors.Join(errs...)
	}
	ok, fenced, fenceErr, err := k.send(ctx, s.memberID, entries)
	k.applyCommit(ok, fenced)
	if len(fenced) > 0 {
		errs = append(errs, k.fencedError(fenced, fenceErr))
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("sluice: group %q: commit: %w", k.group, err))
	}
	return errors.Join(errs...)
}

// commitRevoked commits the partitions revoked (not lost), which releases
// their leases: the processed offsets with auto-commit on, else the ones
// last committed or started at (so the lease goes at once without moving
// past what the application committed). It
// gives up at the revoke timeout; the server releases the leases then.
func (k *Consumer) commitRevoked() {
	k.mu.Lock()
	s := k.sess
	var entries []commitEntry
	var by time.Time
	for tp, p := range k.revoking {
		o := p.committed
		if k.cfg.autoCommit > 0 {
			o = max(p.done, p.committed)
		}
		if o < 0 {
			delete(k.revoking, tp) // nothing known to commit: the timeout releases it
			continue
		}
		entries = append(entries, commitEntry{p: p, offset: o, epoch: p.epoch})
		if by.IsZero() || p.revokeBy.Before(by) {
			by = p.revokeBy
		}
	}
	k.mu.Unlock()
	if s == nil || len(entries) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(k.runCtx, later(by, time.Now().Add(minRevokeCommitTime)))
	defer cancel()
	ok, fenced, fenceErr, err := k.send(ctx, s.memberID, entries)
	k.applyCommit(ok, fenced)
	if len(fenced) > 0 {
		k.log.Warn("sluice: commit on revoke fenced", slog.Any("err", k.fencedError(fenced, fenceErr)))
	}
	if err != nil && k.runCtx.Err() == nil {
		k.log.Warn("sluice: commit on revoke failed; the records after the last commit will be consumed again",
			slog.Any("err", err))
	}
	k.mu.Lock()
	for _, e := range entries { // done with them, whatever happened
		if k.revoking[e.p.tp] == e.p {
			delete(k.revoking, e.p.tp)
		}
	}
	k.mu.Unlock()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// applyCommit records stored offsets and drops fenced partitions (OnRevoked
// with lost). Entries of partitions leased again since are left alone.
func (k *Consumer) applyCommit(ok, fenced []commitEntry) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, e := range ok {
		e.p.committed = e.offset
		if k.revoking[e.p.tp] == e.p {
			delete(k.revoking, e.p.tp)
		}
	}
	var lost []TopicPartition
	for _, e := range fenced {
		tp := e.p.tp
		if k.revoking[tp] == e.p {
			delete(k.revoking, tp)
		}
		if k.parts[tp] == e.p {
			delete(k.parts, tp)
			k.dropBuffer(e.p)
			lost = append(lost, tp)
		}
	}
	k.queueEvent(lost, true, true)
	k.wakeGrant()
}

func (k *Consumer) fencedError(fenced []commitEntry, err error) *FencedError {
	fe := &FencedError{Group: k.group, Err: err}
	for _, e := range fenced {
		fe.Partitions = append(fe.Partitions, e.p.tp)
	}
	sortTPs(fe.Partitions)
	return fe
}

// send commits entries in Commits of at most maxCommitOffsets, and finds
// the fenced ones when a Commit is refused with FAILED_PRECONDITION (one
// fenced lease fails the others of its topic with it: the server's commit
// is one conditional write per topic). If the answer names them (a
// google.rpc.ErrorInfo with reason LEASE_FENCED, see fencedPartitions),
// they are set apart and the rest is sent again; another ErrorInfo reason
// is a conflict that is not fencing (an offset moving backwards) and fails
// the commit. Without an ErrorInfo the entries are split in halves until
// each fenced one stands alone: k fenced of n cost about 2k·log₂(n) extra
// calls. Entries sent again that the server had stored already are stored
// again, harmlessly. It returns the stored entries, the fenced ones (with
// the last fencing error) and the error that stopped it.
func (k *Consumer) send(ctx context.Context, member string, entries []commitEntry) (ok, fenced []commitEntry, fenceErr, err error) {
	var split func([]commitEntry) error
	split = func(es []commitEntry) error {
		err := k.commitRPC(ctx, member, es)
		if err == nil {
			ok = append(ok, es...)
			return nil
		}
		if connect.CodeOf(err) != connect.CodeFailedPrecondition {
			return err
		}
		named, reason := fencedPartitions(err)
		switch {
		case reason == reasonLeaseFenced:
			var rest []commitEntry
			for _, e := range es {
				if named[e.p.tp] {
					fenced, fenceErr = append(fenced, e), err
				} else {
					rest = append(rest, e)
				}
			}
			if len(rest) == len(es) {
				return err // it names none of ours: do not loop
			}
			if len(rest) == 0 {
				return nil
			}
			return split(rest)
		case reason != "":
			return err
		case len(es) == 1:
			fenced, fenceErr = append(fenced, es[0]), err
			return nil
		}
		if err := split(es[:len(es)/2]); err != nil {
			return err
		}
		return split(es[len(es)/2:])
	}
	for len(entries) > 0 {
		n := min(len(entries), maxCommitOffsets)
		if err := split(entries[:n]); err != nil {
			return ok, fenced, fenceErr, err
		}
		entries = entries[n:]
	}
	return ok, fenced, fenceErr, nil
}

// reasonLeaseFenced is the google.rpc.ErrorInfo reason (domain sluice.dev)
// of a Commit refused because leases moved; its metadata names them:
// "topic" and "partitions" (comma-separated numbers), one ErrorInfo per
// topic. A server that does not send it is handled by bisecting.
const reasonLeaseFenced = "LEASE_FENCED"

// fencedPartitions reads the partitions a FAILED_PRECONDITION names, and
// the reason of its first Sluice ErrorInfo ("" when it has none).
func fencedPartitions(err error) (map[TopicPartition]bool, string) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil, ""
	}
	named := make(map[TopicPartition]bool)
	reason := ""
	for _, d := range ce.Details() {
		msg, derr := d.Value()
		if derr != nil {
			continue
		}
		info, ok := msg.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != errorDomain {
			continue
		}
		if reason == "" {
			reason = info.GetReason()
		}
		if info.GetReason() != reasonLeaseFenced {
			continue
		}
		topic := info.GetMetadata()["topic"]
		for _, f := range strings.Split(info.GetMetadata()["partitions"], ",") {
			if p, perr := strconv.ParseInt(strings.TrimSpace(f), 10, 32); perr == nil {
				named[TopicPartition{topic, int32(p)}] = true
			}
		}
	}
	return named, reason
}

// commitRPC is one Commit, retried while retriable until ctx ends or
// WithReadRetryTimeout passes.
func (k *Consumer) commitRPC(ctx context.Context, member string, es []commitEntry) error {
	req := &sluicev1.CommitRequest{Group: k.group, MemberId: member, Offsets: make([]*sluicev1.CommitOffset, len(es))}
	for i, e := range es {
		req.Offsets[i] = &sluicev1.CommitOffset{Topic: e.p.tp.Topic, Partition: e.p.tp.Partition, Offset: e.offset, LeaseEpoch: e.epoch}
	}
	deadline := time.Now().Add(k.cfg.retryTimeout)
	for attempt := 1; ; attempt++ {
		_, err := k.client.consumer.Commit(ctx, connect.NewRequest(req))
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (last error: %w)", context.Cause(ctx), err)
		}
		class, delay := classify(err)
		if class != classRetriable {
			return err
		}
		wait := max(k.cfg.backoff(attempt), delay)
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%w: commit for %v: %w", ErrRetriesExhausted, k.cfg.retryTimeout, err)
		}
		if serr := sleepCtx(ctx, wait); serr != nil {
			return fmt.Errorf("%w (last error: %w)", serr, err)
		}
	}
}

func tpList(tps []TopicPartition) string {
	names := make([]string, len(tps))
	for i, tp := range tps {
		names[i] = tp.String()
	}
	return strings.Join(names, ", ")
}

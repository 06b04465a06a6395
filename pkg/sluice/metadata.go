package sluice

import (
	"context"
	"fmt"
	"strconv"
	"time"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/record/partition"
)

// defaultMaxMessageBytes is the server's default max.message.bytes, used
// when a topic's config does not say.
const defaultMaxMessageBytes = 1 << 20

// topicMeta is what the producer knows of a topic: from DescribeTopic,
// cached until an answer says it is stale (NotFound, a bad partition).
// Fields are guarded by Producer.mu.
type topicMeta struct {
	name        string
	nparts      int32 // 0 until loaded
	partitioner *partition.Partitioner
	lim         record.Limits // batch limits (max.message.bytes)
	batchBytes  int           // seal at this size: min(WithBatchBytes, limit)
	// parts are the partitions' states, by partition number. They are kept
	// even if the topic shrinks (a recreated topic): they hold sequence
	// numbers and queued batches.
	parts   []*partState
	stale   bool
	loading chan struct{} // closed when the running DescribeTopic ends
	loadErr error         // of the last DescribeTopic
}

// topic returns the topic's metadata, loading it (once, however many
// callers wait) if it is unknown or stale.
func (p *Producer) topic(ctx context.Context, name string) (*topicMeta, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: topic required", ErrInvalidRecord)
	}
	for {
		p.mu.Lock()
		tm := p.topics[name]
		if tm == nil {
			tm = &topicMeta{name: name}
			p.topics[name] = tm
		}
		if tm.nparts > 0 && !tm.stale {
			p.mu.Unlock()
			return tm, nil
		}
		if ch := tm.loading; ch != nil {
			p.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, fmt.Errorf("sluice: topic %q metadata: %w", name, context.Cause(ctx))
			}
			p.mu.Lock()
			ok, err := tm.nparts > 0 && !tm.stale, tm.loadErr
			p.mu.Unlock()
			if ok {
				return tm, nil
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		ch := make(chan struct{})
		tm.loading = ch
		p.mu.Unlock()

		info, err := p.describe(ctx, name)
		p.mu.Lock()
		if err == nil {
			err = p.applyTopic(tm, info)
		}
		tm.loading, tm.loadErr = nil, err
		if err == nil {
			tm.stale = false
		} else if tm.nparts == 0 && p.topics[name] == tm {
			delete(p.topics, name) // do not keep unknown topics around
		}
		close(ch)
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return tm, nil
	}
}

// describe calls DescribeTopic, retrying retriable errors with backoff
// until ctx ends, the delivery timeout passes or the producer closes.
func (p *Producer) describe(ctx context.Context, name string) (*sluicev1.TopicInfo, error) {
	deadline := time.Now().Add(p.cfg.deliveryTimeout)
	for attempt := 1; ; attempt++ {
		info, err := p.client.DescribeTopic(ctx, name)
		if err == nil {
			return info, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("sluice: topic %q metadata: %w", name, context.Cause(ctx))
		}
		if !IsRetriable(err) {
			return nil, err
		}
		wait := p.backoff(attempt)
		if time.Now().Add(wait).After(deadline) {
			return nil, fmt.Errorf("%w: topic %q metadata: %w", ErrDeliveryTimeout, name, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("sluice: topic %q metadata: %w (last error: %w)", name, context.Cause(ctx), err)
		case <-p.stop:
			t.Stop()
			return nil, ErrClosed
		}
	}
}

// applyTopic takes in a DescribeTopic answer. Called with p.mu held.
func (p *Producer) applyTopic(tm *topicMeta, info *sluicev1.TopicInfo) error {
	n := int32(len(info.GetPartitions()))
	if n <= 0 {
		return fmt.Errorf("sluice: topic %q described with no partitions", tm.name)
	}
	maxMsg := defaultMaxMessageBytes
	if v, ok := info.GetConfig()["max.message.bytes"]; ok {
		if m, err := strconv.Atoi(v); err == nil && m > 0 {
			maxMsg = m
		}
	}
	hard := min(maxMsg, maxRequestBatchBytes)
	if tm.partitioner == nil {
		pt, err := partition.New(n, nil)
		if err != nil {
			return fmt.Errorf("sluice: topic %q: %w", tm.name, err)
		}
		tm.partitioner = pt
	} else if err := tm.partitioner.SetPartitions(n); err != nil {
		return fmt.Errorf("sluice: topic %q: %w", tm.name, err)
	}
	tm.nparts = n
	tm.lim = record.Limits{MaxBatchBytes: hard}
	tm.batchBytes = min(p.cfg.batchBytes, hard)
	for int32(len(tm.parts)) < n {
		tm.parts = append(tm.parts, p.newPartState(tm, int32(len(tm.parts))))
	}
	return nil
}

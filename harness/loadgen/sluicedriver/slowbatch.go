package sluicedriver

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/logevery"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// slowBatches reports produce batches acknowledged later than limit after
// their first record, with the age at which they were (last) sent: a batch
// that waited long before its send queued in the producer (linger, the
// in-flight bound, the stream); one sent young and acknowledged old spent
// its time in the server or on the way back.
type slowBatches struct {
	limit time.Duration
	out   io.Writer

	lines logevery.Limiter

	mu      sync.Mutex
	sentAge map[batchKey]time.Duration // bounded by the producer's in-flight batches
}

type batchKey struct {
	partition int32
	seq       int32
	epoch     int16
	pid       int64
}

func newSlowBatches(limit time.Duration, out io.Writer) *slowBatches {
	return &slowBatches{limit: limit, out: out, sentAge: map[batchKey]time.Duration{}}
}

func keyOf(b sluice.BatchInfo) batchKey {
	return batchKey{b.Partition, b.BaseSequence, b.ProducerEpoch, b.ProducerID}
}

func (s *slowBatches) hooks() sluice.Hooks {
	return sluice.Hooks{
		OnBatchSent: func(b sluice.BatchInfo) {
			s.mu.Lock()
			s.sentAge[keyOf(b)] = b.Age
			s.mu.Unlock()
		},
		OnBatchAcked: func(b sluice.BatchInfo) { s.done(b) },
		OnBatchFailed: func(b sluice.BatchInfo, _ error) {
			s.mu.Lock()
			delete(s.sentAge, keyOf(b))
			s.mu.Unlock()
		},
	}
}

func (s *slowBatches) done(b sluice.BatchInfo) {
	now := time.Now()
	s.mu.Lock()
	k := keyOf(b)
	sent, ok := s.sentAge[k]
	delete(s.sentAge, k)
	s.mu.Unlock()
	if b.Age < s.limit {
		return
	}
	logged, others := s.lines.Allow(now)
	if !logged {
		return
	}
	sentAt := "unknown"
	if ok {
		sentAt = sent.Round(100 * time.Microsecond).String()
	}
	fmt.Fprintf(s.out, "[sluice] %s slow batch: partition %d, %d records, acknowledged %v after its first record, sent at %s (attempt %d); %d more since the last line\n",
		now.UTC().Format("15:04:05.000"), b.Partition, b.Records, b.Age.Round(100*time.Microsecond), sentAt, b.Attempt, others)
}

package journal

import (
	"sync/atomic"
	"time"
)

// Hooks observe the journal without tying it to a metrics library. Every
// hook is optional and runs on the journal's writer goroutine, so it must be
// fast and must not block or call back into the Journal.
type Hooks struct {
	// GroupCommitted is called after each group's write and fsync, whether
	// they succeeded or not.
	GroupCommitted func(GroupInfo)
	// FileRotated is called after a new journal file became durable.
	FileRotated func(fileSeq uint64)
}

// GroupInfo describes one group commit.
type GroupInfo struct {
	Records   int           // records in the group
	Bytes     int           // bytes written, framing included
	FirstSeq  uint64        // sequence number of the group's first record
	Wait      time.Duration // from the first record being queued to the write starting
	WriteTime time.Duration // the write call
	SyncTime  time.Duration // the fdatasync call
	Err       error         // nil, or the failure that failed the journal
}

// Stats are cumulative counters since Open.
type Stats struct {
	Appends      uint64        // records acknowledged as durable
	AppendBytes  uint64        // payload bytes acknowledged as durable
	Groups       uint64        // successful group commits (one write + one fdatasync each)
	GroupBytes   uint64        // bytes written by group commits, framing included
	SyncTime     time.Duration // total time in group fdatasync calls
	MaxSyncTime  time.Duration // slowest group fdatasync
	Rotations    uint64        // journal files started after the one created at Open
	Reused       uint64        // journal files started (at Open or rotation) in a recycled file
	QueueFullErr uint64        // Append calls that gave up with ErrQueueFull
}

// stats is the lock-free home of Stats.
type stats struct {
	appends, appendBytes, groups, groupBytes atomic.Uint64
	syncNanos, maxSyncNanos                  atomic.Int64
	rotations, queueFull, reused             atomic.Uint64
}

func (s *stats) snapshot() Stats {
	return Stats{
		Appends:      s.appends.Load(),
		AppendBytes:  s.appendBytes.Load(),
		Groups:       s.groups.Load(),
		GroupBytes:   s.groupBytes.Load(),
		SyncTime:     time.Duration(s.syncNanos.Load()),
		MaxSyncTime:  time.Duration(s.maxSyncNanos.Load()),
		Rotations:    s.rotations.Load(),
		Reused:       s.reused.Load(),
		QueueFullErr: s.queueFull.Load(),
	}
}

// recordSync is called by the writer goroutine only, so the max needs no CAS.
func (s *stats) recordSync(d time.Duration) {
	s.syncNanos.Add(int64(d))
	if int64(d) > s.maxSyncNanos.Load() {
		s.maxSyncNanos.Store(int64(d))
	}
}

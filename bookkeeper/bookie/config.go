package bookie

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/bookkeeper/journal"
	"github.com/sluicemq/sluice/bookkeeper/storage"
)

// Defaults for zero Config fields.
const (
	DefaultMaxEntryBytes   = 8 << 20  // the bookie protocol's entry limit
	DefaultMaxReadBytes    = 16 << 20 // the bookie protocol's read response limit
	DefaultMaxInFlightAdds = 1024     // per AddEntries stream
	// DefaultAddMessageOverhead is what MaxAddMessageBytes allows beyond
	// MaxEntryBytes by default: room for the ids, checksums and master key
	// around the payloads of one AddEntries message.
	DefaultAddMessageOverhead = 64 << 10
	// minAddMessageOverhead is the least MaxAddMessageBytes must allow
	// beyond MaxEntryBytes: one add of the largest size with the largest
	// master key and its framing.
	minAddMessageOverhead     = storage.MaxMasterKeySize + 1024
	DefaultMaxLacWait         = 30 * time.Second
	DefaultMaxLacWaiters      = 10_000
	DefaultAddQueueWait       = 2 * time.Second
	DefaultCheckpointInterval = 10 * time.Second
	DefaultCheckpointBytes    = 256 << 20
	DefaultGCInterval         = 10 * time.Minute
	DefaultDiskCheckInterval  = 10 * time.Second
	DefaultReadOnlyAt         = 0.95
	DefaultWritableBelow      = 0.90
	DefaultHeartbeatInterval  = 5 * time.Second
	DefaultHeartbeatTTL       = 15 * time.Second
)

// Config configures a bookie. Zero fields take the documented defaults;
// Validate reports every violation at once.
type Config struct {
	// ID is this bookie's id in the cluster (required): the name ensembles
	// use, recorded in every cookie.
	ID string
	// InstanceID is the cluster's instance id (required), recorded in every
	// cookie so a disk of another cluster is refused.
	InstanceID string
	// Dir is the bookie's data directory (required). The journal, the entry
	// logs and the index live in its "journal", "ledgers" and "index"
	// subdirectories unless JournalDir, LedgerDir or IndexDir name others
	// (another disk each, as BookKeeper recommends for the journal).
	Dir                             string
	JournalDir, LedgerDir, IndexDir string
	// RequireStorageID is the storage id this bookie recorded when it first
	// joined the cluster; with it, a bookie whose every directory was wiped
	// refuses to start instead of looking brand new. Empty skips the check.
	RequireStorageID string
	// FS is the filesystem; nil means vfs.Default.
	FS vfs.FS
	// Logger receives the bookie's events; nil discards them.
	Logger *slog.Logger
	// MeterProvider receives the bookie's metrics (package doc, "Metrics
	// and traces"); nil records none.
	MeterProvider metric.MeterProvider
	// TracerProvider makes the bookie's spans: one per traced add, the
	// child of the client's add span (Add.trace_context). Nil, or a no-op
	// provider, makes none and costs nothing per add.
	TracerProvider trace.TracerProvider

	// MaxEntryBytes bounds one entry's payload. Zero means
	// DefaultMaxEntryBytes; at most storage.MaxEntrySizeLimit.
	MaxEntryBytes int
	// MaxReadBytes bounds one ReadEntries response's payload bytes. Zero
	// means DefaultMaxReadBytes; at least MaxEntryBytes.
	MaxReadBytes int
	// MaxInFlightAdds bounds the adds one AddEntries stream has sent and not
	// yet seen answered; the server stops reading the stream beyond it
	// (flow control pushes back to the client). Zero means
	// DefaultMaxInFlightAdds. It also bounds the adds of one AddEntries
	// message.
	MaxInFlightAdds int
	// MaxAddMessageBytes bounds one encoded AddEntries request message
	// (every add it carries, with ids and master key); a larger message
	// ends the stream with RESOURCE_EXHAUSTED before it is read. Zero means
	// MaxEntryBytes + DefaultAddMessageOverhead; at least MaxEntryBytes +
	// 2 KiB (one entry of the largest size must fit).
	MaxAddMessageBytes int
	// MaxLacWait bounds a ReadLac long-poll. Zero means DefaultMaxLacWait.
	MaxLacWait time.Duration
	// MaxLacWaiters bounds the LAC long-polls waiting at once: ReadLac
	// calls and WatchLac watches together. Beyond it ReadLac answers
	// RESOURCE_EXHAUSTED and a watch is refused. Zero means
	// DefaultMaxLacWaiters.
	MaxLacWaiters int
	// AddQueueWait is how long an add waits for room in the storage's write
	// buffer or the journal's queue before it is rejected (the client then
	// treats the bookie as failed and replaces it). While it waits, the
	// stream is not read: HTTP/2 flow control slows the writer down, which
	// is the answer to overload. So it is long enough to ride out fsync
	// stalls and bursts (at 50 ms, a 2× overload had every bookie of a
	// 3-bookie cluster rejected within seconds and no ensemble change
	// possible), and shorter than the ledger client's AddTimeout (5 s).
	// Zero means DefaultAddQueueWait.
	AddQueueWait time.Duration

	// CheckpointInterval and CheckpointBytes: Run checkpoints (flushes the
	// storage, then trims the journal) after this long or this many
	// journaled bytes, whichever comes first. Zero means the defaults.
	CheckpointInterval time.Duration
	CheckpointBytes    int64
	// GCInterval is how often Run garbage-collects entry logs. Zero means
	// DefaultGCInterval; negative disables GC.
	GCInterval time.Duration
	// DiskCheckInterval is how often Run checks disk usage. Zero means
	// DefaultDiskCheckInterval.
	DiskCheckInterval time.Duration
	// ReadOnlyAt and WritableBelow are the disk usage fractions (used /
	// total, the fuller of the journal and ledger disks) at which the bookie
	// turns read-only and back writable: hysteresis, so it does not flap.
	// Zero means the defaults; 0 < WritableBelow < ReadOnlyAt <= 1.
	ReadOnlyAt, WritableBelow float64
	// DiskUsage reports a directory's disk usage; nil means FS.GetDiskUsage.
	// Tests inject a full disk here.
	DiskUsage func(dir string) (vfs.DiskUsage, error)

	// Journal tuning; see bookkeeper/journal.Config. Zero means the
	// journal's defaults (MaxRecordSize is derived from MaxEntryBytes).
	JournalGroupBytes   int
	JournalMaxGroupWait time.Duration
	JournalMaxFileSize  int64
	JournalMaxQueue     int
	// JournalRecycleFiles is journal.Config.RecycleFiles: how many
	// checkpointed journal files are kept for reuse (0: the default, 4;
	// negative: none, obsolete files are deleted).
	JournalRecycleFiles int
	// Storage tuning; see bookkeeper/storage.Options. Zero means the
	// storage's defaults.
	WriteBufferBytes int64
	MaxLogFileSize   int64
	GCThreshold      float64
}

func (c Config) withDefaults() Config {
	if c.JournalDir == "" && c.Dir != "" {
		c.JournalDir = filepath.Join(c.Dir, "journal")
	}
	if c.LedgerDir == "" && c.Dir != "" {
		c.LedgerDir = filepath.Join(c.Dir, "ledgers")
	}
	if c.IndexDir == "" && c.Dir != "" {
		c.IndexDir = filepath.Join(c.Dir, "index")
	}
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxEntryBytes, DefaultMaxEntryBytes)
	def(&c.MaxReadBytes, DefaultMaxReadBytes)
	def(&c.MaxInFlightAdds, DefaultMaxInFlightAdds)
	def(&c.MaxLacWaiters, DefaultMaxLacWaiters)
	def(&c.MaxAddMessageBytes, c.MaxEntryBytes+DefaultAddMessageOverhead)
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defD(&c.MaxLacWait, DefaultMaxLacWait)
	defD(&c.AddQueueWait, DefaultAddQueueWait)
	defD(&c.CheckpointInterval, DefaultCheckpointInterval)
	defD(&c.GCInterval, DefaultGCInterval)
	defD(&c.DiskCheckInterval, DefaultDiskCheckInterval)
	if c.CheckpointBytes == 0 {
		c.CheckpointBytes = DefaultCheckpointBytes
	}
	if c.ReadOnlyAt == 0 {
		c.ReadOnlyAt = DefaultReadOnlyAt
	}
	if c.WritableBelow == 0 {
		c.WritableBelow = DefaultWritableBelow
	}
	if c.DiskUsage == nil {
		fs := c.FS
		c.DiskUsage = fs.GetDiskUsage
	}
	return c
}

// Validate reports every problem with c (after defaults), joined.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("bookie config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.ID == "" {
		bad("ID", "required")
	}
	if c.InstanceID == "" {
		bad("InstanceID", "required")
	}
	if c.JournalDir == "" || c.LedgerDir == "" || c.IndexDir == "" {
		bad("Dir", "required (or all of JournalDir, LedgerDir and IndexDir)")
	}
	if c.JournalDir != "" && (c.JournalDir == c.LedgerDir || c.JournalDir == c.IndexDir) {
		bad("JournalDir", "%q must differ from the ledger and index dirs", c.JournalDir)
	}
	if c.MaxEntryBytes < 0 || c.MaxEntryBytes > storage.MaxEntrySizeLimit {
		bad("MaxEntryBytes", "%d outside [1, %d]", c.MaxEntryBytes, storage.MaxEntrySizeLimit)
	}
	if c.MaxReadBytes < c.MaxEntryBytes {
		bad("MaxReadBytes", "%d below MaxEntryBytes %d", c.MaxReadBytes, c.MaxEntryBytes)
	}
	if c.MaxInFlightAdds < 1 || c.MaxInFlightAdds > 1<<16 {
		bad("MaxInFlightAdds", "%d outside [1, 65536]", c.MaxInFlightAdds)
	}
	if minMsg := c.MaxEntryBytes + minAddMessageOverhead; c.MaxAddMessageBytes < minMsg || c.MaxAddMessageBytes > storage.MaxEntrySizeLimit+DefaultAddMessageOverhead {
		bad("MaxAddMessageBytes", "%d outside [%d, %d] (MaxEntryBytes + %d bytes at least)",
			c.MaxAddMessageBytes, minMsg, storage.MaxEntrySizeLimit+DefaultAddMessageOverhead, minAddMessageOverhead)
	}
	if c.MaxLacWait < 0 || c.MaxLacWait > 5*time.Minute {
		bad("MaxLacWait", "%v outside (0, 5m]", c.MaxLacWait)
	}
	if c.MaxLacWaiters < 1 {
		bad("MaxLacWaiters", "%d must be positive", c.MaxLacWaiters)
	}
	if c.AddQueueWait < 0 || c.AddQueueWait > time.Minute {
		bad("AddQueueWait", "%v outside (0, 1m]", c.AddQueueWait)
	}
	if c.CheckpointInterval < 0 {
		bad("CheckpointInterval", "%v is negative", c.CheckpointInterval)
	}
	if c.CheckpointBytes < 0 {
		bad("CheckpointBytes", "%d is negative", c.CheckpointBytes)
	}
	if c.DiskCheckInterval < 0 {
		bad("DiskCheckInterval", "%v is negative", c.DiskCheckInterval)
	}
	if !(c.WritableBelow > 0 && c.WritableBelow < c.ReadOnlyAt && c.ReadOnlyAt <= 1) {
		bad("ReadOnlyAt", "need 0 < WritableBelow (%v) < ReadOnlyAt (%v) <= 1", c.WritableBelow, c.ReadOnlyAt)
	}
	if err := c.journalConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.storageOptions().Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c Config) journalConfig() journal.Config {
	log := c.Logger.With(slog.String("component", "journal"))
	return journal.Config{
		Dir:           c.JournalDir,
		FS:            c.FS,
		Logger:        log,
		Hooks:         journal.Hooks{GroupCommitted: slowGroupLogger(log)},
		MaxRecordSize: recordHeaderSize + storage.MaxMasterKeySize + c.MaxEntryBytes,
		GroupBytes:    c.JournalGroupBytes,
		MaxGroupWait:  c.JournalMaxGroupWait,
		MaxFileSize:   c.JournalMaxFileSize,
		MaxQueueBytes: c.JournalMaxQueue,
		RecycleFiles:  c.JournalRecycleFiles,
	}
}

func (c Config) storageOptions() storage.Options {
	return storage.Options{
		Dir:                 c.LedgerDir,
		IndexDir:            c.IndexDir,
		FS:                  c.FS,
		Logger:              c.Logger.With(slog.String("component", "storage")),
		BookieID:            c.ID,
		InstanceID:          c.InstanceID,
		RequireStorageID:    c.RequireStorageID,
		MaxEntrySize:        c.MaxEntryBytes,
		MaxWriteBufferBytes: c.WriteBufferBytes,
		MaxLogFileSize:      c.MaxLogFileSize,
		MaxReadBytes:        c.MaxReadBytes,
		GCThreshold:         c.GCThreshold,
	}
}

// slowGroupThreshold is the group commit (write + fdatasync) above which the
// journal logs a warning: every add of the group waited that long, so it is
// the bookie's share of an add's tail latency.
const slowGroupThreshold = 200 * time.Millisecond

// slowGroupLogger returns a GroupCommitted hook that logs slow group commits,
// at most one line a second (with how many were slow meanwhile), so a disk
// that stalls is visible in the bookie's log without flooding it.
func slowGroupLogger(log *slog.Logger) func(journal.GroupInfo) {
	var last time.Time // the hook runs on the journal's writer goroutine only
	var slow, worst int
	var worstD time.Duration
	return func(g journal.GroupInfo) {
		d := g.WriteTime + g.SyncTime
		if d < slowGroupThreshold || g.Err != nil {
			return
		}
		slow++
		if d > worstD {
			worstD, worst = d, g.Bytes
		}
		now := time.Now()
		if now.Sub(last) < time.Second {
			return
		}
		log.Warn("slow journal group commit (write + fdatasync): adds waited for the disk",
			slog.Duration("write", g.WriteTime), slog.Duration("sync", g.SyncTime), slog.Int("bytes", g.Bytes),
			slog.Int("records", g.Records), slog.Int("slow_groups_since_last_line", slow),
			slog.Duration("worst", worstD), slog.Int("worst_bytes", worst))
		last, slow, worst, worstD = now, 0, 0, 0
	}
}

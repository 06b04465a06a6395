package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// ErrCorrupt reports a stored value that fails its checksum or does not
// decode. The store never uses such a value.
var ErrCorrupt = errors.New("embedded bookkeeping: corrupt record")

// Record kinds: the first byte of every value.
const (
	kindFormat    byte = 'F'
	kindMember    byte = 'M'
	kindPartition byte = 'P'
	kindCounter   byte = 'N'
	kindTxn       byte = 'T'
	kindGroup     byte = 'G'
)

// recordVersion is the first format version of every record kind, and the
// only one of every kind but members and partitions.
const recordVersion byte = 1

// memberVersion is the format version member records are written in:
// version 2 added the topics. Version 1 records (written by older binaries)
// are still read, as members without topics.
const memberVersion byte = 2

// txnVersion is the format version transactional id records are written
// in: version 2 added the transaction coordinator's state and the record's
// Version; version 3 the transaction's consumer offsets; version 4 the
// replaced producer id; version 5 the next transaction's partitions, how
// the last ended and the timed-out flag. Version 1 records (producer id and epoch, written
// by older binaries) are still read, as idle records at Version 1; version
// 2 records as records without offsets; versions 2 and 3 as records
// without a replaced producer id; versions before 5 as records without
// next partitions, ended status or timed-out flag.
const txnVersion byte = 5

// partitionVersion is the format version partition records are written in:
// version 2 added the topic id of the committed offset. Version 1 records
// (written by older binaries) are still read, as offsets without a topic id.
const partitionVersion byte = 2

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encoder appends one record's fields; seal frames and checksums it.
type encoder struct{ b []byte }

func newEncoder(kind byte) *encoder { return newEncoderVersion(kind, recordVersion) }

func newEncoderVersion(kind, version byte) *encoder { return &encoder{b: []byte{kind, version}} }

func (e *encoder) int(v int64) { e.b = binary.AppendVarint(e.b, v) }

func (e *encoder) str(s string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) seal() []byte {
	return binary.LittleEndian.AppendUint32(e.b, crc32.Checksum(e.b, castagnoli))
}

// decoder reads the fields of one record; the first error sticks.
type decoder struct {
	b       []byte
	version byte // format version of the record
	err     error
}

// open checks the frame of v — length, checksum, kind, version 1 — and
// returns a decoder over its fields.
func open(v []byte, kind byte) *decoder { return openUpTo(v, kind, recordVersion) }

// openUpTo is open for a kind with several format versions: it accepts
// versions 1..latest, and the decoder's version says which one v is.
func openUpTo(v []byte, kind, latest byte) *decoder {
	if len(v) < 6 {
		return &decoder{err: fmt.Errorf("%w: %d bytes is shorter than a frame", ErrCorrupt, len(v))}
	}
	body, sum := v[:len(v)-4], binary.LittleEndian.Uint32(v[len(v)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return &decoder{err: fmt.Errorf("%w: checksum %08x, stored %08x", ErrCorrupt, got, sum)}
	}
	if body[0] != kind {
		return &decoder{err: fmt.Errorf("%w: record kind %q, want %q", ErrCorrupt, body[0], kind)}
	}
	if body[1] < 1 || body[1] > latest {
		return &decoder{err: fmt.Errorf("%w: record %q has format version %d; this binary reads 1 to %d", ErrCorrupt, kind, body[1], latest)}
	}
	return &decoder{b: body[2:], version: body[1]}
}

func (d *decoder) int() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("%w: bad varint", ErrCorrupt)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// str reads a string of at most limit bytes.
func (d *decoder) str(limit int) string {
	if d.err != nil {
		return ""
	}
	n, k := binary.Uvarint(d.b)
	if k <= 0 || n > uint64(limit) || n > uint64(len(d.b)-k) {
		d.err = fmt.Errorf("%w: bad string length", ErrCorrupt)
		return ""
	}
	s := string(d.b[k : k+int(n)])
	d.b = d.b[k+int(n):]
	return s
}

// check records err unless a decode error came first.
func (d *decoder) check(ok bool, format string, args ...any) {
	if d.err == nil && !ok {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
	}
}

// done returns the first error, or one for trailing bytes.
func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(d.b))
	}
	return d.err
}

// formatRecord marks a directory as a bookkeeping store of this format.
type formatRecord struct{ version int64 }

// storeFormat is the format this binary writes. Format 2 added the group
// records; Open upgrades a format-1 store (see upgradeFromFormat1). Format 3
// allows partition records of version 2 (topic ids), format 4 transactional
// id records of version 2 (the transaction state); neither needs a rewrite
// of older records — Open of a format-2 or format-3 store only writes the
// new format record — but a binary that knows an older format must refuse
// the store rather than call its new records corrupt.
const storeFormat = 4

func (r formatRecord) encode() []byte {
	e := newEncoder(kindFormat)
	e.int(r.version)
	return e.seal()
}

func decodeFormat(v []byte) (formatRecord, error) {
	d := open(v, kindFormat)
	r := formatRecord{version: d.int()}
	return r, d.done()
}

// memberRecord is one member of a group. Its last Join or Heartbeat was at
// expiresAt - sessionTimeout (both set from one clock reading), so that time
// is not stored again.
type memberRecord struct {
	clientInfo     string
	sessionTimeout int64    // nanoseconds
	expiresAt      int64    // Unix nanoseconds of the store clock
	topics         []string // nil when none; since version 2
}

// encode writes the record in memberVersion: the version 1 fields, then
// the number of topics and the topics.
func (r memberRecord) encode() []byte {
	e := newEncoderVersion(kindMember, memberVersion)
	e.str(r.clientInfo)
	e.int(r.sessionTimeout)
	e.int(r.expiresAt)
	e.int(int64(len(r.topics)))
	for _, t := range r.topics {
		e.str(t)
	}
	return e.seal()
}

func decodeMember(v []byte) (memberRecord, error) {
	d := openUpTo(v, kindMember, memberVersion)
	r := memberRecord{clientInfo: d.str(bookkeeping.MaxClientInfoBytes), sessionTimeout: d.int(), expiresAt: d.int()}
	if d.version >= 2 {
		n := d.int()
		d.check(n >= 0 && n <= bookkeeping.MaxMemberTopics, "%d topics", n)
		for i := int64(0); i < n && d.err == nil; i++ {
			r.topics = append(r.topics, d.str(bookkeeping.MaxNameBytes))
		}
		d.check(bookkeeping.ValidateTopics("topics", r.topics) == nil, "invalid topics %q", r.topics)
	}
	d.check(bookkeeping.ValidateSessionTimeout("session timeout", time.Duration(r.sessionTimeout)) == nil,
		"session timeout %d ns out of range", r.sessionTimeout)
	d.check(r.expiresAt-r.sessionTimeout <= r.expiresAt, "expiry %d ns out of range", r.expiresAt)
	return r, d.done()
}

// lastHeartbeat is the time of the member's last Join or Heartbeat.
func (r memberRecord) lastHeartbeat() time.Time {
	return time.Unix(0, r.expiresAt-r.sessionTimeout).UTC()
}

// groupRecord marks a group for ListGroups; it has no fields (the key is
// the group name).
type groupRecord struct{}

func (groupRecord) encode() []byte { return newEncoder(kindGroup).seal() }

func decodeGroup(v []byte) (groupRecord, error) { return groupRecord{}, open(v, kindGroup).done() }

// partitionRecord is the lease and committed offset of one partition.
type partitionRecord struct {
	owner       string // "" when released or never leased
	epoch       int64  // epoch of the latest owner; 0 when never leased
	offset      int64  // bookkeeping.NoOffset when nothing committed
	metadata    string
	commitEpoch int64 // lease epoch of the commit; 0 for standalone/reset
	// topicID is the topic incarnation of the committed offset; "" when
	// nothing was committed, and in version 1 records (offsets committed
	// before ids were stored). Since version 2.
	topicID string
}

// encode writes the record in partitionVersion: the version 1 fields, then
// the topic id.
func (r partitionRecord) encode() []byte {
	e := newEncoderVersion(kindPartition, partitionVersion)
	e.str(r.owner)
	e.int(r.epoch)
	e.int(r.offset)
	e.str(r.metadata)
	e.int(r.commitEpoch)
	e.str(r.topicID)
	return e.seal()
}

func decodePartition(v []byte) (partitionRecord, error) {
	d := openUpTo(v, kindPartition, partitionVersion)
	r := partitionRecord{
		owner:       d.str(bookkeeping.MaxNameBytes),
		epoch:       d.int(),
		offset:      d.int(),
		metadata:    d.str(bookkeeping.MaxMetadataBytes),
		commitEpoch: d.int(),
	}
	if d.version >= 2 {
		r.topicID = d.str(bookkeeping.MaxNameBytes)
		d.check(r.topicID == "" || bookkeeping.ValidateTopicID("topic id", r.topicID) == nil, "invalid topic id %q", r.topicID)
		d.check(r.topicID == "" || r.offset != bookkeeping.NoOffset, "topic id %q without a committed offset", r.topicID)
	}
	d.check(r.epoch >= 0 && r.commitEpoch >= 0 && r.commitEpoch <= r.epoch, "epochs %d/%d out of range", r.epoch, r.commitEpoch)
	d.check(r.offset >= bookkeeping.NoOffset && r.offset <= bookkeeping.MaxOffset, "offset %d out of range", r.offset)
	d.check(r.owner == "" || r.epoch >= 1, "owner %q at epoch 0", r.owner)
	return r, d.done()
}

// counterRecord is the next producer id to hand out.
type counterRecord struct{ next int64 }

func (r counterRecord) encode() []byte {
	e := newEncoder(kindCounter)
	e.int(r.next)
	return e.seal()
}

func decodeCounter(v []byte) (counterRecord, error) {
	d := open(v, kindCounter)
	r := counterRecord{next: d.int()}
	d.check(r.next >= 1 && r.next < math.MaxInt64, "next producer id %d out of range", r.next)
	return r, d.done()
}

// encodeTxn writes the record of a transactional id (the key holds the
// id) in txnVersion:
//
//	txn v1: producer-id(int) epoch(int)
//	txn v2: v1 fields, then status(int) timeout-ms(int) deadline-ms(int,
//	        0 = none) bumped(int, 0 or 1) version(int) partition-count(int)
//	        {topic-id(str) partition(int)}… group-count(int) {group(str)}…
//	txn v3: v2 fields, then offset-count(int) {group(str) topic(str)
//	        topic-id(str) partition(int) offset(int)}…
//	txn v4: v3 fields, then prev-producer-id(int, 0 = none)
//	txn v5: v4 fields, then next-count(int) {topic-id(str) partition(int)}…
//	        ended(int, a status or 0) timed-out(int, 0 or 1)
//
// t is in its stored form (bookkeeping.Txn.Stored: whole milliseconds).
func encodeTxn(t bookkeeping.Txn) []byte {
	e := newEncoderVersion(kindTxn, txnVersion)
	e.int(t.ProducerID)
	e.int(int64(t.Epoch))
	e.int(int64(t.Status))
	e.int(t.Timeout.Milliseconds())
	deadline := int64(0)
	if !t.Deadline.IsZero() {
		deadline = t.Deadline.UnixMilli()
	}
	e.int(deadline)
	bumped := int64(0)
	if t.BumpedByCoordinator {
		bumped = 1
	}
	e.int(bumped)
	e.int(t.Version)
	e.int(int64(len(t.Partitions)))
	for _, p := range t.Partitions {
		e.str(p.TopicID)
		e.int(int64(p.Partition))
	}
	e.int(int64(len(t.Groups)))
	for _, g := range t.Groups {
		e.str(g)
	}
	e.int(int64(len(t.Offsets)))
	for _, o := range t.Offsets {
		e.str(o.Group)
		e.str(o.Topic)
		e.str(o.TopicID)
		e.int(int64(o.Partition))
		e.int(o.Offset)
	}
	e.int(t.PrevProducerID)
	e.int(int64(len(t.Next)))
	for _, p := range t.Next {
		e.str(p.TopicID)
		e.int(int64(p.Partition))
	}
	e.int(int64(t.Ended))
	timedOut := int64(0)
	if t.TimedOut {
		timedOut = 1
	}
	e.int(timedOut)
	return e.seal()
}

// decodeTxnPartitions reads a count and that many (topic id, partition)
// pairs of a txn record.
func decodeTxnPartitions(d *decoder) []bookkeeping.TxnPartition {
	var ps []bookkeeping.TxnPartition
	n := d.int()
	d.check(n >= 0 && n <= bookkeeping.MaxTxnPartitions, "%d partitions", n)
	for i := int64(0); i < n && d.err == nil; i++ {
		p := bookkeeping.TxnPartition{TopicID: d.str(bookkeeping.MaxNameBytes)}
		partition := d.int()
		d.check(partition >= 0 && partition < bookkeeping.MaxPartitions, "partition %d out of range", partition)
		p.Partition = int32(partition)
		ps = append(ps, p)
	}
	return ps
}

// decodeTxn reads the record of transactional id id. A version 1 record
// (an InitProducer of a binary before the transaction state) reads as an
// idle record at Version 1: TxnEmpty, no timeout, deadline, partitions or
// groups. Every record must pass bookkeeping.Txn.Validate and have a
// Version ≥ 1.
func decodeTxn(id string, v []byte) (bookkeeping.Txn, error) {
	d := openUpTo(v, kindTxn, txnVersion)
	t := bookkeeping.Txn{TransactionalID: id, Status: bookkeeping.TxnEmpty, Version: 1}
	pid, epoch := d.int(), d.int()
	d.check(epoch >= 0 && epoch <= bookkeeping.MaxProducerEpoch, "producer epoch %d out of range", epoch)
	t.ProducerID, t.Epoch = pid, int16(epoch)
	if d.version >= 2 {
		status, timeout, deadline, bumped := d.int(), d.int(), d.int(), d.int()
		d.check(status >= 0 && status <= math.MaxUint8, "status %d out of range", status)
		d.check(timeout >= 0 && timeout <= bookkeeping.MaxTxnTimeout.Milliseconds(), "timeout %d ms out of range", timeout)
		d.check(bumped == 0 || bumped == 1, "bumped flag %d", bumped)
		t.Status, t.Timeout, t.BumpedByCoordinator = bookkeeping.TxnStatus(status), time.Duration(timeout)*time.Millisecond, bumped == 1
		if deadline != 0 {
			t.Deadline = time.UnixMilli(deadline).UTC()
		}
		t.Version = d.int()
		t.Partitions = decodeTxnPartitions(d)
		n := d.int()
		d.check(n >= 0 && n <= bookkeeping.MaxTxnGroups, "%d groups", n)
		for i := int64(0); i < n && d.err == nil; i++ {
			t.Groups = append(t.Groups, d.str(bookkeeping.MaxNameBytes))
		}
	}
	if d.version >= 3 {
		n := d.int()
		d.check(n >= 0 && n <= bookkeeping.MaxTxnOffsets, "%d offsets", n)
		for i := int64(0); i < n && d.err == nil; i++ {
			o := bookkeeping.TxnOffset{Group: d.str(bookkeeping.MaxNameBytes), Topic: d.str(bookkeeping.MaxNameBytes), TopicID: d.str(bookkeeping.MaxNameBytes)}
			partition := d.int()
			d.check(partition >= 0 && partition < bookkeeping.MaxPartitions, "partition %d out of range", partition)
			o.Partition, o.Offset = int32(partition), d.int()
			t.Offsets = append(t.Offsets, o)
		}
	}
	if d.version >= 4 {
		t.PrevProducerID = d.int()
	}
	if d.version >= 5 {
		t.Next = decodeTxnPartitions(d)
		ended, timedOut := d.int(), d.int()
		d.check(ended >= 0 && ended <= math.MaxUint8, "ended %d out of range", ended)
		d.check(timedOut == 0 || timedOut == 1, "timed-out flag %d", timedOut)
		t.Ended, t.TimedOut = bookkeeping.TxnStatus(ended), timedOut == 1
	}
	if d.err == nil {
		err := t.Validate()
		d.check(err == nil, "%v", err)
		d.check(t.Version >= 1, "version %d", t.Version)
	}
	return t, d.done()
}

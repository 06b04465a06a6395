package embedded

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

func TestRecordsRoundTrip(t *testing.T) {
	for _, m := range []memberRecord{
		{clientInfo: "host ✓", sessionTimeout: int64(90 * time.Second), expiresAt: -5},
		{sessionTimeout: int64(time.Second), expiresAt: 1, topics: []string{"b", "a", "ü"}},
	} {
		if got, err := decodeMember(m.encode()); err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("member round trip = %+v, %v; want %+v", got, err, m)
		}
	}
	if _, err := decodeGroup(groupRecord{}.encode()); err != nil {
		t.Fatalf("group round trip: %v", err)
	}
	p := partitionRecord{owner: "m", epoch: 7, offset: bookkeeping.MaxOffset, metadata: strings.Repeat("x", bookkeeping.MaxMetadataBytes), commitEpoch: 7,
		topicID: strings.Repeat("i", bookkeeping.MaxNameBytes)}
	if got, err := decodePartition(p.encode()); err != nil || got != p {
		t.Fatalf("partition round trip = %+v, %v", got, err)
	}
	free := partitionRecord{epoch: 3, offset: bookkeeping.NoOffset}
	if got, err := decodePartition(free.encode()); err != nil || got != free {
		t.Fatalf("free partition round trip = %+v, %v", got, err)
	}
	c := counterRecord{next: 12345}
	if got, err := decodeCounter(c.encode()); err != nil || got != c {
		t.Fatalf("counter round trip = %+v, %v", got, err)
	}
	for _, x := range []bookkeeping.Txn{
		{TransactionalID: "tx", ProducerID: 9, Epoch: bookkeeping.MaxProducerEpoch, Status: bookkeeping.TxnEmpty, Version: 1},
		{TransactionalID: "tx", ProducerID: math.MaxInt64, Epoch: 3, Status: bookkeeping.TxnPrepareCommit, Timeout: bookkeeping.MaxTxnTimeout,
			Deadline: time.UnixMilli(1_767_322_445_678).UTC(), BumpedByCoordinator: true, PrevProducerID: math.MaxInt64 - 1, Version: math.MaxInt64 - 1,
			Partitions: []bookkeeping.TxnPartition{{TopicID: "t2", Partition: 0}, {TopicID: strings.Repeat("i", bookkeeping.MaxNameBytes), Partition: bookkeeping.MaxPartitions - 1}},
			Groups:     []string{"g", "ü"},
			Offsets: []bookkeeping.TxnOffset{{Group: "g", Topic: "in", TopicID: "t2", Partition: 3, Offset: 0},
				{Group: "ü", Topic: "in", TopicID: "t2", Partition: bookkeeping.MaxPartitions - 1, Offset: bookkeeping.MaxOffset}}},
	} {
		if got, err := decodeTxn("tx", encodeTxn(x)); err != nil || !reflect.DeepEqual(got, x) {
			t.Fatalf("txn round trip = %+v, %v; want %+v", got, err, x)
		}
	}
}

// TestGoldenTxnRecord pins the layout of transactional id records: version
// 5 as written; version 4 (no next partitions, ended status or timed-out
// flag), version 3 (no replaced producer id), version 2 (no
// offsets either) and version 1 as older binaries wrote them (producer id
// and epoch; read as an idle record at version 1) are still read.
func TestGoldenTxnRecord(t *testing.T) {
	x := bookkeeping.Txn{TransactionalID: "tx", ProducerID: 5, Epoch: 2, Status: bookkeeping.TxnOngoing, Timeout: 3 * time.Millisecond,
		Deadline: time.UnixMilli(1).UTC(), BumpedByCoordinator: true, PrevProducerID: 4, Version: 7,
		Partitions: []bookkeeping.TxnPartition{{TopicID: "t", Partition: 1}}, Groups: []string{"g"},
		Offsets: []bookkeeping.TxnOffset{{Group: "g", Topic: "i", TopicID: "t", Partition: 1, Offset: 9}},
		Next:    []bookkeeping.TxnPartition{{TopicID: "u", Partition: 3}}, Ended: bookkeeping.TxnCompleteCommit, TimedOut: true}
	got := encodeTxn(x)
	v1Fields := []byte{10, 4}
	v2Fields := append(append([]byte(nil), v1Fields...), 4, 6, 2, 2, 14, 2, 1, 't', 2, 2, 1, 'g')
	v3Fields := append(append([]byte(nil), v2Fields...), 2, 1, 'g', 1, 'i', 1, 't', 2, 18)
	v4Fields := append(append([]byte(nil), v3Fields...), 8)
	want := append(append([]byte{'T', 5}, v4Fields...), 2, 1, 'u', 6, byte(2*bookkeeping.TxnCompleteCommit), 2)
	if !bytes.Equal(got[:len(got)-4], want) {
		t.Fatalf("txn record body = %v, want %v", got[:len(got)-4], want)
	}
	v4 := x
	v4.Next, v4.Ended, v4.TimedOut = nil, 0, false
	if r, err := decodeTxn("tx", resealVersion('T', 4, v4Fields)); err != nil || !reflect.DeepEqual(r, v4) {
		t.Fatalf("version 4 txn record = %+v, %v; want %+v", r, err, v4)
	}
	v3 := v4
	v3.PrevProducerID = 0
	if r, err := decodeTxn("tx", resealVersion('T', 3, v3Fields)); err != nil || !reflect.DeepEqual(r, v3) {
		t.Fatalf("version 3 txn record = %+v, %v; want %+v", r, err, v3)
	}
	v2 := v3
	v2.Offsets = nil
	if r, err := decodeTxn("tx", resealVersion('T', 2, v2Fields)); err != nil || !reflect.DeepEqual(r, v2) {
		t.Fatalf("version 2 txn record = %+v, %v; want %+v", r, err, v2)
	}
	r, err := decodeTxn("tx", reseal('T', v1Fields))
	if want := (bookkeeping.Txn{TransactionalID: "tx", ProducerID: 5, Epoch: 2, Status: bookkeeping.TxnEmpty, Version: 1}); err != nil || !reflect.DeepEqual(r, want) {
		t.Fatalf("version 1 txn record = %+v, %v; want %+v", r, err, want)
	}
}

// TestGoldenPartitionRecord pins the byte layout: a change here is a format
// change and needs a new record version. Version 2 is written; version 1, as
// older binaries wrote it, is still read (an offset without a topic id).
func TestGoldenPartitionRecord(t *testing.T) {
	got := partitionRecord{owner: "m", epoch: 2, offset: 10, metadata: "", commitEpoch: 1, topicID: "id"}.encode()
	v1Fields := []byte{1, 'm', 4, 20, 0, 2}
	want := append(append([]byte{'P', 2}, v1Fields...), 2, 'i', 'd')
	if !bytes.Equal(got[:len(got)-4], want) {
		t.Fatalf("partition record body = %v, want %v", got[:len(got)-4], want)
	}
	r, err := decodePartition(reseal('P', v1Fields))
	if err != nil || r != (partitionRecord{owner: "m", epoch: 2, offset: 10, commitEpoch: 1}) {
		t.Fatalf("version 1 partition record = %+v, %v; want the offset without a topic id", r, err)
	}
	// A version 1 record read and written again (an Acquire) keeps its
	// fields and gains an empty topic id.
	if again, err := decodePartition(r.encode()); err != nil || again != r {
		t.Fatalf("version 1 record re-encoded = %+v, %v; want %+v", again, err, r)
	}
}

// TestGoldenMemberRecord pins the layout of member records: version 2 as
// written, and version 1 as older binaries wrote it, which is still read.
func TestGoldenMemberRecord(t *testing.T) {
	got := memberRecord{clientInfo: "c", sessionTimeout: 1e9, expiresAt: 3e9, topics: []string{"t", "u"}}.encode()
	v1Fields := []byte{1, 'c', 0x80, 0xa8, 0xd6, 0xb9, 0x07, 0x80, 0xf8, 0x82, 0xad, 0x16}
	want := append(append([]byte{'M', 2}, v1Fields...), 4, 1, 't', 1, 'u')
	if !bytes.Equal(got[:len(got)-4], want) {
		t.Fatalf("member record body = %v, want %v", got[:len(got)-4], want)
	}
	v1 := reseal('M', v1Fields)
	r, err := decodeMember(v1)
	if err != nil || !reflect.DeepEqual(r, memberRecord{clientInfo: "c", sessionTimeout: 1e9, expiresAt: 3e9}) {
		t.Fatalf("version 1 member record = %+v, %v", r, err)
	}
	if hb := r.lastHeartbeat(); !hb.Equal(time.Unix(2, 0)) {
		t.Fatalf("lastHeartbeat of a record expiring at 3 s with a 1 s timeout = %v, want 2 s", hb)
	}
}

func TestDecodeRejectsInvalidRecords(t *testing.T) {
	cases := map[string][]byte{
		"trailing bytes":      reseal('P', []byte{0, 0, 1, 0, 0, 9}), // a free record, then a 9
		"owner at epoch 0":    partitionRecord{owner: "m", offset: -1}.encode(),
		"offset below -1":     partitionRecord{offset: -2}.encode(),
		"commit after epoch":  partitionRecord{epoch: 1, offset: 1, commitEpoch: 2}.encode(),
		"unknown version":     withVersion(partitionRecord{offset: -1}.encode(), 3),
		"string past the end": reseal('P', []byte{50, 'a'}),
		"bad topic id":        partitionRecord{offset: 1, topicID: "a\x00b"}.encode(),
		"topic id too long":   partitionRecord{offset: 1, topicID: strings.Repeat("i", bookkeeping.MaxNameBytes+1)}.encode(),
		"id without offset":   partitionRecord{offset: bookkeeping.NoOffset, topicID: "id"}.encode(),
		"v2 without topic id": resealVersion('P', 2, []byte{0, 0, 1, 0, 0}),
	}
	for name, v := range cases {
		if _, err := decodePartition(v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: decodePartition = %v, want ErrCorrupt", name, err)
		}
	}
	second := int64(time.Second)
	for name, v := range map[string][]byte{
		"1 ns session timeout": memberRecord{sessionTimeout: 1}.encode(),
		"repeated topic":       memberRecord{sessionTimeout: second, topics: []string{"a", "a"}}.encode(),
		"empty topic":          memberRecord{sessionTimeout: second, topics: []string{""}}.encode(),
		"too many topics":      memberRecord{sessionTimeout: second, topics: make([]string, bookkeeping.MaxMemberTopics+1)}.encode(),
		"negative topic count": resealVersion('M', 2, []byte{0, 0x80, 0xa8, 0xd6, 0xb9, 0x07, 0, 1}),
		"topic past the end":   resealVersion('M', 2, []byte{0, 0x80, 0xa8, 0xd6, 0xb9, 0x07, 0, 4, 1, 'a'}),
		"unknown version":      withVersion(memberRecord{sessionTimeout: second}.encode(), 3),
		"expiry overflows":     memberRecord{sessionTimeout: second, expiresAt: math.MinInt64}.encode(),
	} {
		if _, err := decodeMember(v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("member with %s: %v, want ErrCorrupt", name, err)
		}
	}
	if _, err := decodeGroup(reseal('G', []byte{0})); !errors.Is(err, ErrCorrupt) {
		t.Errorf("group record with a field: %v, want ErrCorrupt", err)
	}
	ok := bookkeeping.Txn{TransactionalID: "tx", ProducerID: 1, Status: bookkeeping.TxnEmpty, Version: 1}
	okFields := encodeTxn(ok)[2 : len(encodeTxn(ok))-4]
	for name, v := range map[string][]byte{
		"v1 epoch past the maximum": reseal('T', []byte{2, 0x80, 0x80, 0x04}),
		"v1 producer id 0":          reseal('T', []byte{0, 0}),
		"v2 epoch past the maximum": resealVersion('T', 2, []byte{2, 0x80, 0x80, 0x04, 2, 0, 0, 0, 2, 0, 0}),
		"status 0":                  encodeTxn(with(ok, func(x *bookkeeping.Txn) { x.Status = 0 })),
		"status 7":                  encodeTxn(with(ok, func(x *bookkeeping.Txn) { x.Status = 7 })),
		"version 0":                 encodeTxn(with(ok, func(x *bookkeeping.Txn) { x.Version = 0 })),
		"negative timeout":          encodeTxn(with(ok, func(x *bookkeeping.Txn) { x.Timeout = -time.Millisecond })),
		"bumped flag 2":             resealVersion('T', 2, []byte{2, 0, 2, 0, 0, 4, 2, 0, 0}),
		"repeated partition": encodeTxn(with(ok, func(x *bookkeeping.Txn) {
			x.Partitions = []bookkeeping.TxnPartition{{TopicID: "t", Partition: 1}, {TopicID: "t", Partition: 1}}
		})),
		"partition out of range": encodeTxn(with(ok, func(x *bookkeeping.Txn) {
			x.Partitions = []bookkeeping.TxnPartition{{TopicID: "t", Partition: -1}}
		})),
		"empty group":        encodeTxn(with(ok, func(x *bookkeeping.Txn) { x.Groups = []string{""} })),
		"too many groups":    resealVersion('T', 2, []byte{2, 0, 2, 0, 0, 0, 2, 0, 0xd2, 0x0f}),
		"group past the end": resealVersion('T', 2, []byte{2, 0, 2, 0, 0, 0, 2, 0, 2, 4, 'g'}),
		"trailing bytes":     resealVersion('T', 3, append(append([]byte(nil), okFields...), 0)),
		"unknown version":    withVersion(encodeTxn(ok), 6),
		"next partition repeated": encodeTxn(with(ok, func(x *bookkeeping.Txn) {
			x.Next = []bookkeeping.TxnPartition{{TopicID: "t", Partition: 1}, {TopicID: "t", Partition: 1}}
		})),
		"ended not a status":            encodeTxn(with(ok, func(x *bookkeeping.Txn) { x.Ended = 99 })),
		"negative replaced producer id": encodeTxn(with(ok, func(x *bookkeeping.Txn) { x.PrevProducerID = -1 })),
		"offset out of range": encodeTxn(with(ok, func(x *bookkeeping.Txn) {
			x.Offsets = []bookkeeping.TxnOffset{{Group: "g", Topic: "i", TopicID: "t", Offset: -1}}
		})),
		"offset repeated": encodeTxn(with(ok, func(x *bookkeeping.Txn) {
			x.Offsets = []bookkeeping.TxnOffset{{Group: "g", Topic: "i", TopicID: "t", Offset: 1}, {Group: "g", Topic: "i", TopicID: "t", Offset: 2}}
		})),
	} {
		if _, err := decodeTxn("tx", v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("txn record with %s: %v, want ErrCorrupt", name, err)
		}
	}
}

// reseal frames body (fields only) as a version-1 record of kind with a
// valid checksum, so decoding reaches the field checks.
func reseal(kind byte, body []byte) []byte { return resealVersion(kind, recordVersion, body) }

func resealVersion(kind, version byte, body []byte) []byte {
	e := newEncoderVersion(kind, version)
	e.b = append(e.b, body...)
	return e.seal()
}

func withVersion(v []byte, version byte) []byte {
	e := &encoder{b: append([]byte{v[0], version}, v[2:len(v)-4]...)}
	return e.seal()
}

// FuzzDecode: no input makes a decoder panic, and whatever decodes
// survives a re-encode unchanged. Each input is tried as it is (exercising
// the frame and checksum) and resealed with a valid checksum (exercising the
// field decoding, which random bytes would otherwise never reach).
func FuzzDecode(f *testing.F) {
	for _, v := range [][]byte{
		partitionRecord{owner: "m", epoch: 1, offset: 5, metadata: "x", commitEpoch: 1, topicID: "id"}.encode(),
		reseal(kindPartition, []byte{1, 'm', 2, 10, 2, 'x', 2}), // version 1
		memberRecord{clientInfo: "c", sessionTimeout: int64(time.Minute), expiresAt: 1}.encode(),
		memberRecord{clientInfo: "c", sessionTimeout: int64(time.Minute), expiresAt: 1, topics: []string{"t"}}.encode(),
		groupRecord{}.encode(),
		counterRecord{next: 1}.encode(),
		reseal(kindTxn, []byte{2, 6}), // version 1
		encodeTxn(bookkeeping.Txn{TransactionalID: "tx", ProducerID: 1, Epoch: 3, Status: bookkeeping.TxnOngoing, Deadline: time.UnixMilli(5).UTC(),
			Partitions: []bookkeeping.TxnPartition{{TopicID: "t", Partition: 2}}, Groups: []string{"g"}, Version: 4}),
		{},
	} {
		f.Add(v)
		if len(v) >= 6 {
			f.Add(v[2 : len(v)-4]) // the bare fields
		}
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		for _, in := range [][]byte{v, reseal(kindPartition, v), resealVersion(kindPartition, partitionVersion, v), reseal(kindMember, v), resealVersion(kindMember, memberVersion, v), reseal(kindCounter, v), reseal(kindTxn, v), resealVersion(kindTxn, txnVersion, v), reseal(kindGroup, v)} {
			if r, err := decodePartition(in); err == nil {
				if again, err := decodePartition(r.encode()); err != nil || again != r {
					t.Fatalf("partition %+v: re-decoded as %+v, %v", r, again, err)
				}
			}
			if r, err := decodeMember(in); err == nil {
				if again, err := decodeMember(r.encode()); err != nil || !reflect.DeepEqual(again, r) {
					t.Fatalf("member %+v: re-decoded as %+v, %v", r, again, err)
				}
			}
			if _, err := decodeGroup(in); err == nil && !bytes.Equal(in, groupRecord{}.encode()) {
				t.Fatalf("group record %v decoded but is not the one encoding", in)
			}
			if r, err := decodeCounter(in); err == nil {
				if again, err := decodeCounter(r.encode()); err != nil || again != r {
					t.Fatalf("counter %+v: re-decoded as %+v, %v", r, again, err)
				}
			}
			if r, err := decodeTxn("tx", in); err == nil {
				if again, err := decodeTxn("tx", encodeTxn(r)); err != nil || !reflect.DeepEqual(again, r) {
					t.Fatalf("txn %+v: re-decoded as %+v, %v", r, again, err)
				}
			}
		}
	})
}

// with returns t changed by edit.
func with(t bookkeeping.Txn, edit func(*bookkeeping.Txn)) bookkeeping.Txn {
	edit(&t)
	return t
}

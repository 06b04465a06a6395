package embedded

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

func TestRecordsRoundTrip(t *testing.T) {
	m := memberRecord{clientInfo: "host ✓", sessionTimeout: int64(90 * time.Second), expiresAt: -5}
	if got, err := decodeMember(m.encode()); err != nil || got != m {
		t.Fatalf("member round trip = %+v, %v", got, err)
	}
	p := partitionRecord{owner: "m", epoch: 7, offset: bookkeeping.MaxOffset, metadata: strings.Repeat("x", bookkeeping.MaxMetadataBytes), commitEpoch: 7}
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
	x := txnRecord{producerID: 9, epoch: bookkeeping.MaxProducerEpoch}
	if got, err := decodeTxn(x.encode()); err != nil || got != x {
		t.Fatalf("txn round trip = %+v, %v", got, err)
	}
}

// TestGoldenPartitionRecord pins the byte layout: a change here is a format
// change and needs a new record version.
func TestGoldenPartitionRecord(t *testing.T) {
	got := partitionRecord{owner: "m", epoch: 2, offset: 10, metadata: "", commitEpoch: 1}.encode()
	want := []byte{'P', 1, 1, 'm', 4, 20, 0, 2}
	if !bytes.Equal(got[:len(got)-4], want) {
		t.Fatalf("partition record body = %v, want %v", got[:len(got)-4], want)
	}
}

func TestDecodeRejectsInvalidRecords(t *testing.T) {
	cases := map[string][]byte{
		"trailing bytes":      reseal('P', []byte{0, 0, 1, 0, 0, 9}), // a free record, then a 9
		"owner at epoch 0":    partitionRecord{owner: "m", offset: -1}.encode(),
		"offset below -1":     partitionRecord{offset: -2}.encode(),
		"commit after epoch":  partitionRecord{epoch: 1, offset: 1, commitEpoch: 2}.encode(),
		"unknown version":     withVersion(partitionRecord{offset: -1}.encode(), 2),
		"string past the end": reseal('P', []byte{50, 'a'}),
	}
	for name, v := range cases {
		if _, err := decodePartition(v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: decodePartition = %v, want ErrCorrupt", name, err)
		}
	}
	if _, err := decodeMember(memberRecord{sessionTimeout: 1}.encode()); !errors.Is(err, ErrCorrupt) {
		t.Errorf("member with a 1 ns session timeout: %v, want ErrCorrupt", err)
	}
	if _, err := decodeTxn(txnRecord{producerID: 1, epoch: bookkeeping.MaxProducerEpoch + 1}.encode()); !errors.Is(err, ErrCorrupt) {
		t.Errorf("txn with epoch past the maximum: %v, want ErrCorrupt", err)
	}
}

// reseal frames body (fields only) as a version-1 record of kind with a
// valid checksum, so decoding reaches the field checks.
func reseal(kind byte, body []byte) []byte {
	e := newEncoder(kind)
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
		partitionRecord{owner: "m", epoch: 1, offset: 5, metadata: "x", commitEpoch: 1}.encode(),
		memberRecord{clientInfo: "c", sessionTimeout: int64(time.Minute), expiresAt: 1}.encode(),
		counterRecord{next: 1}.encode(),
		txnRecord{producerID: 1, epoch: 3}.encode(),
		{},
	} {
		f.Add(v)
		if len(v) >= 6 {
			f.Add(v[2 : len(v)-4]) // the bare fields
		}
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		for _, in := range [][]byte{v, reseal(kindPartition, v), reseal(kindMember, v), reseal(kindCounter, v), reseal(kindTxn, v)} {
			if r, err := decodePartition(in); err == nil {
				if again, err := decodePartition(r.encode()); err != nil || again != r {
					t.Fatalf("partition %+v: re-decoded as %+v, %v", r, again, err)
				}
			}
			if r, err := decodeMember(in); err == nil {
				if again, err := decodeMember(r.encode()); err != nil || again != r {
					t.Fatalf("member %+v: re-decoded as %+v, %v", r, again, err)
				}
			}
			if r, err := decodeCounter(in); err == nil {
				if again, err := decodeCounter(r.encode()); err != nil || again != r {
					t.Fatalf("counter %+v: re-decoded as %+v, %v", r, again, err)
				}
			}
			if r, err := decodeTxn(in); err == nil {
				if again, err := decodeTxn(r.encode()); err != nil || again != r {
					t.Fatalf("txn %+v: re-decoded as %+v, %v", r, again, err)
				}
			}
		}
	})
}

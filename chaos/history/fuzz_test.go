package history

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Reading arbitrary bytes never panics; every op it returns is valid and
// encodes back to a line that decodes to the same op.
func FuzzReader(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", "v2.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	v1, err := os.ReadFile(filepath.Join("testdata", "v1.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(v1)
	f.Add(golden)
	f.Add(golden[:len(golden)/2])
	f.Add([]byte(header + "\n"))
	f.Add([]byte(header + "\n{}\n"))
	f.Add([]byte(header + "\n{\"op\":\"produce\",\"time\":1e400}\n"))
	f.Add([]byte(header + "\nnull\n"))
	f.Add([]byte("\x00\xff\n\n"))
	for _, line := range strings.Split(string(golden), "\n")[1:] {
		f.Add([]byte(header + "\n" + line + "\n"))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := NewReader(bytes.NewReader(in), ReaderConfig{MaxLineBytes: MinMaxLineBytes * 4, MaxOps: 1000})
		if err != nil {
			return
		}
		prev := time.Duration(0)
		for {
			op, err := r.Next()
			if err != nil {
				return
			}
			if err := op.Validate(); err != nil {
				t.Fatalf("line %d: Reader returned an invalid op %+v: %v", r.Line(), op, err)
			}
			if op.Time < prev {
				t.Fatalf("line %d: time %d before %d", r.Line(), op.Time, prev)
			}
			prev = op.Time
			line, err := marshalOp(&op)
			if err != nil {
				t.Fatalf("line %d: re-encode %+v: %v", r.Line(), op, err)
			}
			back, err := unmarshalOp(line)
			if err != nil {
				t.Fatalf("line %d: decode re-encoded %s: %v", r.Line(), line, err)
			}
			if !reflect.DeepEqual(back, op) {
				t.Fatalf("round trip changed the op:\n%+v\n%+v", op, back)
			}
		}
	})
}

// Any op that validates encodes to a line that decodes to the same op; any
// op that does not validate is refused by the encoder.
func FuzzOpRoundTrip(f *testing.F) {
	for _, op := range sampleOps() {
		var pid int64
		var pepoch, seq int32
		idem := op.Idempotence != nil
		if idem {
			pid, pepoch, seq = op.Idempotence.ProducerID, op.Idempotence.ProducerEpoch, op.Idempotence.Sequence
		}
		f.Add(string(op.Kind), int64(op.Time), int64(op.Invoke), op.Producer, idem, pid, pepoch, seq, op.Topic, op.Partition, op.Offset, op.Value, string(op.Outcome), op.Error, op.Group, op.Member, op.LeaseEpoch, op.FaultName, op.Target)
	}
	f.Fuzz(func(t *testing.T, kind string, tm, invoke int64, producer string, idem bool, pid int64, pepoch, seq int32,
		topic string, partition int32, offset int64, value, outcome, errText, group, member string, leaseEpoch int64, faultName, target string) {
		op := Op{
			Kind: Kind(kind), Time: time.Duration(tm), Invoke: time.Duration(invoke), Producer: producer,
			Topic: topic, Partition: partition, Offset: offset, Value: value, Outcome: Outcome(outcome),
			Error: errText, Group: group, Member: member, LeaseEpoch: leaseEpoch, FaultName: faultName, Target: target,
		}
		if idem {
			op.Idempotence = &Idempotence{ProducerID: pid, ProducerEpoch: pepoch, Sequence: seq}
		}
		line, err := marshalOp(&op)
		if verr := op.Validate(); verr != nil {
			if err == nil {
				t.Fatalf("encoded an invalid op (%v): %s", verr, line)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid op refused: %v", err)
		}
		back, err := unmarshalOp(line)
		if err != nil {
			t.Fatalf("decode %s: %v", line, err)
		}
		if !reflect.DeepEqual(back, op) {
			t.Fatalf("round trip changed the op:\n%+v\n%+v\n%s", op, back, line)
		}
	})
}

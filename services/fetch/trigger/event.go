package trigger

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
)

// EventSource is the eventSource of every event: what Lambda's
// self-managed Kafka event source mapping sends (an MSK mapping sends
// "aws:kafka" with an eventSourceArn; Sluice has no ARN to give).
const EventSource = "SelfManagedKafka"

// TimestampType is every record's timestampType: Sluice stores the
// producer's create time.
const TimestampType = "CREATE_TIME"

// MaxPayloadBytes is Lambda's synchronous Invoke payload limit (6 MB), the
// bound on any batch's encoded event whatever the trigger says.
const MaxPayloadBytes = catalog.MaxTriggerBatchBytes

// MaxEventTimestampMs is the latest record timestamp an event can carry:
// events.MilliSecondsEpochTime encodes through time.UnixNano, which
// overflows after 2262-04-11. Take refuses a later one rather than send a
// wrong time.
const MaxEventTimestampMs = math.MaxInt64 / int64(time.Millisecond)

// Batch is a run of consecutive records of one partition, the unit of one
// invocation.
type Batch struct {
	Topic     string
	Partition int32
	// Records are in offset order, non-empty.
	Records []record.Record
}

// FirstOffset and LastOffset are the offsets of the batch's first and last
// records.
func (b Batch) FirstOffset() int64 { return b.Records[0].Offset }
func (b Batch) LastOffset() int64  { return b.Records[len(b.Records)-1].Offset }

// RecordsKey is the key of the event's records map: "<topic>-<partition>",
// as Lambda groups Kafka records.
func RecordsKey(topic string, partition int32) string {
	return topic + "-" + strconv.FormatInt(int64(partition), 10)
}

// KafkaRecord converts one record to Lambda's shape: key and value base64
// (a null or empty one is left out, as Lambda does for a null one),
// timestamp in ms, headers as a list of one-entry maps of name to bytes
// (a null header value becomes an empty array).
func KafkaRecord(topic string, partition int32, r record.Record) events.KafkaRecord {
	kr := events.KafkaRecord{
		Topic:         topic,
		Partition:     int64(partition),
		Offset:        r.Offset,
		Timestamp:     events.MilliSecondsEpochTime{Time: time.UnixMilli(r.Timestamp).UTC()},
		TimestampType: TimestampType,
		Headers:       make([]map[string]events.JSONNumberBytes, 0, len(r.Headers)),
	}
	if r.Key != nil {
		kr.Key = base64.StdEncoding.EncodeToString(r.Key)
	}
	if r.Value != nil {
		kr.Value = base64.StdEncoding.EncodeToString(r.Value)
	}
	for _, h := range r.Headers {
		kr.Headers = append(kr.Headers, map[string]events.JSONNumberBytes{h.Key: events.JSONNumberBytes(h.Value)})
	}
	return kr
}

// Event builds the Lambda event of a batch.
func Event(bootstrapServers string, b Batch) events.KafkaEvent {
	recs := make([]events.KafkaRecord, len(b.Records))
	for i, r := range b.Records {
		recs[i] = KafkaRecord(b.Topic, b.Partition, r)
	}
	return events.KafkaEvent{
		EventSource:      EventSource,
		BootstrapServers: bootstrapServers,
		Records:          map[string][]events.KafkaRecord{RecordsKey(b.Topic, b.Partition): recs},
	}
}

// RecordTooLargeError is a record whose event alone exceeds the batch
// bound: it can never be invoked and must be dealt with (DLQ or stop), never
// dropped.
type RecordTooLargeError struct {
	Topic     string
	Partition int32
	Offset    int64
	// Bytes is the encoded event with this record alone; Max the bound.
	Bytes, Max int
}

func (e *RecordTooLargeError) Error() string {
	return fmt.Sprintf("record %s offset %d: its event is %d bytes, more than the batch bound %d",
		RecordsKey(e.Topic, e.Partition), e.Offset, e.Bytes, e.Max)
}

// Encoder builds the encoded events of batches within a record count and a
// byte bound. Its zero value is not usable: see NewEncoder.
type Encoder struct {
	bootstrapServers string
	maxRecords       int
	maxBytes         int
}

// NewEncoder returns an Encoder that puts at most maxRecords records and
// maxBytes bytes of encoded event (≤ MaxPayloadBytes) in a batch: a
// trigger's BatchSize and MaxBatchBytes.
func NewEncoder(bootstrapServers string, maxRecords, maxBytes int) (*Encoder, error) {
	if maxRecords < 1 {
		return nil, fmt.Errorf("trigger encoder: max records %d, want at least 1", maxRecords)
	}
	if maxBytes < 1 || maxBytes > MaxPayloadBytes {
		return nil, fmt.Errorf("trigger encoder: max bytes %d, want 1..%d", maxBytes, MaxPayloadBytes)
	}
	return &Encoder{bootstrapServers: bootstrapServers, maxRecords: maxRecords, maxBytes: maxBytes}, nil
}

// Take builds the event of the longest prefix of recs (records of topic's
// partition in offset order) within the encoder's bounds, and returns it
// with the batch it holds; the caller passes recs[len(batch.Records):] next.
// It takes at least one record: if the first alone is over the byte bound
// the error is a *RecordTooLargeError naming it, and if its timestamp is
// past MaxEventTimestampMs an error naming it too. recs must not be empty.
//
// The payload is exactly json.Marshal(Event(...)) of the batch (a test
// checks it), built piece by piece so each record is encoded once.
func (e *Encoder) Take(topic string, partition int32, recs []record.Record) (Batch, []byte, error) {
	if len(recs) == 0 {
		panic("trigger: Take of no records")
	}
	// The envelope is the event with an empty record list; records go
	// where "[]" is, separated by commas.
	envelope, err := json.Marshal(events.KafkaEvent{
		EventSource:      EventSource,
		BootstrapServers: e.bootstrapServers,
		Records:          map[string][]events.KafkaRecord{RecordsKey(topic, partition): {}},
	})
	if err != nil {
		return Batch{}, nil, fmt.Errorf("encode event envelope: %w", err)
	}
	at := bytes.Index(envelope, []byte("[]"))
	head, tail := envelope[:at+1], envelope[at+1:]

	var body bytes.Buffer
	n := 0
	for n < len(recs) && n < e.maxRecords {
		if ts := recs[n].Timestamp; ts < 0 || ts > MaxEventTimestampMs {
			if n > 0 {
				break // the batch ends before it; the next Take reports it
			}
			return Batch{}, nil, fmt.Errorf("record %s offset %d: timestamp %d ms is outside what Lambda's event can carry (0..%d)",
				RecordsKey(topic, partition), recs[n].Offset, ts, MaxEventTimestampMs)
		}
		enc, err := json.Marshal(KafkaRecord(topic, partition, recs[n]))
		if err != nil {
			return Batch{}, nil, fmt.Errorf("encode record %s offset %d: %w", RecordsKey(topic, partition), recs[n].Offset, err)
		}
		size := len(head) + body.Len() + len(enc) + len(tail)
		if n > 0 {
			size++ // the comma
		}
		if size > e.maxBytes {
			if n == 0 {
				return Batch{}, nil, &RecordTooLargeError{Topic: topic, Partition: partition, Offset: recs[0].Offset, Bytes: size, Max: e.maxBytes}
			}
			break
		}
		if n > 0 {
			body.WriteByte(',')
		}
		body.Write(enc)
		n++
	}
	payload := make([]byte, 0, len(head)+body.Len()+len(tail))
	payload = append(append(append(payload, head...), body.Bytes()...), tail...)
	return Batch{Topic: topic, Partition: partition, Records: recs[:n:n]}, payload, nil
}

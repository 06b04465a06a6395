package record

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBroker is the least of a Kafka broker that franz-go's producer needs —
// ApiVersions, Metadata, InitProducerID, Produce — served over in-memory
// pipes, so tests capture the exact batch bytes kgo's producer writes.
type fakeBroker struct {
	t     testing.TB
	topic string

	mu      sync.Mutex
	batches [][]byte // every batch from every Produce request, in order
	next    int64    // next offset to hand out

	wg sync.WaitGroup
}

func newFakeBroker(t testing.TB, topic string) *fakeBroker {
	f := &fakeBroker{t: t, topic: topic}
	t.Cleanup(f.wg.Wait) // runs after the test closes the client
	return f
}

// dial is a kgo.Dialer: every connection is served by its own goroutine,
// which ends when the client closes its end.
func (f *fakeBroker) dial(context.Context, string, string) (net.Conn, error) {
	client, server := net.Pipe()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer server.Close()
		if err := f.serve(server); err != nil && err != io.EOF {
			f.t.Errorf("fake broker: %v", err)
		}
	}()
	return client, nil
}

func (f *fakeBroker) captured() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.batches...)
}

func (f *fakeBroker) serve(c net.Conn) error {
	for {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			if err == io.ErrClosedPipe {
				return io.EOF
			}
			return err
		}
		n := binary.BigEndian.Uint32(size[:])
		if n < 10 || n > 64<<20 {
			return fmt.Errorf("request size %d", n)
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(c, msg); err != nil {
			return err
		}
		// Request header v1/v2: api key, version, correlation id, client id
		// (nullable string), then tagged fields if the request is flexible.
		key := int16(binary.BigEndian.Uint16(msg[0:]))
		version := int16(binary.BigEndian.Uint16(msg[2:]))
		corr := binary.BigEndian.Uint32(msg[4:])
		p := 10
		if l := int16(binary.BigEndian.Uint16(msg[8:])); l > 0 {
			p += int(l)
		}
		req := kmsg.RequestForKey(key)
		if req == nil {
			return fmt.Errorf("unknown api key %d", key)
		}
		req.SetVersion(version)
		if req.IsFlexible() {
			var err error
			if p, err = skipTags(msg, p); err != nil {
				return err
			}
		}
		if err := req.ReadFrom(msg[p:]); err != nil {
			return fmt.Errorf("read %T v%d: %w", req, version, err)
		}
		resp, err := f.handle(req)
		if err != nil {
			return err
		}
		resp.SetVersion(version)
		out := binary.BigEndian.AppendUint32(make([]byte, 4), corr)
		// Response header v1 (one empty tag buffer) for flexible responses,
		// except ApiVersions, which always uses header v0.
		if resp.IsFlexible() && key != int16(kmsg.ApiVersions) {
			out = append(out, 0)
		}
		out = resp.AppendTo(out)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := c.Write(out); err != nil {
			return err
		}
	}
}

func skipTags(b []byte, p int) (int, error) {
	count, n := binary.Uvarint(b[p:])
	if n <= 0 {
		return p, fmt.Errorf("bad tag count")
	}
	p += n
	for range count {
		if _, n = binary.Uvarint(b[p:]); n <= 0 {
			return p, fmt.Errorf("bad tag key")
		}
		p += n
		size, n := binary.Uvarint(b[p:])
		if n <= 0 || size > uint64(len(b)-p-n) {
			return p, fmt.Errorf("bad tag size")
		}
		p += n + int(size)
	}
	return p, nil
}

func (f *fakeBroker) handle(req kmsg.Request) (kmsg.Response, error) {
	switch req := req.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		for _, k := range []struct{ key, max int16 }{
			{int16(kmsg.Produce), 9},
			{int16(kmsg.Metadata), 9},
			{int16(kmsg.ApiVersions), 3},
			{int16(kmsg.InitProducerID), 4},
		} {
			resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k.key, MaxVersion: k.max})
		}
		return resp, nil
	case *kmsg.MetadataRequest:
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: "fake", Port: 9092}}
		resp.ControllerID = 0
		topic := kmsg.NewMetadataResponseTopic()
		topic.Topic = kmsg.StringPtr(f.topic)
		part := kmsg.NewMetadataResponseTopicPartition()
		part.Leader, part.Replicas, part.ISR = 0, []int32{0}, []int32{0}
		topic.Partitions = []kmsg.MetadataResponseTopicPartition{part}
		resp.Topics = []kmsg.MetadataResponseTopic{topic}
		return resp, nil
	case *kmsg.InitProducerIDRequest:
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = 4242, 7
		return resp, nil
	case *kmsg.ProduceRequest:
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.BaseOffset = rp.Partition, f.next
				for rest := rp.Records; len(rest) > 0; {
					var b Batch
					var err error
					if b, rest, err = Split(rest); err != nil {
						return nil, fmt.Errorf("produce request: %w", err)
					}
					f.batches = append(f.batches, append([]byte(nil), b...))
					f.next += int64(b.LastOffsetDelta()) + 1
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	return nil, fmt.Errorf("fake broker: unexpected request %T", req)
}

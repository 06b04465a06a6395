package kafkadriver

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestConfigValidateNamesEveryBadField(t *testing.T) {
	err := Config{Brokers: []string{"nohost"}, ReplicationFactor: -1, Linger: -time.Second,
		MaxBufferedBytes: -1, Compression: "brotli"}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"brokers: \"nohost\"", "replication factor:", "linger:", "max buffered bytes:", "compression:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if err := (Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "brokers:") {
		t.Errorf("no brokers: %v", err)
	}
	if err := (Config{Brokers: []string{"127.0.0.1:9092"}}).Validate(); err != nil {
		t.Errorf("minimal config: %v", err)
	}
}

func TestReadinessWaitsForLeadersAndFullISR(t *testing.T) {
	topic := "t"
	resp := func(parts ...kmsg.MetadataResponseTopicPartition) *kmsg.MetadataResponse {
		r := kmsg.NewPtrMetadataResponse()
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = &topic
		mt.Partitions = parts
		r.Topics = append(r.Topics, mt)
		return r
	}
	part := func(i, leader int32, isr ...int32) kmsg.MetadataResponseTopicPartition {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.Leader, p.ISR = i, leader, isr
		return p
	}
	for _, tc := range []struct {
		name string
		resp *kmsg.MetadataResponse
		want string
	}{
		{"missing", kmsg.NewPtrMetadataResponse(), "not in metadata"},
		{"too few partitions", resp(part(0, 1, 1, 2, 3)), "1 of 2 partitions"},
		{"no leader", resp(part(0, 1, 1, 2, 3), part(1, -1)), "partition 1 has no leader"},
		{"short ISR", resp(part(0, 1, 1, 2, 3), part(1, 2, 2, 3)), "partition 1 has 2 of 3 replicas in sync"},
		{"ready", resp(part(0, 1, 1, 2, 3), part(1, 2, 2, 3, 1)), ""},
	} {
		if got := readiness(tc.resp, topic, 2, 3); !strings.Contains(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

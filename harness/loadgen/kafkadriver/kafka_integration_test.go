//go:build integration

package kafkadriver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/loadgen"
	"github.com/sluicemq/sluice/harness/loadgen/kafkadriver"
	"github.com/sluicemq/sluice/harness/testenv"
)

// logWriter sends the runner's progress lines to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// The smoke workload against the 3 local brokers: a few seconds of acks=all
// sends through a consumer group, every message acknowledged and received,
// and the result filled in.
func TestIntegrationKafkaSmoke(t *testing.T) {
	brokers := testenv.Kafka(t)
	w, err := loadgen.LoadWorkload("../../../bench/workloads/smoke.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	drv, err := kafkadriver.New(ctx, kafkadriver.Config{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	res, err := loadgen.Run(ctx, loadgen.Options{Driver: drv, Workload: w, Progress: logWriter{t}, ProgressInterval: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	loadgen.WriteMarkdown(&md, res)
	t.Log("\n" + md.String())
	if res.Failed+res.Unacked+res.NotSent+res.NotReceived != 0 || res.FirstError != "" {
		t.Errorf("lost or failed messages: failed %d unacked %d not sent %d not received %d (%s)",
			res.Failed, res.Unacked, res.NotSent, res.NotReceived, res.FirstError)
	}
	if res.Sent < int64(0.9*w.ProducerRate*w.TestDuration.D().Seconds()) || res.Publish.Messages == 0 || res.Consume.Messages == 0 {
		t.Errorf("too little traffic: sent %d, published %d, consumed %d", res.Sent, res.Publish.Messages, res.Consume.Messages)
	}
	if res.PublishLatency.Count == 0 || res.EndToEndLatency.Count == 0 || res.PublishLatency.P50Ms <= 0 {
		t.Errorf("latencies missing: %+v %+v", res.PublishLatency, res.EndToEndLatency)
	}
	if res.DriverSettings["topic.replicationFactor"] != "3" || res.DriverSettings["topic.min.insync.replicas"] == "" {
		t.Errorf("settings %v", res.DriverSettings)
	}
}

// Topic configs given to the driver reach the topic, and Describe reports
// what the brokers apply.
func TestIntegrationKafkaTopicConfig(t *testing.T) {
	brokers := testenv.Kafka(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	drv, err := kafkadriver.New(ctx, kafkadriver.Config{Brokers: brokers, TopicConfigs: map[string]string{"flush.messages": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	topic := "sluice-bench-config-test-" + time.Now().Format("150405.000000")
	if err := drv.CreateTopic(ctx, topic, 2); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := drv.DeleteTopic(context.WithoutCancel(ctx), topic); err != nil {
			t.Error(err)
		}
	}()
	got, err := drv.Describe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if got["topic.flush.messages"] != "1" || got["client.acks"] != "all" {
		t.Fatalf("settings %v", got)
	}
}

//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/bookieproc"
)

// `sluice dev` end to end the way the README shows it: a topic created and
// records produced with curl (Connect JSON), read back with curl (Fetch,
// including a long-poll woken by a produce), and with `sluice consume`.
func TestIntegrationDevCurlProduceConsume(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("curl is needed for this test: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, err := bookieproc.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	addr, err := bookieproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	dev := exec.Command(bin, "dev", "--data-dir", t.TempDir(), "--addr", addr)
	dev.Stdout, dev.Stderr = &out, &out
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dev.Process.Kill(); _ = dev.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice dev not listening after 30s:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	curl := func(method, body string) map[string]any {
		t.Helper()
		cmd := exec.CommandContext(ctx, "curl", "-sS", "--fail-with-body", "-H", "Content-Type: application/json",
			"http://"+addr+"/"+method, "-d", body)
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("curl %s %s: %v\n%s", method, body, err, b)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("curl %s: %q is not JSON: %v", method, b, err)
		}
		return m
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	curl("sluice.v1.AdminService/CreateTopic", `{"name":"demo","partitions":1}`)
	for i := range 3 {
		curl("sluice.v1.ProducerService/Produce", fmt.Sprintf(`{"topic":"demo","records":[{"key":%q,"value":%q}]}`, b64("k"), b64(fmt.Sprintf("hello %d", i))))
	}
	got := curl("sluice.v1.ConsumerService/Fetch", `{"topic":"demo","partition":0,"offset":"0","maxRecords":10}`)
	recs, _ := got["records"].([]any)
	if len(recs) != 3 || got["highWatermark"] != "3" || got["nextOffset"] != "3" {
		t.Fatalf("fetch: %v", got)
	}
	for i, r := range recs {
		v, _ := base64.StdEncoding.DecodeString(r.(map[string]any)["value"].(string))
		if string(v) != fmt.Sprintf("hello %d", i) {
			t.Fatalf("record %d: %q", i, v)
		}
	}
	// A long-poll at the end returns the next record as soon as it lands.
	type result struct {
		m   map[string]any
		dur time.Duration
	}
	done := make(chan result, 1)
	go func() {
		start := time.Now()
		m := curl("sluice.v1.ConsumerService/Fetch", `{"topic":"demo","partition":0,"offset":"3","maxWaitMs":10000}`)
		done <- result{m, time.Since(start)}
	}()
	time.Sleep(500 * time.Millisecond)
	curl("sluice.v1.ProducerService/Produce", fmt.Sprintf(`{"topic":"demo","records":[{"value":%q}]}`, b64("late")))
	r := <-done
	recs, _ = r.m["records"].([]any)
	if len(recs) != 1 || r.dur > 5*time.Second {
		t.Fatalf("long-poll: %v after %v", r.m, r.dur)
	}
	// sluice consume prints the same records.
	cmd := exec.CommandContext(ctx, bin, "consume", "demo", "--addr", addr, "--from", "earliest", "--count", "4")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sluice consume: %v\n%s", err, b)
	}
	for _, want := range []string{"hello 0", "hello 1", "hello 2", "late"} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("sluice consume output lacks %q:\n%s", want, b)
		}
	}
}

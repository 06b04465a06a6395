package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/sluice"
	"github.com/sluicemq/sluice/pkg/sluice/avroserde"
)

// sluice consume --decode prints values a schema registry serializer wrote
// as JSON decoded with their schema, in text and JSON output, and a value
// that is not framed as it is, with a warning.
func TestConsumeDecode(t *testing.T) {
	c := startCLICluster(t)
	addr := c.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"topic", "create", "orders", "--partitions", "1", "--addr", addr}, &out, &errOut); code != 0 {
		t.Fatalf("topic create: %s", errOut.String())
	}
	ser, err := avroserde.NewSerializer(avroserde.NewRegistry(http.DefaultClient, "http://"+addr), avroserde.ValueSubject("orders"),
		`{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"cents","type":"long"}]}`, true)
	if err != nil {
		t.Fatal(err)
	}
	framed, err := ser.Serialize(ctx, map[string]any{"id": "o-1", "cents": int64(1250)})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := sluice.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p, err := cl.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err = p.ProduceSync(ctx, &sluice.Record{Topic: "orders", Key: []byte("k"), Value: framed}); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.ProduceSync(ctx, &sluice.Record{Topic: "orders", Key: []byte("k"), Value: []byte("plain")}); err != nil {
		t.Fatal(err)
	}
	consume := func(args ...string) (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(ctx, append([]string{"consume", "orders", "--count", "2", "--decode"}, append(args, "--addr", addr)...), &out, &errOut); code != 0 {
			t.Fatalf("consume: exit %d: %s", code, errOut.String())
		}
		return out.String(), errOut.String()
	}
	text, warn := consume()
	if want := "0\t0\tk\t{\"cents\":1250,\"id\":\"o-1\"}\n0\t1\tk\tplain\n"; text != want {
		t.Errorf("text output:\n%q\nwant\n%q", text, want)
	}
	if !strings.Contains(warn, "--decode: a value printed as it is") {
		t.Errorf("no warning for the plain value: %q", warn)
	}
	js, _ := consume("--format", "json")
	if !strings.Contains(js, `"value":{"cents":1250,"id":"o-1"}`) || !strings.Contains(js, `"value":"plain"`) {
		t.Errorf("json output:\n%s", js)
	}
}

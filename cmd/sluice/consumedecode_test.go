package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/sluice"
	"github.com/sluicemq/sluice/pkg/sluice/avroserde"
	"github.com/sluicemq/sluice/pkg/sluice/jsonserde"
	"github.com/sluicemq/sluice/pkg/sluice/protoserde"
	"github.com/sluicemq/sluice/pkg/sluice/serde"
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

// --decode reads Protobuf and JSON Schema values too, and --encode writes
// JSON Schema documents (checked against the subject's latest schema).
func TestConsumeDecodeEveryFormat(t *testing.T) {
	c := startCLICluster(t)
	addr := c.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := run(ctx, append(args, "--addr", addr), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	if code, _, e := cli("topic", "create", "mixed", "--partitions", "1"); code != 0 {
		t.Fatal(e)
	}
	reg := serde.NewRegistry(http.DefaultClient, "http://"+addr)
	pb, err := protoserde.NewSerializer(reg, "mixed-pb", true).Serialize(ctx, &sluicev1.Header{Key: "h", Value: []byte("v")})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jsonserde.NewSerializer(reg, "mixed-value", `{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}`, true)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := js.Serialize(ctx, map[string]int{"n": 3})
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
	for _, v := range [][]byte{pb, doc} {
		if _, err := p.ProduceSync(ctx, &sluice.Record{Topic: "mixed", Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	// mixed-value is JSON Schema: --encode takes documents it accepts.
	if code, out, e := cli("produce", "--topic", "mixed", "--subject", "mixed-value", "--encode", `{"n": 4}`); code != 0 || out != "partition 0 offset 2\n" {
		t.Fatalf("produce --encode: exit %d: %s%s", code, out, e)
	}
	if code, _, e := cli("produce", "--topic", "mixed", "--subject", "mixed-value", "--encode", `{"n": "four"}`); code == 0 || !strings.Contains(e, "/n") {
		t.Fatalf("produce --encode of a document the schema refuses: exit %d: %s", code, e)
	}
	code, out, e := cli("consume", "mixed", "--count", "3", "--decode")
	want := "0\t0\t\t{\"key\":\"h\",\"value\":\"dg==\"}\n0\t1\t\t{\"n\":3}\n0\t2\t\t{\"n\":4}\n"
	if code != 0 || out != want {
		t.Fatalf("consume --decode: exit %d:\n%q\nwant\n%q\n%s", code, out, want, e)
	}
}

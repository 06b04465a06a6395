package avroserde_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/pkg/sluice/avroserde"
)

const richSchema = `{"type":"record","name":"Event","namespace":"shop","fields":[
 {"name":"id","type":"long"},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["CLICK","BUY"]}},
 {"name":"note","type":["null","string"]},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"counts","type":{"type":"map","values":"int"}},
 {"name":"raw","type":"bytes"},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"price","type":"double"},
 {"name":"qty","type":"int","default":1}]}`

// SerializeJSON takes Avro's JSON encoding and writes what the
// deserializer reads back as the same datum; bad input names the place.
func TestSerializeJSON(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	ser, err := avroserde.NewSerializer(reg, "events-value", richSchema, true)
	if err != nil {
		t.Fatal(err)
	}
	in := `{"id": 9007199254740993, "kind": "BUY", "note": {"string": "gift"}, "tags": ["a", "b"],
		"counts": {"x": 2}, "raw": "\u0000\u00ff", "at": 1764979200000, "price": 2.5}`
	b, err := ser.SerializeJSON(ctx, []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := avroserde.NewDeserializer(reg).Deserialize(ctx, b, &got); err != nil {
		t.Fatal(err)
	}
	if got["id"] != int64(9007199254740993) || got["kind"] != "BUY" || got["qty"] != 1 || got["price"] != 2.5 {
		t.Fatalf("decoded %v", got)
	}
	if raw, _ := got["raw"].([]byte); len(raw) != 2 || raw[0] != 0 || raw[1] != 0xff {
		t.Fatalf("raw = %v", got["raw"])
	}
	if _, err := json.Marshal(got); err != nil {
		t.Fatal(err)
	}
	// A null union branch.
	if _, err := ser.SerializeJSON(ctx, []byte(strings.Replace(in, `{"string": "gift"}`, "null", 1))); err != nil {
		t.Fatalf("note null: %v", err)
	}

	for _, c := range []struct{ in, says string }{
		{`{"id": "x"}`, "id: want an integer"},
		{strings.Replace(in, `"BUY"`, `"SELL"`, 1), `kind: "SELL" is not a symbol`},
		{strings.Replace(in, `{"string": "gift"}`, `"gift"`, 1), `note: a union's value is null or {"branch": value}`},
		{strings.Replace(in, `{"string": "gift"}`, `{"int": 1}`, 1), `note: the union has no branch "int"`},
		{strings.Replace(in, `"b"]`, `2]`, 1), "tags[1]: want a string"},
		{strings.Replace(in, `"x": 2`, `"x": 2.5`, 1), "counts.x: 2.5 is not a int"},
		{strings.Replace(in, `\u00ff`, `\u0100`, 1), "raw: code point U+0100 is not a byte"},
		{strings.Replace(in, `"price": 2.5`, `"price": 2.5, "color": "red"`, 1), `record shop.Event has no field "color"`},
		{strings.Replace(in, `"price": 2.5`, `"pric": 2.5`, 1), `field "price" is missing and has no default`},
		{`{} {}`, "more than one JSON value"},
		{in + `]`, "bytes after it"},
		{`{"id": 1,`, "not JSON"},
	} {
		if _, err := ser.SerializeJSON(ctx, []byte(c.in)); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: err = %v; want it to say %q", c.in, err, c.says)
		}
	}
}

package trigger

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func TestInvocationIDFormat(t *testing.T) {
	k := InvocationKey{Trigger: "mailer", Topic: "orders", TopicID: "6f1c0e2a", Partition: 3, FirstOffset: 100, LastOffset: 199, LeaseEpoch: 7}
	if got, want := InvocationID(k), "v1/mailer/orders/6f1c0e2a/3/100-199/7"; got != want {
		t.Fatalf("InvocationID = %q, want %q", got, want)
	}
}

// TestInvocationIDStable: the id is a function of the key alone (a retry
// rebuilds it from the same batch), and every field changes it.
func TestInvocationIDStable(t *testing.T) {
	base := InvocationKey{Trigger: "mailer", Topic: "orders", TopicID: "6f1c0e2a", Partition: 3, FirstOffset: 100, LastOffset: 199, LeaseEpoch: 7}
	again := base
	if InvocationID(base) != InvocationID(again) {
		t.Fatal("same key, different ids")
	}
	variants := []func(*InvocationKey){
		func(k *InvocationKey) { k.Trigger = "mailer2" },
		func(k *InvocationKey) { k.Topic = "orders2" },
		func(k *InvocationKey) { k.TopicID = "6f1c0e2b" },
		func(k *InvocationKey) { k.Partition = 4 },
		func(k *InvocationKey) { k.FirstOffset = 101 },
		func(k *InvocationKey) { k.LastOffset = 198 },
		func(k *InvocationKey) { k.LeaseEpoch = 8 },
	}
	seen := map[string]int{InvocationID(base): -1}
	for i, change := range variants {
		k := base
		change(&k)
		id := InvocationID(k)
		if j, dup := seen[id]; dup {
			t.Errorf("variant %d has the id of %d: %q", i, j, id)
		}
		seen[id] = i
	}
}

// TestClientContextDecodesInHandler: the client context is what
// aws-lambda-go's lambdacontext decodes, and the longest id of
// catalog-valid names stays well under the Invoke API's limit.
func TestClientContextDecodesInHandler(t *testing.T) {
	long := InvocationID(InvocationKey{
		Trigger:     strings.Repeat("t", catalog.MaxTriggerNameLength),
		Topic:       strings.Repeat("o", catalog.MaxTopicNameLength),
		TopicID:     catalog.TopicID(strings.Repeat("f", 64)),
		Partition:   1<<31 - 1,
		FirstOffset: 1<<63 - 1, LastOffset: 1<<63 - 1, LeaseEpoch: 1<<63 - 1,
	})
	cc, err := ClientContext(long)
	if err != nil {
		t.Fatal(err)
	}
	if len(cc) > MaxClientContextBytes/3 {
		t.Errorf("client context of the longest id is %d bytes; the limit is %d", len(cc), MaxClientContextBytes)
	}
	raw, err := base64.StdEncoding.DecodeString(cc)
	if err != nil {
		t.Fatal(err)
	}
	var got lambdacontext.ClientContext
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Custom[ClientContextKey] != long {
		t.Fatalf("custom = %v, want %s = %q", got.Custom, ClientContextKey, long)
	}
	if _, err := ClientContext(strings.Repeat("x", MaxInvocationIDLength+1)); err == nil {
		t.Fatal("an id over MaxInvocationIDLength was accepted")
	}
}

package trigger

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// ClientContextKey is the key of the invocation id in the client context's
// "custom" map; a Go handler reads it as
//
//	lc, _ := lambdacontext.FromContext(ctx)
//	id := lc.ClientContext.Custom["sluice-invocation-id"]
const ClientContextKey = "sluice-invocation-id"

// MaxClientContextBytes is the Invoke API's limit on the base64
// ClientContext.
const MaxClientContextBytes = 3583

// MaxInvocationIDLength bounds an invocation id, well under what the client
// context can carry (its JSON base64-encoded takes 4/3 of the id plus ~50
// bytes). Ids of catalog-valid names are at most ~510 bytes.
const MaxInvocationIDLength = 1024

// InvocationKey is what identifies one invocation of a batch.
type InvocationKey struct {
	Trigger   string
	Topic     string
	TopicID   catalog.TopicID
	Partition int32
	// FirstOffset and LastOffset are the batch's first and last records'.
	FirstOffset, LastOffset int64
	// LeaseEpoch is the epoch of the partition lease the batch was read
	// under.
	LeaseEpoch int64
}

// InvocationID is the idempotency key of an invocation:
//
//	v1/<trigger>/<topic>/<topic id>/<partition>/<first offset>-<last offset>/<lease epoch>
//
// e.g. "v1/orders-to-mail/orders/6f1c…/3/100-199/7". It depends on nothing
// else, so every retry of the same batch carries the same id; a bisected
// half has its own offsets, so its own id. LeaseEpoch is the epoch under
// which the batch's round was first run: a fetch copy that takes a
// partition over from a dead one runs the unfinished round again under
// that epoch (the runtime commits each round's range and epoch before it
// runs), so the function sees the same ids for the same batches; later
// rounds carry the new owner's epoch. Names are catalog names
// ([a-zA-Z0-9._-]), so '/' separates unambiguously.
func InvocationID(k InvocationKey) string {
	var b strings.Builder
	b.WriteString("v1/")
	b.WriteString(k.Trigger)
	b.WriteByte('/')
	b.WriteString(k.Topic)
	b.WriteByte('/')
	b.WriteString(string(k.TopicID))
	b.WriteByte('/')
	b.WriteString(strconv.FormatInt(int64(k.Partition), 10))
	b.WriteByte('/')
	b.WriteString(strconv.FormatInt(k.FirstOffset, 10))
	b.WriteByte('-')
	b.WriteString(strconv.FormatInt(k.LastOffset, 10))
	b.WriteByte('/')
	b.WriteString(strconv.FormatInt(k.LeaseEpoch, 10))
	return b.String()
}

// ClientContext is the Invoke ClientContext carrying id: base64 of
// {"custom":{"sluice-invocation-id":id}}, which aws-lambda-go hands the
// handler as lambdacontext's ClientContext.Custom.
func ClientContext(id string) (string, error) {
	if len(id) > MaxInvocationIDLength {
		return "", fmt.Errorf("invocation id is %d bytes, more than %d", len(id), MaxInvocationIDLength)
	}
	js, err := json.Marshal(struct {
		Custom map[string]string `json:"custom"`
	}{map[string]string{ClientContextKey: id}})
	if err != nil {
		return "", fmt.Errorf("encode client context: %w", err)
	}
	cc := base64.StdEncoding.EncodeToString(js)
	if len(cc) > MaxClientContextBytes { // cannot happen under MaxInvocationIDLength
		panic(fmt.Sprintf("trigger: client context of %d bytes over %d", len(cc), MaxClientContextBytes))
	}
	return cc, nil
}

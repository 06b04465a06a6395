package ingest

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// A copy without a producer id store says so instead of inventing ids.
func TestInitProducerWithoutAStoreIsUnimplemented(t *testing.T) {
	_, err := (&Service{}).InitProducer(context.Background(), connect.NewRequest(&sluicev1.InitProducerRequest{}))
	if connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Fatalf("InitProducer without Deps.Producers: %v; want UNIMPLEMENTED", err)
	}
}

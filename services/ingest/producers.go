package ingest

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/pkg/bookkeeping"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// InitProducer hands out a producer session (docs/DESIGN.md, "Producer
// identity"): a producer id allocated in bookkeeping, unique across the
// deployment, and its epoch; with a transactional id, the id registered for
// it with the epoch bumped, which fences the earlier sessions at every
// partition the new one writes (the partition writer refuses an older
// epoch of an id). Without Deps.Producers it answers UNIMPLEMENTED.
func (s *Service) InitProducer(ctx context.Context, req *connect.Request[sluicev1.InitProducerRequest]) (*connect.Response[sluicev1.InitProducerResponse], error) {
	if s.d.Producers == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this ingest copy has no producer id store (sluice ingest --cassandra); producers pick their own ids"))
	}
	tid := req.Msg.GetTransactionalId()
	if err := bookkeeping.ValidateTransactionalID(tid); err != nil {
		var ve *bookkeeping.ValidationError
		if errors.As(err, &ve) {
			return nil, apierr.Invalid("transactional_id", "%s", ve.Reason)
		}
		return nil, apierr.Invalid("transactional_id", "%v", err)
	}
	p, err := s.d.Producers.InitProducer(ctx, tid)
	switch {
	case err == nil:
	case errors.Is(err, bookkeeping.ErrConflict):
		return nil, connect.NewError(connect.CodeAborted, fmt.Errorf("concurrent InitProducer calls for transactional id %q; retry: %w", tid, err))
	default:
		return nil, apierr.Otherwise(fmt.Errorf("allocate a producer id: %w", err))
	}
	return connect.NewResponse(&sluicev1.InitProducerResponse{ProducerId: p.ID, ProducerEpoch: int32(p.Epoch)}), nil
}

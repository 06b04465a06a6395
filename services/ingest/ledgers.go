package ingest

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/internal/rpcclient"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/gen/sluice/peer/v1/peerv1connect"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/services/ingest/partition"
)

// LedgerClient adapts the ledger client to what partition writers need,
// translating "another writer fenced this ledger" into partition.ErrFenced.
func LedgerClient(c *client.Client) partition.Ledgers { return ledgerAdapter{c} }

type ledgerAdapter struct{ c *client.Client }

func (a ledgerAdapter) CreateLedger(ctx context.Context, spec catalog.LedgerSpec) (partition.Ledger, error) {
	w, err := a.c.CreateLedger(ctx, spec)
	if err != nil {
		return nil, err
	}
	return ledgerWriter{w}, nil
}

func (a ledgerAdapter) Recover(ctx context.Context, id catalog.LedgerID, lastOffset func(int64, []byte) (int64, error)) (catalog.LedgerMetadata, error) {
	return a.c.Recover(ctx, id, lastOffset)
}

func (a ledgerAdapter) ReadEntries(ctx context.Context, id catalog.LedgerID, first, last int64) ([][]byte, error) {
	return a.c.ReadEntries(ctx, id, first, last)
}

type ledgerWriter struct{ w *client.Writer }

func (l ledgerWriter) ID() catalog.LedgerID { return l.w.ID() }

func (l ledgerWriter) AppendAsync(payload []byte, done func(int64, error)) error {
	return fenced(l.w.AppendAsync(payload, func(entry int64, err error) { done(entry, fenced(err)) }))
}

// AppendAsyncContext is AppendAsync in ctx's trace (partition.tracedLedger).
func (l ledgerWriter) AppendAsyncContext(ctx context.Context, payload []byte, done func(int64, error)) error {
	return fenced(l.w.AppendAsyncContext(ctx, payload, func(entry int64, err error) { done(entry, fenced(err)) }))
}

func (l ledgerWriter) Close(ctx context.Context, lastOffset int64) (catalog.LedgerMetadata, error) {
	m, err := l.w.Close(ctx, lastOffset)
	return m, fenced(err)
}

func (l ledgerWriter) LeavingBookies(ctx context.Context) ([]string, error) {
	return l.w.LeavingBookies(ctx)
}

func fenced(err error) error {
	if err != nil && (errors.Is(err, ledger.ErrFenced) || errors.Is(err, ledger.ErrUnauthorized)) {
		return fmt.Errorf("%w: %w", partition.ErrFenced, err)
	}
	return err
}

// Forwarder returns a Deps.Forward that reaches other copies' ProducerService
// with the gRPC protocol through p. Clients are cheap; p pools connections.
func Forwarder(p rpcclient.Peers) func(address string) sluicev1connect.ProducerServiceClient {
	return func(address string) sluicev1connect.ProducerServiceClient {
		// No gzip between copies: the payloads are record batches
		// compressed by their producers.
		return sluicev1connect.NewProducerServiceClient(p.HTTP, p.URL(address), p.Options(connect.WithGRPC(),
			connect.WithAcceptCompression("gzip", nil, nil))...)
	}
}

// PartitionClients returns the constructor of clients for other copies'
// PartitionService (Deps.Partitions) through p.
func PartitionClients(p rpcclient.Peers) func(address string) peerv1connect.PartitionServiceClient {
	return func(address string) peerv1connect.PartitionServiceClient {
		return peerv1connect.NewPartitionServiceClient(p.HTTP, p.URL(address), p.Options(connect.WithGRPC())...)
	}
}

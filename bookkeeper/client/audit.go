package client

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/bookkeeper/wire"
	"github.com/sluicemq/sluice/pkg/catalog"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
)

// MissingLedgers asks bookie which of ids it holds nothing of
// (BookieService.MissingLedgers, in calls of at most
// wire.MaxMissingLedgersIDs ids, each within ReadTimeout) and returns
// them in order. The compactor's audit uses it to find copies the catalog
// names a live bookie for that the bookie lost (a wiped disk).
func (c *Client) MissingLedgers(ctx context.Context, bookieID string, ids []catalog.LedgerID) ([]catalog.LedgerID, error) {
	ctx, leave, err := c.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	var missing []catalog.LedgerID
	for len(ids) > 0 {
		n := min(len(ids), wire.MaxMissingLedgersIDs)
		req := &bookiev1.MissingLedgersRequest{LedgerIds: make([]int64, n)}
		for i, id := range ids[:n] {
			req.LedgerIds[i] = int64(id)
		}
		got, err := c.missingOn(ctx, bookieID, req)
		if err != nil {
			return nil, fmt.Errorf("missing ledgers on bookie %s: %w", bookieID, err)
		}
		for _, id := range got {
			missing = append(missing, catalog.LedgerID(id))
		}
		ids = ids[n:]
	}
	return missing, nil
}

func (c *Client) missingOn(ctx context.Context, bookieID string, req *bookiev1.MissingLedgersRequest) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ReadTimeout)
	defer cancel()
	bc, err := c.bookies.client(ctx, bookieID)
	if err != nil {
		return nil, err
	}
	resp, err := bc.MissingLedgers(ctx, connect.NewRequest(req))
	if err != nil {
		if unavailable(err) {
			c.bookies.forgetAfterFailure(bookieID) // it may have restarted elsewhere
		}
		return nil, err
	}
	return resp.Msg.GetMissing(), nil
}

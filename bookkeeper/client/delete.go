package client

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/pkg/catalog"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
)

// DeleteLedger asks every bookie named by any ensemble segment of m to
// drop the ledger (BookieService.DeleteLedger), one at a time, each within
// ReadTimeout. It is the compactor's last step for a ledger whose data now
// lives elsewhere (OFFLOADED) or nowhere (DELETED); deleting twice, or on a
// bookie that never had the ledger, is not an error. It refuses a ledger
// that is not sealed: a live writer's ledger is never deleted here.
// Errors: ErrInvalidArgument, and one error per bookie that did not
// confirm (unreachable, not in the registry), joined; a caller retries
// later. skip, if set, names bookies not to ask: ones the caller knows are
// lost for good, which would otherwise fail the delete forever.
func (c *Client) DeleteLedger(ctx context.Context, m catalog.LedgerMetadata, skip func(bookie string) bool) error {
	if !m.State.Sealed() {
		return fmt.Errorf("delete ledger %d: %w: it is %v, not sealed", m.ID, ErrInvalidArgument, m.State)
	}
	ctx, leave, err := c.enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	var ids []string
	for _, seg := range m.Ensembles {
		for _, b := range seg.Bookies {
			if !slices.Contains(ids, b) && (skip == nil || !skip(b)) {
				ids = append(ids, b)
			}
		}
	}
	var errs []error
	for _, id := range ids {
		if err := c.deleteOn(ctx, m.ID, id); err != nil {
			errs = append(errs, fmt.Errorf("delete ledger %d on bookie %s: %w", m.ID, id, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Client) deleteOn(ctx context.Context, id catalog.LedgerID, bookie string) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ReadTimeout)
	defer cancel()
	bc, err := c.bookies.client(ctx, bookie)
	if err != nil {
		return err
	}
	_, err = bc.DeleteLedger(ctx, connect.NewRequest(&bookiev1.DeleteLedgerRequest{LedgerId: int64(id)}))
	return err
}

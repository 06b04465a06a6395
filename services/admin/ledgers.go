package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// Bounds of ListUnderReplicatedLedgers.
const (
	defaultLedgerPage = 100
	maxLedgerPage     = 1000
	// maxLedgerScan bounds the catalog records one call reads, so a call
	// costs the same whatever the catalog holds; the token goes on.
	maxLedgerScan = 10_000
)

// onBookieStates are the states in which a ledger's data is on bookies,
// in the order the listing goes through them.
var onBookieStates = []catalog.LedgerState{catalog.LedgerOpen, catalog.LedgerInRecovery, catalog.LedgerClosed}

// ListUnderReplicatedLedgers lists the ledgers on bookies that name a
// bookie missing from the registry, or carry damage marks (see the RPC's
// documentation). The page
// token is "<state index>:<the catalog's token>".
func (s *Service) ListUnderReplicatedLedgers(ctx context.Context, req *connect.Request[sluicev1.ListUnderReplicatedLedgersRequest]) (*connect.Response[sluicev1.ListUnderReplicatedLedgersResponse], error) {
	size := int(req.Msg.GetPageSize())
	switch {
	case size == 0:
		size = defaultLedgerPage
	case size < 0 || size > maxLedgerPage:
		return nil, apierr.Invalid("page_size", "%d outside [1, %d] (0: %d)", size, maxLedgerPage, defaultLedgerPage)
	}
	state, token, err := parseLedgerToken(req.Msg.GetPageToken())
	if err != nil {
		return nil, err
	}
	live, err := s.d.Catalog.ListLiveBookies(ctx)
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	alive := map[string]bool{}
	resp := &sluicev1.ListUnderReplicatedLedgersResponse{}
	for _, b := range live {
		alive[b.ID] = true
		resp.LiveBookies = append(resp.LiveBookies, b.ID)
	}
	for state < len(onBookieStates) && len(resp.Ledgers) < size && int(resp.Scanned) < maxLedgerScan {
		// A page of at most the results still wanted: it can never
		// overfill, so a page always ends on the catalog's own token.
		limit := min(catalog.MaxPageSize, size-len(resp.Ledgers), maxLedgerScan-int(resp.Scanned))
		page, err := s.d.Catalog.ListLedgersByState(ctx, onBookieStates[state], token, limit)
		if err != nil {
			return nil, apierr.FromCatalog(err)
		}
		resp.Scanned += int32(len(page.Items))
		for _, m := range page.Items {
			if missing := missingBookies(m, alive); len(missing) > 0 || len(m.Damaged) > 0 {
				l := &sluicev1.UnderReplicatedLedger{
					LedgerId: int64(m.ID), Topic: m.Topic, Partition: int32(m.Partition), State: m.State.String(),
					MissingBookies: missing, FirstOffset: m.FirstOffset, LastOffset: m.LastOffset,
				}
				for _, d := range m.Damaged {
					l.DamagedCopies = append(l.DamagedCopies, &sluicev1.DamagedCopy{
						Bookie: d.Bookie, Entry: d.Entry, Reason: string(d.Reason), ReportedAtMs: d.At.UnixMilli(),
					})
				}
				resp.Ledgers = append(resp.Ledgers, l)
			}
		}
		if token = page.NextPageToken; token == "" {
			state++
		}
	}
	if state < len(onBookieStates) {
		resp.NextPageToken = strconv.Itoa(state) + ":" + token
	}
	return connect.NewResponse(resp), nil
}

// missingBookies is every bookie m's segments name that is not alive, each
// once, in order.
func missingBookies(m catalog.LedgerMetadata, alive map[string]bool) []string {
	var out []string
	for _, seg := range m.Ensembles {
		for _, b := range seg.Bookies {
			if !alive[b] && !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	return out
}

func parseLedgerToken(t string) (int, string, error) {
	if t == "" {
		return 0, "", nil
	}
	i := strings.IndexByte(t, ':')
	state, err := strconv.Atoi(t[:max(i, 0)])
	if i < 0 || err != nil || state < 0 || state >= len(onBookieStates) {
		return 0, "", apierr.Invalid("page_token", "%q is not a token this call returned", t)
	}
	return state, t[i+1:], nil
}

// ListBookies lists the registry's bookies and the missing ones that
// ledgers on bookies still name, with ledger counts from one bounded scan.
func (s *Service) ListBookies(ctx context.Context, _ *connect.Request[sluicev1.ListBookiesRequest]) (*connect.Response[sluicev1.ListBookiesResponse], error) {
	live, err := s.d.Catalog.ListLiveBookies(ctx)
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	resp := &sluicev1.ListBookiesResponse{}
	count := map[string]int32{}
	var missing []string
	alive := map[string]bool{}
	for _, b := range live {
		alive[b.ID] = true
	}
scan:
	for _, state := range onBookieStates {
		for token := ""; ; {
			if resp.Scanned >= maxLedgerScan {
				resp.LedgersTruncated = true
				break scan
			}
			page, err := s.d.Catalog.ListLedgersByState(ctx, state, token, min(catalog.MaxPageSize, maxLedgerScan-int(resp.Scanned)))
			if err != nil {
				return nil, apierr.FromCatalog(err)
			}
			resp.Scanned += int32(len(page.Items))
			for _, m := range page.Items {
				seen := map[string]bool{}
				for _, seg := range m.Ensembles {
					for _, b := range seg.Bookies {
						if seen[b] {
							continue
						}
						seen[b] = true
						if count[b]++; !alive[b] && count[b] == 1 {
							missing = append(missing, b)
						}
					}
				}
			}
			if token = page.NextPageToken; token == "" {
				break
			}
		}
	}
	for _, b := range live {
		resp.Bookies = append(resp.Bookies, &sluicev1.BookieInfo{Id: b.ID, Address: b.Address, State: bookieState(b.ReadOnly, b.Draining), FreeBytes: b.FreeBytes,
			TotalBytes: b.TotalBytes, ExpiresAtMs: b.ExpiresAt.UnixMilli(), Ledgers: count[b.ID]})
	}
	slices.Sort(missing)
	for _, b := range missing {
		resp.Bookies = append(resp.Bookies, &sluicev1.BookieInfo{Id: b, State: "missing", Ledgers: count[b]})
	}
	return connect.NewResponse(resp), nil
}

// bookieState is a live bookie's BookieInfo.state.
func bookieState(readOnly, draining bool) string {
	switch {
	case draining:
		return "draining"
	case readOnly:
		return "read-only"
	default:
		return "writable"
	}
}

// DecommissionBookie starts or cancels draining a live bookie (see the
// RPC's documentation; bookkeeper/DESIGN.md "Decommission").
func (s *Service) DecommissionBookie(ctx context.Context, req *connect.Request[sluicev1.DecommissionBookieRequest]) (*connect.Response[sluicev1.DecommissionBookieResponse], error) {
	if s.d.Bookies == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this server cannot reach bookies"))
	}
	id := req.Msg.GetBookieId()
	if err := catalog.ValidateID("bookie_id", id); err != nil {
		return nil, apierr.FromCatalog(err)
	}
	live, err := s.d.Catalog.ListLiveBookies(ctx)
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	if !slices.ContainsFunc(live, func(b catalog.Bookie) bool { return b.ID == id }) {
		ids := make([]string, len(live))
		for i, b := range live {
			ids[i] = b.ID
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("bookie %q is not in the registry (live: %v); "+
			"a bookie must be running to be drained — one lost for good is re-replicated after the compactor's --rereplicate-grace", id, ids))
	}
	if !req.Msg.GetCancel() {
		// Without it, E writable bookies must remain for the largest
		// ensemble in use, or partitions that roll off it could open no
		// new ledger.
		writable := 0
		for _, b := range live {
			if b.ID != id && !b.ReadOnly {
				writable++
			}
		}
		need, err := s.largestEnsemble(ctx)
		if err != nil {
			return nil, apierr.FromCatalog(err)
		}
		if writable < need {
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("draining bookie %q would leave %d writable bookies, "+
				"fewer than the largest ensemble in use (%d): add a bookie first", id, writable, need))
		}
	}
	st, err := s.d.Bookies.SetBookieDraining(ctx, id, !req.Msg.GetCancel())
	if err != nil {
		return nil, apierr.Otherwise(err)
	}
	resp := &sluicev1.DecommissionBookieResponse{State: bookieState(st.ReadOnly, st.Draining)}
	if st.Draining {
		resp.DrainingSinceMs = st.DrainingSince.UnixMilli()
	}
	return connect.NewResponse(resp), nil
}

// largestEnsemble is the largest replication.ensemble of the topics (at
// least the default's).
func (s *Service) largestEnsemble(ctx context.Context) (int, error) {
	need := catalog.DefaultReplication.Ensemble
	for token := ""; ; {
		page, err := s.d.Catalog.ListTopics(ctx, token, catalog.MaxPageSize)
		if err != nil {
			return 0, err
		}
		for _, t := range page.Items {
			need = max(need, t.Config.Replication.Ensemble)
		}
		if token = page.NextPageToken; token == "" {
			return need, nil
		}
	}
}

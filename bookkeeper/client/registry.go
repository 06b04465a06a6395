package client

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/pkg/catalog"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1/bookiev1connect"
)

// grpcDialer returns the default Dial: the gRPC protocol over hc, to
// https:// addresses when secure. gRPC
// rather than Connect's own protocol because the hot path is a bidi stream,
// gRPC's home ground (binary framing, trailers, the same wire any gRPC
// tool or server speaks); the bookie's handler takes all three protocols.
func grpcDialer(hc connect.HTTPClient, secure bool, maxMsg int) func(string) bookiev1connect.BookieServiceClient {
	scheme := "http://"
	if secure {
		scheme = "https://"
	}
	return func(address string) bookiev1connect.BookieServiceClient {
		return bookiev1connect.NewBookieServiceClient(hc, scheme+address,
			connect.WithGRPC(), connect.WithReadMaxBytes(maxMsg), connect.WithSendMaxBytes(maxMsg),
			// No gzip: entries are record batches the producer compressed
			// already, and gzip of the answers cost ~15% of a sluice dev's
			// CPU at 10k records/s (bench/results/2026-11-30-consume).
			connect.WithAcceptCompression("gzip", nil, nil))
	}
}

// registry resolves bookie ids to RPC clients through the catalog's bookie
// registry, and places ensembles.
//
// Addresses are cached; an unknown id re-reads the registry, at most once
// per RegistryRefreshInterval. On a bookie's first use at an address the
// client checks its identity with GetStatus: NOT_FOUND answers from the
// wrong bookie would let recovery truncate a ledger.
type registry struct {
	cfg   Config
	dial  func(string) bookiev1connect.BookieServiceClient
	stats *clientStats

	// mu guards the maps and lastRefresh. Leaf lock: never held across a
	// catalog call or an RPC.
	mu          sync.Mutex
	addrs       map[string]string // bookie id → address
	draining    map[string]bool   // bookie ids the last listing said are draining
	listed      map[string]bool   // bookie ids in the last listing
	lastRefresh time.Time
	dialed      map[string]bookiev1connect.BookieServiceClient // address → client
	verified    map[string]string                              // bookie id → address whose identity was checked
	placed      map[string]int                                 // bookie id → ledger ensembles this client put it in
}

func newRegistry(cfg Config, dial func(string) bookiev1connect.BookieServiceClient, stats *clientStats) *registry {
	return &registry{
		cfg: cfg, dial: dial, stats: stats,
		addrs: map[string]string{}, draining: map[string]bool{}, listed: map[string]bool{}, dialed: map[string]bookiev1connect.BookieServiceClient{},
		verified: map[string]string{}, placed: map[string]int{},
	}
}

// list reads the live bookies and refreshes the address cache.
func (r *registry) list(ctx context.Context) ([]catalog.Bookie, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CatalogTimeout)
	defer cancel()
	r.stats.registryRefreshes.Add(1)
	live, err := r.cfg.Bookies.ListLiveBookies(ctx)
	if err != nil {
		return nil, fmt.Errorf("list live bookies: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastRefresh = r.cfg.Now()
	seen := make(map[string]bool, len(live))
	clear(r.draining)
	clear(r.listed)
	for _, b := range live {
		seen[b.ID] = true
		r.listed[b.ID] = true
		if b.Draining {
			r.draining[b.ID] = true
		}
		if old, ok := r.addrs[b.ID]; ok && old != b.Address {
			delete(r.verified, b.ID)
		}
		r.addrs[b.ID] = b.Address
	}
	// Keep addresses of bookies that dropped out (older ensembles may name
	// them; if they are really gone their RPCs fail), but bound the maps
	// by the registry's own bound.
	if len(r.addrs) > catalog.MaxBookies {
		for id := range r.addrs {
			if !seen[id] {
				delete(r.addrs, id)
				delete(r.verified, id)
			}
		}
	}
	for id := range r.placed {
		if !seen[id] {
			delete(r.placed, id)
		}
	}
	if len(r.dialed) > catalog.MaxBookies {
		clear(r.dialed)
	}
	return live, nil
}

// client returns the RPC client of bookie id, resolving its address and
// checking its identity on first use.
func (r *registry) client(ctx context.Context, id string) (bookiev1connect.BookieServiceClient, error) {
	r.mu.Lock()
	addr, ok := r.addrs[id]
	stale := r.cfg.Now().Sub(r.lastRefresh) >= r.cfg.RegistryRefreshInterval
	r.mu.Unlock()
	if !ok && stale {
		if _, err := r.list(ctx); err != nil {
			return nil, err
		}
		r.mu.Lock()
		addr, ok = r.addrs[id]
		r.mu.Unlock()
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownBookie, id)
	}
	r.mu.Lock()
	bc := r.dialed[addr]
	checked := r.verified[id] == addr
	r.mu.Unlock()
	if bc == nil {
		bc = r.dial(addr) // outside the lock: Dial is the caller's code
		r.mu.Lock()
		if prev := r.dialed[addr]; prev != nil {
			bc = prev
		} else {
			r.dialed[addr] = bc
		}
		r.mu.Unlock()
	}
	if checked {
		return bc, nil
	}
	sctx, cancel := context.WithTimeout(ctx, r.cfg.FenceTimeout)
	defer cancel()
	resp, err := bc.GetStatus(sctx, connect.NewRequest(&bookiev1.GetStatusRequest{}))
	if err != nil {
		if unavailable(err) {
			r.forget(id, addr)
		}
		return nil, fmt.Errorf("bookie %s at %s: status: %w", id, addr, err)
	}
	if got := resp.Msg.GetBookieId(); got != id {
		r.forget(id, addr)
		return nil, fmt.Errorf("%w: the server at %s is bookie %q, not %q", ErrBookieIdentity, addr, got, id)
	}
	r.mu.Lock()
	if r.addrs[id] == addr {
		r.verified[id] = addr
	}
	r.mu.Unlock()
	return bc, nil
}

// alive asks bookie id for its status now: nil when it answers as itself
// and is writable.
func (r *registry) alive(ctx context.Context, id string) error {
	r.mu.Lock()
	delete(r.verified, id) // check the identity again: it may have restarted elsewhere
	r.mu.Unlock()
	bc, err := r.client(ctx, id)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, r.cfg.FenceTimeout)
	defer cancel()
	resp, err := bc.GetStatus(sctx, connect.NewRequest(&bookiev1.GetStatusRequest{}))
	if err != nil {
		return fmt.Errorf("bookie %s: status: %w", id, err)
	}
	if resp.Msg.GetReadOnly() {
		return fmt.Errorf("bookie %s is read-only", id)
	}
	return nil
}

// forget drops id's cached address if it is still addr, so the next use
// reads the registry again (the bookie may have moved).
func (r *registry) forget(id, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.addrs[id] == addr {
		delete(r.addrs, id)
		delete(r.verified, id)
	}
}

// pick chooses n live, writable bookies outside exclude: those this client
// placed in the fewest ensembles first (spreading its ledgers), then those
// with the most free bytes, ties broken at random. It counts the picks.
func (r *registry) pick(ctx context.Context, n int, exclude []string) ([]string, error) {
	live, err := r.list(ctx)
	if err != nil {
		return nil, err
	}
	var cands []catalog.Bookie
	for _, b := range live {
		if !b.ReadOnly && !slices.Contains(exclude, b.ID) {
			cands = append(cands, b)
		}
	}
	if len(cands) < n {
		return nil, fmt.Errorf("%w: need %d, have %d live and writable outside %v", ErrNotEnoughBookies, n, len(cands), exclude)
	}
	rand.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	r.mu.Lock()
	defer r.mu.Unlock()
	slices.SortStableFunc(cands, func(a, b catalog.Bookie) int {
		if c := cmp.Compare(r.placed[a.ID], r.placed[b.ID]); c != 0 {
			return c
		}
		return cmp.Compare(b.FreeBytes, a.FreeBytes)
	})
	out := make([]string, n)
	for i := range out {
		out[i] = cands[i].ID
		r.placed[out[i]]++
	}
	return out, nil
}

// leavingOf returns the bookies of ids that are draining or missing from
// the registry, from a listing at most RegistryRefreshInterval old (read
// again when older).
func (r *registry) leavingOf(ctx context.Context, ids []string) ([]string, error) {
	r.mu.Lock()
	stale := r.cfg.Now().Sub(r.lastRefresh) >= r.cfg.RegistryRefreshInterval
	r.mu.Unlock()
	if stale {
		if _, err := r.list(ctx); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, id := range ids {
		if (r.draining[id] || !r.listed[id]) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/internal/quota"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	rpart "github.com/sluicemq/sluice/pkg/record/partition"
	"github.com/sluicemq/sluice/pkg/schema/registry"
	"github.com/sluicemq/sluice/services/ingest/balance"
	"github.com/sluicemq/sluice/services/ingest/partition"
)

// Service is one ingest copy: it owns partition writers under leases and
// serves ProducerService. Create it with New, serve Handler, and call Run,
// which heartbeats the copy's ownership and hands every partition over when
// its context ends.
type Service struct {
	cfg Config
	d   Deps
	log *slog.Logger

	// mu guards the fields below up to fwdMu, and swept. Lock order
	// (services/DESIGN.md §4): mu → partition.Writer.mu (open,
	// forgetStoppedLocked and balancing's dropWriters ask a slot's writer
	// for its error) and mu → drainSet.mu (shutdown); mu and fwdMu are
	// never held together. No I/O runs under it.
	mu      sync.Mutex
	writers map[slotKey]*slot
	topics  map[string]cachedTopic
	owners  map[string]cachedOwner
	// topicRefresh: the topics whose cached metadata is being read again
	// in the background (topic); refreshes is what shutdown waits for.
	topicRefresh map[string]bool
	closing      bool
	// fwdRoutes: partitions another copy owns, and its address, as last
	// read from the catalog; used for a heartbeat interval (an expired one
	// is deleted when looked up), and forgotten when a forward fails
	// (forgetRoute), so a forwarded request costs no catalog read (it cost
	// two, in the stream's receive loop).
	fwdRoutes map[slotKey]cachedRoute
	// released: partitions this copy gave up by balancing, and when.
	released map[slotKey]time.Time
	balancer *balance.Balancer
	quotas   *quota.Limiter
	buffered *budget
	// live: the last heartbeat succeeded (AcquireWriter needs it).
	heartbeatOK chan struct{}
	// ready is closed once Run's start-up reclaim has finished (Ready).
	ready    chan struct{}
	beatOnce sync.Once
	// streams are the open ProduceStreams' request bodies: shutdown closes
	// them, so the streams stop taking requests, answer what they hold and
	// end with UNAVAILABLE; a connected producer moves on at once and the
	// server's shutdown does not wait for it (drain.go).
	streams drainSet
	// Forwarding streams to other copies, by address (forward.go). fwdMu
	// → fwdStream.mu (a cached stream's error is read under it).
	fwdMu      sync.Mutex
	fwdStreams map[string]*fwdStream
	fwdClosed  bool
	fwdCtx     context.Context
	fwdCancel  context.CancelFunc
	fwdWG      sync.WaitGroup
	// retiring counts the goroutines closing writers this copy forgot
	// because they stopped (retire); shutdown waits for them. Added to
	// under mu and only while closing is false, so never after shutdown
	// began to wait.
	retiring sync.WaitGroup
	// refreshes counts the background reads of topics' metadata
	// (refreshTopic); added to under mu while closing is false, as
	// retiring.
	refreshes sync.WaitGroup
	// swept is when open last looked for stopped writers to forget at
	// MaxWriters (guarded by mu).
	swept time.Time
	// txnParts: partitions verified in a transaction (producers.go).
	txnParts txnPartCache
	// txnMemo: the coordinator's remembered states and deferred
	// completions (txnmemo.go).
	txnMemo *txnMemo
	// schemas validates records of topics with a schema.subject (nil
	// without Deps.Schemas; schemas.go).
	schemas *registry.Validator
	// m: the instruments (metrics.go).
	m *meters
	// tracer makes the append spans (tracing.go); nil: none.
	tracer trace.Tracer
}

type cachedRoute struct {
	address string
	at      time.Time
}

// forgetRoute drops the cached forwarding route of a partition (a forward
// to it failed: it may have moved).
func (s *Service) forgetRoute(key slotKey) {
	s.mu.Lock()
	delete(s.fwdRoutes, key)
	s.mu.Unlock()
}

type slotKey struct {
	topic     catalog.TopicID
	partition int
}

// slot is a partition writer being opened or open; ready is closed when
// the open finished (w or err set).
type slot struct {
	ready chan struct{}
	w     *partition.Writer
	err   error
}

type cachedTopic struct {
	t       catalog.Topic
	part    *rpart.Partitioner
	fetched time.Time
}

type cachedOwner struct {
	o       catalog.Owner
	fetched time.Time
}

// New returns an ingest copy.
func New(cfg Config, d Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Catalog == nil || d.Ledgers == nil || d.Forward == nil {
		return nil, errors.New("ingest: Deps.Catalog, Deps.Ledgers and Deps.Forward are required")
	}
	cfg = cfg.withDefaults()
	bal, err := balance.New(cfg.Balance)
	if err != nil {
		return nil, err
	}
	q, err := quota.New(cfg.Quota)
	if err != nil {
		return nil, err
	}
	var schemas *registry.Validator
	if d.Schemas != nil {
		reg, err := registry.New(registry.Config{Store: d.Schemas})
		if err != nil {
			return nil, err
		}
		schemas = registry.NewValidator(reg, registry.ValidatorConfig{})
	}
	fctx, fcancel := context.WithCancel(context.Background())
	s := &Service{
		schemas: schemas,
		cfg:     cfg, d: d, log: cfg.Logger, balancer: bal, quotas: q, buffered: newBudget(cfg.MaxBufferedBytes),
		fwdCtx: fctx, fwdCancel: fcancel,
		released:     make(map[slotKey]time.Time),
		writers:      make(map[slotKey]*slot),
		fwdStreams:   make(map[string]*fwdStream),
		fwdRoutes:    make(map[slotKey]cachedRoute),
		topics:       make(map[string]cachedTopic),
		topicRefresh: make(map[string]bool),
		owners:       make(map[string]cachedOwner),
		heartbeatOK:  make(chan struct{}),
		ready:        make(chan struct{}),
		txnMemo:      newTxnMemo(),
	}
	s.tracer = newTracer(d.Tracer)
	if s.m, err = newMeters(d.Meters, s); err != nil {
		fcancel()
		return nil, fmt.Errorf("ingest: metrics: %w", err)
	}
	return s, nil
}

// Handler returns ProducerService's path and handler.
func (s *Service) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	path, h := sluicev1connect.NewProducerServiceHandler(s, opts...)
	return path, s.trackStreams(h)
}

// Ready is closed once Run has taken back the partitions a previous
// session of this owner id held (reclaim): from then on, every record that
// session acknowledged is readable. Serve health as NOT_SERVING until then.
func (s *Service) Ready() <-chan struct{} { return s.ready }

// Run heartbeats the copy's owner record until ctx ends, then hands every
// partition over: writers drain and seal their ledgers and release their
// leases, and the owner record is removed so other copies take over at once
// (DESIGN.md §2.3: immediate failover on graceful shutdown).
func (s *Service) Run(ctx context.Context) error {
	beat := func(ctx context.Context) {
		cctx, cancel := context.WithTimeout(ctx, s.cfg.HeartbeatInterval)
		defer cancel()
		err := catalog.RetryHeartbeat(cctx, func(ctx context.Context) error {
			_, err := s.d.Catalog.HeartbeatOwner(ctx, s.cfg.OwnerID, s.cfg.Address, s.cfg.OwnerTTL)
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("ingest heartbeat failed", slog.Any("err", err))
			}
			return
		}
		s.beatOnce.Do(func() { close(s.heartbeatOK) })
	}
	beat(ctx)
	// Heartbeats have their own goroutine: a balancing round that takes
	// over many partitions from a slow catalog must not delay them past
	// OwnerTTL (the copy would lose every lease it holds and fail every
	// takeover with "owner heartbeat expired"). It ends before shutdown
	// removes the owner record, so no late beat writes it back.
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		t := time.NewTicker(s.cfg.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				beat(ctx)
			}
		}
	}()
	start := time.Now()
	taken, failed := s.reclaim(ctx)
	if taken+failed > 0 {
		s.log.Info("ingest took back its partitions", slog.Int("taken", taken), slog.Int("failed", failed), slog.Duration("took", time.Since(start)))
	}
	close(s.ready)
	sweeper := make(chan struct{})
	go func() {
		defer close(sweeper)
		s.runSweeper(ctx)
	}()
	defer func() { <-sweeper }()
	var balanceC <-chan time.Time
	if s.cfg.BalanceInterval > 0 {
		bt := time.NewTicker(s.cfg.BalanceInterval)
		defer bt.Stop()
		balanceC = bt.C
	}
	for {
		select {
		case <-ctx.Done():
			<-beats
			return s.shutdown()
		case <-balanceC:
			if err := s.balanceRound(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("ingest balancing round failed", slog.Any("err", err))
			}
			s.rollOffLeaving(ctx)
		}
	}
}

// shutdown closes every writer and removes the owner record.
func (s *Service) shutdown() error {
	s.mu.Lock()
	s.closing = true
	s.streams.drain()
	slots := make([]*slot, 0, len(s.writers))
	for _, sl := range s.writers {
		slots = append(slots, sl)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpenTimeout)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(slots))
	for i, sl := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-sl.ready:
			case <-ctx.Done():
				return
			}
			if sl.w != nil {
				errs[i] = sl.w.Close(ctx)
			}
		}()
	}
	wg.Wait()
	s.retiring.Wait()
	s.refreshes.Wait()
	s.txnMemo.shutdown()
	s.closeForwarding()
	if err := s.m.registration.Unregister(); err != nil {
		errs = append(errs, fmt.Errorf("unregister the metrics' callback: %w", err))
	}
	if err := s.d.Catalog.RemoveOwner(ctx, s.cfg.OwnerID); err != nil && !errors.Is(err, catalog.ErrNotFound) {
		errs = append(errs, fmt.Errorf("remove owner record: %w", err))
	}
	s.log.Info("ingest handed over its partitions", slog.Int("partitions", len(slots)))
	return errors.Join(errs...)
}

// topic returns a live topic's metadata, cached for TopicCacheTTL.
//
// An entry past its TTL but younger than twice that is still answered,
// and read again in the background, once at a time per topic: a
// request never waits for the catalog to refresh what it already has (it
// did: every TTL, every request of a busy topic stalled on its own
// GetTopic — 0.5-0.9 s in issue 24's T1M on the emulated catalog — and
// a transaction's AddPartitionsToTxn with them). Nothing depends on the
// refresh for correctness: a request is never routed into another
// incarnation by cached metadata (docs/DESIGN.md, "Topic identity").
func (s *Service) topic(ctx context.Context, name string) (cachedTopic, error) {
	s.mu.Lock()
	ct, ok := s.topics[name]
	s.mu.Unlock()
	if ok {
		switch age := time.Since(ct.fetched); {
		case age < s.cfg.TopicCacheTTL:
			return ct, nil
		case age < 2*s.cfg.TopicCacheTTL:
			s.refreshTopic(name)
			return ct, nil
		}
	}
	return s.loadTopic(ctx, name)
}

// refreshTopic reads name's metadata again in the background, unless a
// refresh of it is running or the service is closing. A topic the catalog
// no longer has is forgotten (the next request looks it up and fails);
// other errors leave the entry until it is too old to answer.
func (s *Service) refreshTopic(name string) {
	s.mu.Lock()
	if s.closing || s.topicRefresh[name] {
		s.mu.Unlock()
		return
	}
	s.topicRefresh[name] = true
	s.refreshes.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.refreshes.Done()
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.TopicCacheTTL)
		defer cancel()
		_, err := s.loadTopic(ctx, name)
		s.mu.Lock()
		delete(s.topicRefresh, name)
		if errors.Is(err, catalog.ErrNotFound) {
			delete(s.topics, name)
		}
		s.mu.Unlock()
		if err != nil && !errors.Is(err, catalog.ErrNotFound) {
			s.log.Debug("topic metadata refresh failed; the cached one still answers", slog.String("topic", name), slog.Any("err", err))
		}
	}()
}

// loadTopic reads name's metadata from the catalog and caches it.
func (s *Service) loadTopic(ctx context.Context, name string) (cachedTopic, error) {
	t, err := s.d.Catalog.GetTopic(ctx, name)
	if err != nil {
		return cachedTopic{}, err
	}
	s.mu.Lock()
	ct, ok := s.topics[name]
	s.mu.Unlock()
	if ok && ct.t.ID == t.ID && ct.part != nil {
		if err := ct.part.SetPartitions(int32(t.Partitions)); err != nil {
			return cachedTopic{}, err
		}
	} else {
		p, err := rpart.New(int32(t.Partitions), rand.NewPCG(rand.Uint64(), rand.Uint64()))
		if err != nil {
			return cachedTopic{}, err
		}
		ct.part = p
	}
	ct.t, ct.fetched = t, time.Now()
	s.mu.Lock()
	if len(s.topics) > 10_000 {
		clear(s.topics)
	}
	s.topics[name] = ct
	s.mu.Unlock()
	return ct, nil
}

// forgetTopic drops the cached metadata of a topic incarnation (its
// writer was fenced, or it was deleted): the next lookup by name reads the
// catalog.
func (s *Service) forgetTopic(id catalog.TopicID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, ct := range s.topics {
		if ct.t.ID == id {
			delete(s.topics, name)
		}
	}
}

// recreated is the answer for a request routed by a cached topic whose name
// now belongs to another incarnation: UNAVAILABLE (a retry looks the name
// up again and writes to the new topic), never an acknowledgement into the
// deleted one.
func (s *Service) recreated(t catalog.Topic) error {
	s.forgetTopic(t.ID)
	return retry("topic %q was deleted (and created again) meanwhile; retry", t.Name)
}

// TopicDeleted drops this copy's writers of a deleted topic and its cached
// metadata. DeleteTopic calls it after fencing the topic's ledgers (their
// writers could not acknowledge anything more already); balancing rounds
// drop the writers of topics other copies deleted.
func (s *Service) TopicDeleted(t catalog.Topic) {
	s.forgetTopic(t.ID)
	s.m.forgetTopic(t.Name)
	s.dropWriters(func(k slotKey, _ *slot) bool { return k.topic == t.ID })
}

// dropWriters stops and forgets the writers whose slot matches (match
// runs with mu held). Their ledgers were sealed by whoever fenced them, so
// closing finds nothing to hand over; what it reports is logged at debug
// level.
func (s *Service) dropWriters(match func(slotKey, *slot) bool) {
	s.mu.Lock()
	var slots []*slot
	for k, sl := range s.writers {
		if match(k, sl) {
			slots = append(slots, sl)
			delete(s.writers, k)
		}
	}
	s.mu.Unlock()
	if len(slots) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpenTimeout)
	defer cancel()
	s.parallel(ctx, len(slots), func(i int) {
		sl := slots[i]
		select {
		case <-sl.ready:
		case <-ctx.Done():
			return
		}
		if sl.w != nil {
			if err := sl.w.Close(ctx); err != nil {
				s.log.Debug("ingest closed a writer it dropped", slog.Any("lease", sl.w.Lease()), slog.Any("err", err))
			}
		}
	})
}

// retire closes a writer this copy forgot because it stopped (fenced by
// another copy's takeover or by DeleteTopic), so its maintenance goroutine
// ends. Close waits for that goroutine, which may be in a catalog or
// bookie call for up to the writer's CloseTimeout, and the caller is
// usually a produce, so it runs on a goroutine of its own that shutdown
// waits for; once shutdown began, on the caller's.
func (s *Service) retire(w *partition.Writer) {
	s.mu.Lock()
	closing := s.closing
	if !closing {
		s.retiring.Add(1)
	}
	s.mu.Unlock()
	closeIt := func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpenTimeout)
		defer cancel()
		if err := w.Close(ctx); err != nil {
			s.log.Debug("ingest closed a writer it dropped", slog.Any("lease", w.Lease()), slog.Any("err", err))
		}
	}
	if closing {
		closeIt()
		return
	}
	go func() {
		defer s.retiring.Done()
		closeIt()
	}()
}

// route says where a partition's batches go: this copy's writer, or the
// address of the live owner to forward to.
type route struct {
	w       *partition.Writer
	forward string
}

// routeTo finds or takes the writer of partition p of t. A partition owned
// by a live other copy is forwarded there; a free one, or one whose owner's
// heartbeat expired, is taken over (fencing the old writer through ledger
// recovery); one this copy writes is used directly.
func (s *Service) routeTo(ctx context.Context, t catalog.Topic, p int, forwarded bool) (route, error) {
	key := slotKey{t.ID, p}
	for attempt := 0; attempt < 3; attempt++ {
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			return route{}, errShuttingDown()
		}
		sl := s.writers[key]
		if sl != nil {
			s.mu.Unlock()
			select {
			case <-sl.ready:
			case <-ctx.Done():
				return route{}, context.Cause(ctx)
			}
			if sl.err == nil && sl.w.Err() == nil {
				return route{w: sl.w}, nil
			}
			if s.drop(key, sl) && sl.err == nil {
				s.retire(sl.w)
			}
			if sl.err == nil {
				// The writer stopped (fenced, perhaps by DeleteTopic):
				// look the topic up again before taking it over.
				s.forgetTopic(t.ID)
			}
			if sl.err != nil && !errors.Is(sl.err, catalog.ErrOwned) {
				return route{}, sl.err
			}
			continue
		}
		if fr, ok := s.fwdRoutes[key]; ok {
			if time.Since(fr.at) >= s.cfg.HeartbeatInterval {
				delete(s.fwdRoutes, key) // expired: read again below
			} else if !forwarded {
				s.mu.Unlock()
				return route{forward: fr.address}, nil
			}
		}
		s.mu.Unlock()

		part, err := s.d.Catalog.GetPartition(ctx, t.Name, p)
		if err != nil {
			return route{}, err
		}
		if part.TopicID != t.ID {
			return route{}, s.recreated(t)
		}
		s.mu.Lock()
		released := s.recentlyReleasedLocked(key)
		s.mu.Unlock()
		if released && (part.Owner == "" || part.Owner == s.cfg.OwnerID) {
			return route{}, retry("%s/%d is being handed to another ingest copy; retry", t.Name, p)
		}
		if part.Owner != "" && part.Owner != s.cfg.OwnerID {
			if o, live := s.liveOwner(ctx, part.Owner); live {
				if forwarded {
					return route{}, retry("%s/%d moved to %s; retry there", t.Name, p, o.Address)
				}
				s.mu.Lock()
				s.fwdRoutes[key] = cachedRoute{address: o.Address, at: time.Now()}
				s.mu.Unlock()
				return route{forward: o.Address}, nil
			}
		}
		if err := s.open(ctx, t, p); err != nil && !errors.Is(err, catalog.ErrOwned) {
			return route{}, err
		}
	}
	return route{}, retry("%s/%d: ownership is moving; retry", t.Name, p)
}

// errShuttingDown is the answer for a partition this copy would write once
// its shutdown began.
func errShuttingDown() error {
	return retry("ingest copy is shutting down; retry (another copy takes over)")
}

// open takes over partition p (one opener at a time per partition). Once
// shutdown began it refuses: shutdown hands over only the writers it
// listed when it set closing, so a writer opened after that would run on,
// neither closed nor handed over (routeTo checks closing before its
// catalog reads, not after).
func (s *Service) open(ctx context.Context, t catalog.Topic, p int) error {
	key := slotKey{t.ID, p}
	// Writers forgotten below because they stopped are closed once mu is
	// released.
	var stopped []*partition.Writer
	unlock := func() {
		s.mu.Unlock()
		for _, w := range stopped {
			s.retire(w)
		}
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return errShuttingDown()
	}
	if old := s.writers[key]; old != nil {
		select {
		case <-old.ready:
			if old.err == nil && old.w.Err() == nil {
				s.mu.Unlock()
				return nil // already writing it
			}
			delete(s.writers, key) // a failed open or a stopped writer
			if old.err == nil {
				stopped = append(stopped, old.w)
			}
		default:
			s.mu.Unlock()
			return nil // another goroutine is opening it
		}
	}
	if len(s.writers) >= s.cfg.MaxWriters && time.Since(s.swept) >= s.cfg.RetryAfter {
		// Writers that stopped (fenced) since a produce last reached them
		// hold no partition: forget them before refusing. A scan of every
		// writer, so at most once per RetryAfter.
		s.swept = time.Now()
		stopped = append(stopped, s.forgetStoppedLocked()...)
	}
	if len(s.writers) >= s.cfg.MaxWriters {
		unlock()
		// Throttling: another copy may take the partition, or this one
		// may hand some over; RESOURCE_EXHAUSTED always carries a delay.
		return limitError{fmt.Errorf("this ingest copy writes %d partitions, its limit; retry later", s.cfg.MaxWriters)}
	}
	sl := &slot{ready: make(chan struct{})}
	s.writers[key] = sl
	unlock()
	defer func() {
		close(sl.ready)
		if sl.err != nil {
			s.drop(key, sl) // never leave a failed slot behind to block a retry
		}
	}()

	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.OpenTimeout)
	defer cancel()
	select {
	case <-s.heartbeatOK:
	case <-octx.Done():
		sl.err = retry("this ingest copy has not registered in the catalog yet; retry")
		return sl.err
	}
	part, err := s.d.Catalog.AcquireWriter(octx, t.Name, p, s.cfg.OwnerID)
	if err != nil {
		sl.err = err
		return err
	}
	defer func() { s.m.acquired(ctx, sl.err) }()
	if part.TopicID != t.ID {
		// The name is another incarnation's now; hand back what we took.
		if err := s.d.Catalog.ReleaseWriter(octx, part.Lease()); err != nil {
			s.log.Warn("ingest could not release a partition of a re-created topic", slog.String("topic", t.Name), slog.Int("partition", p), slog.Any("err", err))
		}
		sl.err = s.recreated(t)
		return sl.err
	}
	w, err := partition.Open(octx, s.cfg.Writer, s.d.Ledgers, s.d.Catalog, part, part.Lease(), t.Config.Replication)
	if err != nil {
		sl.err = fmt.Errorf("take over %s/%d: %w", t.Name, p, err)
		s.log.Warn("ingest could not take over a partition", slog.String("topic", t.Name), slog.Int("partition", p), slog.Any("err", err))
		return sl.err
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		// shutdown began while the writer opened, and may have listed the
		// slot (it then waits for ready and finds no writer): hand the
		// partition over here.
		sl.err = errShuttingDown()
		cctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpenTimeout)
		defer cancel()
		if err := w.Close(cctx); err != nil {
			s.log.Warn("ingest could not hand over a partition it took during shutdown", slog.String("topic", t.Name), slog.Int("partition", p), slog.Any("err", err))
		}
		return sl.err
	}
	sl.w = w
	s.log.Info("ingest took over a partition", slog.String("topic", t.Name), slog.Int("partition", p), slog.Int64("epoch", part.Epoch), slog.Int64("next_offset", w.NextOffset()))
	return nil
}

// drop forgets a failed or stopped writer slot if it is still the one
// registered, and reports whether it was.
func (s *Service) drop(key slotKey, sl *slot) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writers[key] != sl {
		return false
	}
	delete(s.writers, key)
	return true
}

// forgetStoppedLocked forgets the slots whose writer stopped and returns
// those writers, for retire.
func (s *Service) forgetStoppedLocked() []*partition.Writer {
	var stopped []*partition.Writer
	for k, sl := range s.writers {
		select {
		case <-sl.ready:
		default:
			continue // being opened
		}
		if sl.err == nil && sl.w.Err() != nil {
			delete(s.writers, k)
			stopped = append(stopped, sl.w)
		}
	}
	return stopped
}

// liveOwner returns an owner's record if its heartbeat is live (cached for
// a heartbeat interval).
func (s *Service) liveOwner(ctx context.Context, id string) (catalog.Owner, bool) {
	s.mu.Lock()
	co, ok := s.owners[id]
	s.mu.Unlock()
	if !ok || time.Since(co.fetched) > s.cfg.HeartbeatInterval {
		o, err := s.d.Catalog.GetOwner(ctx, id)
		if err != nil {
			return catalog.Owner{}, false
		}
		co = cachedOwner{o, time.Now()}
		s.mu.Lock()
		if len(s.owners) > 10_000 {
			clear(s.owners)
		}
		s.owners[id] = co
		s.mu.Unlock()
	}
	return co.o, co.o.LiveAt(s.cfg.Now())
}

// EndOffset reports the end offset of a partition this copy writes: its
// high watermark, the offset after the last acknowledged record
// (Writer.AckedEnd). Not the offset the next batch gets, which counts
// batches not acknowledged yet and moves back when a failed ledger's
// recovery drops them. The topic is named by its id: a copy takes
// partitions over (balancing) before it ever looked the topic up by name
// for a produce.
func (s *Service) EndOffset(topic catalog.TopicID, p int) (int64, bool) {
	w := s.liveWriter(topic, p)
	if w == nil {
		return 0, false
	}
	return w.AckedEnd(), true
}

// StableOffset reports the last stable offset of a partition this copy
// writes (Writer.StableEnd): the first offset of the oldest transaction
// open there, else EndOffset.
func (s *Service) StableOffset(topic catalog.TopicID, p int) (int64, bool) {
	w := s.liveWriter(topic, p)
	if w == nil {
		return 0, false
	}
	return w.StableEnd(), true
}

// liveWriter is this copy's running writer of the partition, or nil.
func (s *Service) liveWriter(topic catalog.TopicID, p int) *partition.Writer {
	s.mu.Lock()
	sl := s.writers[slotKey{topic, p}]
	s.mu.Unlock()
	if sl == nil {
		return nil
	}
	select {
	case <-sl.ready:
	default:
		return nil
	}
	if sl.w == nil || sl.w.Err() != nil {
		return nil
	}
	return sl.w
}

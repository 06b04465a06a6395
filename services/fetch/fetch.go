// Package fetch is the read path: ConsumerService (Fetch, Subscribe,
// GrantCredits, Commit) and the consumer-group half of AdminService
// (ListGroups, DescribeGroup, ResetGroupOffsets). See README.md.
//
// Reads go through services/fetch/partlog (offset → ledger → entry, the
// shared entry cache, one tail watcher per followed partition; offloaded
// ledgers from their segment objects in Deps.Objects). Groups are
// leases in pkg/bookkeeping balanced by services/fetch/assign; what a
// member does when is services/fetch/membership's machine, which
// member.go drives.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"gocloud.dev/blob"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/internal/auth"
	"github.com/sluicemq/sluice/internal/quota"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/fetch/partlog"
	"github.com/sluicemq/sluice/services/fetch/trigger"
)

// Deps are the fetch service's collaborators.
type Deps struct {
	Catalog     Catalog
	Ledgers     *client.Client
	Bookkeeping Bookkeeping
	// Forward reaches another fetch copy (session routing, route.go); nil
	// serves only this copy's sessions. Forwarder builds one.
	Forward func(address string) sluicev1connect.ConsumerServiceClient
	// Objects is the object store the compactor offloads ledgers to
	// (pkg/objstore); nil when none is configured.
	Objects *blob.Bucket
	// Lambda invokes the functions of triggers. With it and Triggers, this
	// copy runs the catalog's enabled triggers (triggers.go); without, it
	// runs none.
	Lambda   *trigger.Invoker
	Triggers catalog.Triggers
	// Producer sends failed records to triggers' on_failure_topic (an
	// ingest copy's ProducerService); nil: a trigger with a DLQ stops on
	// the failure instead, and says why.
	Producer ProducerClient
	// Meters receives the copy's metrics (metrics.go, trigger_metrics.go;
	// docs/metrics.md); nil discards them.
	Meters metric.MeterProvider
	// Tracer makes the copy's spans (deliveries: tracing.go; trigger
	// invocations: trigger_tracing.go); nil makes none.
	Tracer trace.TracerProvider
	// AuthorizeTrigger, if set, says whether a trigger may run now: its
	// RunAs principal may still consume its topic and produce to its
	// on-failure topic (internal/authz). A refused trigger invokes
	// nothing and backs off, looking again every TriggerAuthzRecheck.
	AuthorizeTrigger func(spec catalog.TriggerSpec) error
}

// TriggerAuthzRecheck is how often a trigger refused by AuthorizeTrigger
// looks again (a grant given back resumes it within this).
const TriggerAuthzRecheck = 5 * time.Second

// Service is one fetch copy. Create it with New, serve Handler (and
// GroupAdmin through the admin service), and call Run; Run's end closes
// every session (members leave, leases free at once) and the tail
// watchers.
type Service struct {
	cfg    Config
	d      Deps
	log    *slog.Logger
	logs   *partlog.Logs
	reads  chan struct{} // the read budget
	groupQ *quota.Limiter
	fetchQ *quota.Limiter
	// deliveries makes the delivery spans (tracing.go).
	deliveries deliveryTracer

	// mu guards the fields below; a leaf: nothing else is locked under it.
	mu       sync.Mutex
	topics   map[string]cachedTopic
	sessions map[string]*session
	closing  bool
	// topicRefresh: the topics whose cached metadata is being read again
	// in the background (topic); refreshes is what Run waits for.
	topicRefresh map[string]bool
	refreshes    sync.WaitGroup
	triggers     *triggerHost    // nil: this copy runs no triggers
	m            *meters         // the instruments (metrics.go)
	ctx          context.Context // ends when Run returns; sessions derive from it
	stop         context.CancelFunc
	wg           sync.WaitGroup
}

type cachedTopic struct {
	t       catalog.Topic
	fetched time.Time
}

// New returns a fetch copy.
func New(cfg Config, d Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Catalog == nil || d.Ledgers == nil || d.Bookkeeping == nil {
		return nil, errors.New("fetch: Deps.Catalog, Deps.Ledgers and Deps.Bookkeeping are required")
	}
	cfg = cfg.withDefaults()
	s := &Service{cfg: cfg, d: d, log: cfg.Logger,
		reads:  make(chan struct{}, cfg.MaxReadsInFlight),
		topics: make(map[string]cachedTopic), topicRefresh: make(map[string]bool), sessions: make(map[string]*session)}
	lcfg := cfg.Log
	lcfg.ReadGate = s.acquireRead
	lcfg.Objects = d.Objects
	logs, err := partlog.New(lcfg, d.Catalog, d.Ledgers)
	if err != nil {
		return nil, err
	}
	if s.groupQ, err = quota.New(cfg.GroupQuota); err != nil {
		return nil, err
	}
	if s.fetchQ, err = quota.New(cfg.ClientQuota); err != nil {
		return nil, err
	}
	s.logs = logs
	if s.m, err = newMeters(d.Meters, s); err != nil {
		return nil, fmt.Errorf("fetch: metrics: %w", err)
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.deliveries = newDeliveryTracer(d.Tracer)
	if d.Lambda != nil && d.Triggers != nil {
		meters, err := newTriggerMeters(d.Meters)
		if err != nil {
			return nil, err
		}
		s.triggers = &triggerHost{invoker: d.Lambda, dlq: d.Producer, meters: meters, tracer: newTriggerTracer(d.Tracer), cat: d.Triggers, runners: map[string]*triggerRunner{}}
	}
	return s, nil
}

// now reads the service's clock (Config.Now).
func (s *Service) now() time.Time { return s.cfg.Now() }

// Handler returns ConsumerService's path and handler.
func (s *Service) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	return sluicev1connect.NewConsumerServiceHandler(s, opts...)
}

// Logs exposes the partition logs (end offsets for the admin API).
func (s *Service) Logs() *partlog.Logs { return s.logs }

// Run serves until ctx ends, then ends every session (their members leave
// the group, so their leases are free at once) and stops the tail
// watchers.
func (s *Service) Run(ctx context.Context) error {
	trigDone := make(chan struct{})
	go func() {
		defer close(trigDone)
		if s.triggers != nil {
			s.runTriggers(ctx) // stops every runner when ctx ends
		}
	}()
	lagDone := make(chan struct{})
	go func() {
		defer close(lagDone)
		s.runLag(ctx)
	}()
	<-ctx.Done()
	<-trigDone
	<-lagDone
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	s.refreshes.Wait()
	s.logs.Close()
	return s.m.registration.Unregister()
}

var _ sluicev1connect.ConsumerServiceHandler = (*Service)(nil)

// topic returns a live topic's metadata, cached for TopicCacheTTL.
//
// An entry in the second half of its TTL still answers, and is read again
// in the background, once at a time per topic: a busy topic's requests
// never wait on the catalog for metadata the copy has (every TTL, each
// request of a topic that found its entry expired read the catalog
// itself — the stall issue 24 found in ingest's copy of this cache). An
// entry past its TTL is never answered, so a copy still notices a topic
// deleted (or deleted and created again) elsewhere within the TTL
// (docs/DESIGN.md, "Topic identity").
func (s *Service) topic(ctx context.Context, name string) (catalog.Topic, error) {
	s.mu.Lock()
	ct, ok := s.topics[name]
	s.mu.Unlock()
	if ok {
		switch age := time.Since(ct.fetched); {
		case age < s.cfg.TopicCacheTTL/2:
			return ct.t, nil
		case age < s.cfg.TopicCacheTTL:
			s.refreshTopic(name)
			return ct.t, nil
		}
	}
	return s.loadTopic(ctx, name)
}

// refreshTopic reads name's metadata again in the background, unless a
// refresh of it is running or the copy is closing. Its errors only leave
// the entry to expire (a deleted topic is forgotten by loadTopic).
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
		s.mu.Unlock()
		if err != nil && !errors.Is(err, catalog.ErrNotFound) {
			s.log.Debug("topic metadata refresh failed; the cached one answers until its TTL", slog.String("topic", name), slog.Any("err", err))
		}
	}()
}

// loadTopic reads name's metadata from the catalog and caches it; a topic
// the catalog no longer has, or has as another incarnation, is forgotten
// with its cached chains.
func (s *Service) loadTopic(ctx context.Context, name string) (catalog.Topic, error) {
	s.mu.Lock()
	ct, ok := s.topics[name]
	s.mu.Unlock()
	t, err := s.d.Catalog.GetTopic(ctx, name)
	if err != nil {
		if ok && errors.Is(err, catalog.ErrNotFound) {
			s.TopicDeleted(ct.t)
		}
		return catalog.Topic{}, err
	}
	if ok && ct.t.ID != t.ID {
		s.logs.TopicChanged(name, t.ID) // deleted and created again
	}
	s.mu.Lock()
	if len(s.topics) > 10_000 {
		clear(s.topics)
	}
	s.topics[name] = cachedTopic{t, time.Now()}
	s.mu.Unlock()
	return t, nil
}

// TopicDeleted forgets a deleted topic incarnation: its cached metadata
// and its partitions' cached chains, so no read of this copy serves its
// records any more. The admin service of the same process calls it when it
// deletes a topic; a copy that did not learns it from its topic cache
// (TopicCacheTTL) — see docs/DESIGN.md, "Topic identity".
func (s *Service) TopicDeleted(t catalog.Topic) {
	s.mu.Lock()
	if ct, ok := s.topics[t.Name]; ok && ct.t.ID == t.ID {
		delete(s.topics, t.Name)
	}
	s.mu.Unlock()
	s.logs.TopicDeleted(t.Name, t.ID)
}

// forgetTopic drops a topic from the cache, so the next lookup reads the
// catalog.
func (s *Service) forgetTopic(name string) {
	s.mu.Lock()
	delete(s.topics, name)
	s.mu.Unlock()
}

// partitionOf checks a topic and partition named by a request.
func (s *Service) partitionOf(ctx context.Context, field, topic string, partition int32) (catalog.Topic, error) {
	if err := catalog.ValidateTopicName(topic); err != nil {
		return catalog.Topic{}, apierr.Invalid(field+"topic", "%v", err)
	}
	t, err := s.topic(ctx, topic)
	if err != nil {
		return catalog.Topic{}, apierr.FromCatalog(err)
	}
	if partition < 0 || int(partition) >= t.Partitions {
		return catalog.Topic{}, apierr.Invalid(field+"partition", "%d is outside the topic's partitions 0..%d", partition, t.Partitions-1)
	}
	return t, nil
}

// acquireRead takes a slot of the read budget (bookie reads of catch-up
// readers), waiting up to ReadWait.
func (s *Service) acquireRead(ctx context.Context) (func(), error) {
	select {
	case s.reads <- struct{}{}:
		return func() { <-s.reads }, nil
	default:
	}
	t := time.NewTimer(s.cfg.ReadWait)
	defer t.Stop()
	select {
	case s.reads <- struct{}{}:
		return func() { <-s.reads }, nil
	case <-t.C:
		return nil, apierr.Exhausted(s.cfg.RetryAfter, fmt.Errorf("the fetch copy's read budget (%d reads in flight) is in use; retry later", s.cfg.MaxReadsInFlight))
	case <-ctx.Done():
		return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
	}
}

// read reads a partition; its reads that miss the cache (catch-up reads)
// take the read budget (acquireRead, through partlog's ReadGate).
func (s *Service) read(ctx context.Context, topic string, partition int, offset int64, lim partlog.Limits) (partlog.Result, error) {
	res, err := s.logs.Read(ctx, topic, partition, offset, lim)
	if err != nil {
		return res, readErr(err)
	}
	return res, nil
}

// readErr maps read errors to codes.
func readErr(err error) error {
	var oor *partlog.OutOfRangeError
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.As(err, &oor):
		return outOfRange("", oor)
	case errors.Is(err, partlog.ErrCorrupt):
		return connect.NewError(connect.CodeDataLoss, err)
	case errors.Is(err, partlog.ErrObjectMissing), errors.Is(err, partlog.ErrNoObjectStore):
		// Before NotFound: the topic exists, a ledger's data cannot be
		// reached from this copy.
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.Is(err, catalog.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	default:
		return apierr.Otherwise(err)
	}
}

// ReasonOutOfRange is the google.rpc.ErrorInfo reason of OUT_OF_RANGE
// answers; its metadata holds "log_start_offset" and "high_watermark".
const ReasonOutOfRange = "OFFSET_OUT_OF_RANGE"

// ErrorDomain is the ErrorInfo domain of Sluice's errors.
const ErrorDomain = "sluice.dev"

// outOfRange is the OUT_OF_RANGE answer to e, its message prefixed.
func outOfRange(prefix string, e *partlog.OutOfRangeError) *connect.Error {
	var err error = e
	if prefix != "" {
		err = fmt.Errorf("%s%w", prefix, e)
	}
	ce := connect.NewError(connect.CodeOutOfRange, err)
	if d, err := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: ReasonOutOfRange, Domain: ErrorDomain, Metadata: map[string]string{
		"log_start_offset": strconv.FormatInt(e.Start, 10),
		"high_watermark":   strconv.FormatInt(e.End, 10),
	}}); err == nil {
		ce.AddDetail(d)
	}
	return ce
}

// startOffset resolves a symbolic start position.
func (s *Service) startOffset(ctx context.Context, topic string, partition int, pos sluicev1.StartPosition, offset, ts int64) (int64, error) {
	switch pos {
	case sluicev1.StartPosition_START_POSITION_UNSPECIFIED:
		return offset, nil
	case sluicev1.StartPosition_START_POSITION_EARLIEST, sluicev1.StartPosition_START_POSITION_LATEST:
		start, end, err := s.logs.Bounds(ctx, topic, partition)
		if err != nil {
			return 0, readErr(err)
		}
		if pos == sluicev1.StartPosition_START_POSITION_EARLIEST {
			return start, nil
		}
		return end, nil
	case sluicev1.StartPosition_START_POSITION_TIMESTAMP:
		o, err := s.logs.OffsetForTime(ctx, topic, partition, ts)
		if err != nil {
			return 0, readErr(err)
		}
		return o, nil
	default:
		return 0, apierr.Invalid("start", "unknown start position %d", pos)
	}
}

// startOffsetWithin is the offset a group member starts a partition it never
// committed at (earliest or latest), from a partition record up to maxAge
// old (primed for the balancing round): earliest asks no bookie at all.
func (s *Service) startOffsetWithin(ctx context.Context, topic string, partition int, pos sluicev1.StartPosition, maxAge time.Duration) (int64, error) {
	switch pos {
	case sluicev1.StartPosition_START_POSITION_EARLIEST:
		start, err := s.logs.Start(ctx, topic, partition, maxAge)
		if err != nil {
			return 0, readErr(err)
		}
		return start, nil
	case sluicev1.StartPosition_START_POSITION_LATEST:
		_, end, err := s.logs.BoundsWithin(ctx, topic, partition, maxAge)
		if err != nil {
			return 0, readErr(err)
		}
		return end, nil
	default:
		return s.startOffset(ctx, topic, partition, pos, 0, 0)
	}
}

// Fetch reads a partition, long-polling up to max_wait_ms at its end.
func (s *Service) Fetch(ctx context.Context, req *connect.Request[sluicev1.FetchRequest]) (*connect.Response[sluicev1.FetchResponse], error) {
	m := req.Msg
	if err := validateFetch(m); err != nil {
		return nil, err
	}
	if h := req.Header().Get(clientIDHeader); len(h) > MaxClientIDLength {
		return nil, apierr.TooLarge(clientIDHeader, apierr.ClientIDBytes, int64(len(h)), MaxClientIDLength)
	}
	if _, err := s.partitionOf(ctx, "", m.Topic, m.Partition); err != nil {
		return nil, err
	}
	p := int(m.Partition)
	offset, err := s.startOffset(ctx, m.Topic, p, m.Start, m.Offset, m.StartTimestampMs)
	if err != nil {
		return nil, err
	}
	lim := partlog.Limits{MaxRecords: int(m.MaxRecords), MaxBytes: int(m.MaxBytes), Batches: m.RecordBatches, ReadCommitted: m.ReadCommitted}
	if lim.MaxRecords == 0 {
		lim.MaxRecords = DefaultMaxRecords
	}
	if lim.MaxBytes == 0 {
		lim.MaxBytes = DefaultMaxBytes
	}
	wait := time.Duration(m.MaxWaitMs) * time.Millisecond
	deadline := time.Now().Add(wait)
	for {
		res, err := s.read(ctx, m.Topic, p, offset, lim)
		if err != nil {
			return nil, err
		}
		if res.Count > 0 || res.Next > offset || wait == 0 || !time.Now().Before(deadline) {
			span := s.deliveries.start(ctx, m.Topic, int32(p), "", res) // tracing.go
			defer s.deliveries.end(span, nil)
			resp := connect.NewResponse(fetchResponse(res))
			resp.Msg.Offset = offset
			s.m.delivered(ctx, m.Topic, res, false, time.Now())
			if d := throttle(s.fetchQ, quotaKey(ctx, req.Header().Get(clientIDHeader)), res.Bytes); d > 0 {
				s.m.throttledFor(ctx, d)
				resp.Msg.ThrottleTimeMs = int32(min(d, time.Minute).Milliseconds())
				if err := sleepCtx(ctx, d); err != nil {
					return nil, connect.NewError(connect.CodeCanceled, err)
				}
			}
			return resp, nil
		}
		// At the end; or, reading committed records, held at the last
		// stable offset: that moves only with a new entry, beyond the
		// high watermark.
		waitAt := offset
		if m.ReadCommitted {
			waitAt = max(offset, res.HighWatermark)
		}
		wctx, cancel := context.WithDeadline(ctx, deadline)
		werr := s.logs.Wait(wctx, m.Topic, p, waitAt)
		cancel()
		if werr != nil && ctx.Err() != nil {
			return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
		}
		if werr != nil && !errors.Is(werr, context.DeadlineExceeded) {
			return nil, connect.NewError(connect.CodeUnavailable, werr)
		}
	}
}

// throttle charges n bytes to a key's quota; the delay to apply.
// clientIDHeader names the client for quotas (Kafka's client.id), as on
// produce; MaxClientIDLength bounds it.
const (
	clientIDHeader    = "Sluice-Client-Id"
	MaxClientIDLength = 255
)

// quotaKey is who a Fetch counts against: its authenticated principal when
// it has one (the client id header is anyone's to set), else the header.
func quotaKey(ctx context.Context, header string) string {
	if p, ok := auth.FromContext(ctx); ok {
		return p.String()
	}
	return header
}

func throttle(q *quota.Limiter, key string, n int) time.Duration {
	if key == "" || n == 0 {
		return 0
	}
	return q.Record(key, n, time.Now())
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func fetchResponse(res partlog.Result) *sluicev1.FetchResponse {
	return &sluicev1.FetchResponse{Records: consumed(res.Records), RecordBatches: res.Batches, HighWatermark: res.HighWatermark, LogStartOffset: res.LogStart, NextOffset: res.Next, LastStableOffset: res.StableEnd}
}

func consumed(recs []record.Record) []*sluicev1.ConsumedRecord {
	out := make([]*sluicev1.ConsumedRecord, len(recs))
	for i := range recs {
		r := &recs[i]
		c := &sluicev1.ConsumedRecord{Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
		if len(r.Headers) > 0 {
			c.Headers = make([]*sluicev1.Header, len(r.Headers))
			for j, h := range r.Headers {
				c.Headers[j] = &sluicev1.Header{Key: h.Key, Value: h.Value}
			}
		}
		out[i] = c
	}
	return out
}

func validateFetch(m *sluicev1.FetchRequest) error {
	switch {
	case m.Partition < 0:
		return apierr.Invalid("partition", "%d is negative", m.Partition)
	case m.Start == sluicev1.StartPosition_START_POSITION_UNSPECIFIED && m.Offset < 0:
		return apierr.Invalid("offset", "%d is negative", m.Offset)
	case m.MaxRecords < 0 || m.MaxRecords > MaxMaxRecords:
		return apierr.Invalid("max_records", "%d is outside 0..%d", m.MaxRecords, MaxMaxRecords)
	case m.MaxWaitMs < 0 || time.Duration(m.MaxWaitMs)*time.Millisecond > MaxWait:
		return apierr.Invalid("max_wait_ms", "%d is outside 0..%d", m.MaxWaitMs, MaxWait.Milliseconds())
	case m.MaxBytes < 0 || m.MaxBytes > MaxMaxBytes:
		return apierr.Invalid("max_bytes", "%d is outside 0..%d", m.MaxBytes, MaxMaxBytes)
	case m.Start < 0 || m.Start > sluicev1.StartPosition_START_POSITION_TIMESTAMP:
		return apierr.Invalid("start", "unknown start position %d", m.Start)
	case m.Start == sluicev1.StartPosition_START_POSITION_TIMESTAMP && m.StartTimestampMs < 0:
		return apierr.Invalid("start_timestamp_ms", "%d is negative", m.StartTimestampMs)
	}
	return nil
}

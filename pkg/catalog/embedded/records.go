package embedded

import (
	"fmt"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// The stored records. They are separate from the catalog's API types so the
// on-disk format changes only on purpose (with valueVersion). Times are Unix
// milliseconds, 0 for "unset".

type formatRec struct {
	Format int `json:"format"`
}

type counterRec struct {
	Last int64 `json:"last"`
}

type topicRec struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"`
	Partitions int               `json:"partitions"`
	Config     map[string]string `json:"config"`
	CreatedMs  int64             `json:"createdMs"`
	DeletedMs  int64             `json:"deletedMs,omitempty"`
	Version    int64             `json:"version"`
}

// triggerRec is a trigger (key tr/<name>). Added to value version 1 without
// a new version: it is a new key space, which older binaries never read.
type triggerRec struct {
	Name                  string `json:"name"`
	Topic                 string `json:"topic"`
	TopicID               string `json:"topicId"`
	Function              string `json:"function"`
	Enabled               bool   `json:"enabled"`
	StartingPosition      string `json:"startingPosition"`
	StartingTimestampMs   int64  `json:"startingTimestampMs,omitempty"`
	BatchSize             int    `json:"batchSize"`
	MaxBatchBytes         int    `json:"maxBatchBytes"`
	BatchWindowMs         int64  `json:"batchWindowMs"`
	Parallelization       int    `json:"parallelization"`
	MaxRetries            int    `json:"maxRetries"`
	RetryBackoffInitialMs int64  `json:"retryBackoffInitialMs"`
	RetryBackoffMaxMs     int64  `json:"retryBackoffMaxMs"`
	MaxRecordAgeMs        int64  `json:"maxRecordAgeMs"`
	BisectOnError         bool   `json:"bisectOnError"`
	OnFailureTopic        string `json:"onFailureTopic,omitempty"`
	ReadUncommitted       bool   `json:"readUncommitted,omitempty"`
	RunAs                 string `json:"runAs,omitempty"`
	CreatedMs             int64  `json:"createdMs"`
	UpdatedMs             int64  `json:"updatedMs"`
	Version               int64  `json:"version"`
}

type refRec struct {
	ID          int64 `json:"id"`
	FirstOffset int64 `json:"firstOffset"`
}

type partitionRec struct {
	Topic          string   `json:"topic"`
	TopicID        string   `json:"topicId"`
	Index          int      `json:"index"`
	Owner          string   `json:"owner,omitempty"`
	Epoch          int64    `json:"epoch"`
	Ledgers        []refRec `json:"ledgers"`
	LogStartOffset int64    `json:"logStartOffset"`
	Version        int64    `json:"version"`
}

type ownerRec struct {
	ID        string `json:"id"`
	Address   string `json:"address"`
	ExpiresMs int64  `json:"expiresMs"`
}

type bookieRec struct {
	ID         string `json:"id"`
	Address    string `json:"address"`
	FreeBytes  int64  `json:"freeBytes"`
	TotalBytes int64  `json:"totalBytes"`
	ReadOnly   bool   `json:"readOnly"`
	Draining   bool   `json:"draining,omitempty"`
	ExpiresMs  int64  `json:"expiresMs"`
}

type segmentRec struct {
	FirstEntry int64    `json:"firstEntry"`
	Bookies    []string `json:"bookies"`
}

type ledgerRec struct {
	ID          int64        `json:"id"`
	Topic       string       `json:"topic"`
	TopicID     string       `json:"topicId"`
	Partition   int          `json:"partition"`
	Ensemble    int          `json:"ensemble"`
	WriteQuorum int          `json:"writeQuorum"`
	AckQuorum   int          `json:"ackQuorum"`
	Ensembles   []segmentRec `json:"ensembles"`
	State       string       `json:"state"`
	LastEntry   int64        `json:"lastEntry"`
	FirstOffset int64        `json:"firstOffset"`
	LastOffset  int64        `json:"lastOffset"`
	Location    string       `json:"location,omitempty"`
	WriterOwner string       `json:"writerOwner"`
	WriterEpoch int64        `json:"writerEpoch"`
	CreatedMs   int64        `json:"createdMs"`
	ClosedMs    int64        `json:"closedMs,omitempty"`
	Damaged     []damageRec  `json:"damaged,omitempty"`
	Version     int64        `json:"version"`
}

type damageRec struct {
	Bookie string `json:"bookie"`
	Entry  int64  `json:"entry"`
	Reason string `json:"reason"`
	AtMs   int64  `json:"atMs"`
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

func toTopicRec(t catalog.Topic) topicRec {
	return topicRec{Name: t.Name, ID: string(t.ID), Partitions: t.Partitions, Config: t.Config.Map(),
		CreatedMs: ms(t.CreatedAt), DeletedMs: ms(t.DeletedAt), Version: t.Version}
}

// topic converts back, re-validating what the catalog would have refused to
// store: a record that does not validate is corrupt.
func (r topicRec) topic() (catalog.Topic, error) {
	cfg, err := catalog.ParseTopicConfig(r.Config)
	if err != nil {
		return catalog.Topic{}, err
	}
	if err := catalog.ValidateNewTopic(r.Name, r.Partitions, cfg); err != nil {
		return catalog.Topic{}, err
	}
	if r.ID == "" || r.Version < 1 {
		return catalog.Topic{}, fmt.Errorf("topic %q has id %q, version %d", r.Name, r.ID, r.Version)
	}
	return catalog.Topic{Name: r.Name, ID: catalog.TopicID(r.ID), Partitions: r.Partitions, Config: cfg,
		CreatedAt: fromMs(r.CreatedMs), DeletedAt: fromMs(r.DeletedMs), Version: r.Version}, nil
}

func toPartitionRec(p catalog.Partition) partitionRec {
	r := partitionRec{Topic: p.Topic, TopicID: string(p.TopicID), Index: p.Index, Owner: p.Owner, Epoch: p.Epoch,
		Ledgers: make([]refRec, len(p.Ledgers)), LogStartOffset: p.LogStartOffset, Version: p.Version}
	for i, l := range p.Ledgers {
		r.Ledgers[i] = refRec{ID: int64(l.ID), FirstOffset: l.FirstOffset}
	}
	return r
}

func (r partitionRec) partition() (catalog.Partition, error) {
	if len(r.Ledgers) > catalog.MaxLedgersPerPartition || r.Epoch < 0 || r.Version < 1 {
		return catalog.Partition{}, fmt.Errorf("partition %s/%d: %d ledgers, epoch %d, version %d", r.Topic, r.Index, len(r.Ledgers), r.Epoch, r.Version)
	}
	p := catalog.Partition{Topic: r.Topic, TopicID: catalog.TopicID(r.TopicID), Index: r.Index, Owner: r.Owner, Epoch: r.Epoch,
		LogStartOffset: r.LogStartOffset, Version: r.Version}
	for _, l := range r.Ledgers {
		p.Ledgers = append(p.Ledgers, catalog.LedgerRef{ID: catalog.LedgerID(l.ID), FirstOffset: l.FirstOffset})
	}
	return p, nil
}

func (r ownerRec) owner() catalog.Owner {
	return catalog.Owner{ID: r.ID, Address: r.Address, ExpiresAt: fromMs(r.ExpiresMs)}
}

func (r bookieRec) bookie() catalog.Bookie {
	return catalog.Bookie{ID: r.ID, Address: r.Address, FreeBytes: r.FreeBytes, TotalBytes: r.TotalBytes,
		ReadOnly: r.ReadOnly, Draining: r.Draining, ExpiresAt: fromMs(r.ExpiresMs)}
}

func toLedgerRec(m catalog.LedgerMetadata) ledgerRec {
	r := ledgerRec{ID: int64(m.ID), Topic: m.Topic, TopicID: string(m.TopicID), Partition: m.Partition,
		Ensemble: m.Replication.Ensemble, WriteQuorum: m.Replication.WriteQuorum, AckQuorum: m.Replication.AckQuorum,
		State: m.State.String(), LastEntry: m.LastEntry, FirstOffset: m.FirstOffset, LastOffset: m.LastOffset,
		Location: m.Location, WriterOwner: m.WriterOwner, WriterEpoch: m.WriterEpoch,
		CreatedMs: ms(m.CreatedAt), ClosedMs: ms(m.ClosedAt), Version: m.Version}
	for _, s := range m.Ensembles {
		r.Ensembles = append(r.Ensembles, segmentRec{FirstEntry: s.FirstEntry, Bookies: s.Bookies})
	}
	for _, d := range m.Damaged {
		r.Damaged = append(r.Damaged, damageRec{Bookie: d.Bookie, Entry: d.Entry, Reason: string(d.Reason), AtMs: ms(d.At)})
	}
	return r
}

func (r ledgerRec) ledger() (catalog.LedgerMetadata, error) {
	state, err := catalog.ParseLedgerState(r.State)
	if err != nil {
		return catalog.LedgerMetadata{}, err
	}
	if r.ID < 1 || r.Version < 1 || len(r.Ensembles) == 0 || len(r.Ensembles) > catalog.MaxEnsembleSegments {
		return catalog.LedgerMetadata{}, fmt.Errorf("ledger %d: version %d, %d ensemble segments", r.ID, r.Version, len(r.Ensembles))
	}
	m := catalog.LedgerMetadata{ID: catalog.LedgerID(r.ID), Topic: r.Topic, TopicID: catalog.TopicID(r.TopicID), Partition: r.Partition,
		Replication: catalog.Replication{Ensemble: r.Ensemble, WriteQuorum: r.WriteQuorum, AckQuorum: r.AckQuorum},
		State:       state, LastEntry: r.LastEntry, FirstOffset: r.FirstOffset, LastOffset: r.LastOffset,
		Location: r.Location, WriterOwner: r.WriterOwner, WriterEpoch: r.WriterEpoch,
		CreatedAt: fromMs(r.CreatedMs), ClosedAt: fromMs(r.ClosedMs), Version: r.Version}
	for _, s := range r.Ensembles {
		m.Ensembles = append(m.Ensembles, catalog.EnsembleSegment{FirstEntry: s.FirstEntry, Bookies: s.Bookies})
	}
	if len(r.Damaged) > catalog.MaxEnsembleSize*catalog.MaxEnsembleSegments {
		return catalog.LedgerMetadata{}, fmt.Errorf("ledger %d: %d damage marks", r.ID, len(r.Damaged))
	}
	for _, d := range r.Damaged {
		m.Damaged = append(m.Damaged, catalog.DamagedCopy{Bookie: d.Bookie, Entry: d.Entry, Reason: catalog.DamageReason(d.Reason), At: fromMs(d.AtMs)})
	}
	return m, nil
}

func toTriggerRec(t catalog.Trigger) triggerRec {
	return triggerRec{Name: t.Name, Topic: t.Topic, TopicID: string(t.TopicID), Function: t.Function, Enabled: t.Enabled,
		StartingPosition: string(t.StartingPosition), StartingTimestampMs: t.StartingTimestampMs,
		BatchSize: t.BatchSize, MaxBatchBytes: t.MaxBatchBytes, BatchWindowMs: t.BatchWindowMs,
		Parallelization: t.Parallelization, MaxRetries: t.MaxRetries,
		RetryBackoffInitialMs: t.RetryBackoffInitialMs, RetryBackoffMaxMs: t.RetryBackoffMaxMs,
		MaxRecordAgeMs: t.MaxRecordAgeMs, BisectOnError: t.BisectOnError, OnFailureTopic: t.OnFailureTopic, ReadUncommitted: t.ReadUncommitted, RunAs: t.RunAs,
		CreatedMs: ms(t.CreatedAt), UpdatedMs: ms(t.UpdatedAt), Version: t.Version}
}

// trigger converts back, re-validating: a stored trigger is stored with its
// defaults resolved, so a zero field where a default exists is corrupt too.
func (r triggerRec) trigger() (catalog.Trigger, error) {
	t := catalog.Trigger{Name: r.Name, TopicID: catalog.TopicID(r.TopicID), TriggerSpec: catalog.TriggerSpec{
		Topic: r.Topic, Function: r.Function, Enabled: r.Enabled,
		StartingPosition: catalog.StartingPosition(r.StartingPosition), StartingTimestampMs: r.StartingTimestampMs,
		BatchSize: r.BatchSize, MaxBatchBytes: r.MaxBatchBytes, BatchWindowMs: r.BatchWindowMs,
		Parallelization: r.Parallelization, MaxRetries: r.MaxRetries,
		RetryBackoffInitialMs: r.RetryBackoffInitialMs, RetryBackoffMaxMs: r.RetryBackoffMaxMs,
		MaxRecordAgeMs: r.MaxRecordAgeMs, BisectOnError: r.BisectOnError, OnFailureTopic: r.OnFailureTopic, ReadUncommitted: r.ReadUncommitted, RunAs: r.RunAs,
	}, CreatedAt: fromMs(r.CreatedMs), UpdatedAt: fromMs(r.UpdatedMs), Version: r.Version}
	if err := catalog.ValidateTrigger(t.Name, t.TriggerSpec); err != nil {
		return catalog.Trigger{}, err
	}
	if t.TriggerSpec != t.WithDefaults() || t.TopicID == "" || t.Version < 1 {
		return catalog.Trigger{}, fmt.Errorf("trigger %q: unresolved defaults, topic id %q or version %d", t.Name, t.TopicID, t.Version)
	}
	return t, nil
}

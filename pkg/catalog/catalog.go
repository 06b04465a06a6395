package catalog

import (
	"context"
	"time"
)

// Catalog is the catalog callers use: one portable type over any backend's
// Driver. It checks every argument once, with this package's Validate
// functions, and calls the driver only with arguments that passed, so every
// backend answers bad input with the same *ValidationError, returned as the
// check made it (not wrapped), before any I/O. Everything else is the
// driver's: its results and errors are returned unchanged.
//
// Catalog implements every catalog interface (Topics, DeletedTopics,
// Partitions, Writers, LedgerTrimmer, Owners, Ledgers, LedgerLister,
// Bookies, Triggers, Schemas, ACLs). Depend on the small interfaces, not on *Catalog,
// except where the catalog is opened and closed. Safe for concurrent use
// when the driver is (every backend's is).
type Catalog struct {
	d Driver
}

var (
	_ Topics        = (*Catalog)(nil)
	_ DeletedTopics = (*Catalog)(nil)
	_ Partitions    = (*Catalog)(nil)
	_ Writers       = (*Catalog)(nil)
	_ LedgerTrimmer = (*Catalog)(nil)
	_ Owners        = (*Catalog)(nil)
	_ Ledgers       = (*Catalog)(nil)
	_ LedgerLister  = (*Catalog)(nil)
	_ Bookies       = (*Catalog)(nil)
	_ Triggers      = (*Catalog)(nil)
	_ Schemas       = (*Catalog)(nil)
	_ ACLs          = (*Catalog)(nil)
)

// New returns the catalog over d. Backends call it in their constructors;
// callers get a *Catalog from there (embedded.Open, dynamodb.New).
func New(d Driver) *Catalog { return &Catalog{d: d} }

// Close closes the driver (the embedded store's files; nothing for
// DynamoDB).
func (c *Catalog) Close() error { return c.d.Close() }

// CreateTopic implements Topics. Checked: ValidateNewTopic.
func (c *Catalog) CreateTopic(ctx context.Context, name string, partitions int, cfg TopicConfig) (Topic, error) {
	if err := ValidateNewTopic(name, partitions, cfg); err != nil {
		return Topic{}, err
	}
	return c.d.CreateTopic(ctx, name, partitions, cfg)
}

// GetTopic implements Topics. Checked: the name.
func (c *Catalog) GetTopic(ctx context.Context, name string) (Topic, error) {
	if err := ValidateTopicName(name); err != nil {
		return Topic{}, err
	}
	return c.d.GetTopic(ctx, name)
}

// ListTopics implements Topics. Checked: the limit (resolved).
func (c *Catalog) ListTopics(ctx context.Context, pageToken string, limit int) (Page[Topic], error) {
	n, err := PageLimit(limit)
	if err != nil {
		return Page[Topic]{}, err
	}
	return c.d.ListTopics(ctx, pageToken, n)
}

// UpdateTopicConfig implements Topics. Checked: the name, the config.
func (c *Catalog) UpdateTopicConfig(ctx context.Context, name string, cfg TopicConfig, expectVersion int64) (Topic, error) {
	if err := ValidateTopicName(name); err != nil {
		return Topic{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Topic{}, err
	}
	return c.d.UpdateTopicConfig(ctx, name, cfg, expectVersion)
}

// AddPartitions implements Topics. Checked: the name, the count's range
// (whether it raises the stored count is the driver's CheckAddPartitions).
func (c *Catalog) AddPartitions(ctx context.Context, name string, newCount int, expectVersion int64) (Topic, error) {
	if err := ValidateTopicName(name); err != nil {
		return Topic{}, err
	}
	if err := ValidatePartitionCount(newCount); err != nil {
		return Topic{}, err
	}
	return c.d.AddPartitions(ctx, name, newCount, expectVersion)
}

// DeleteTopic implements Topics. Checked: the name.
func (c *Catalog) DeleteTopic(ctx context.Context, name string) (Topic, error) {
	if err := ValidateTopicName(name); err != nil {
		return Topic{}, err
	}
	return c.d.DeleteTopic(ctx, name)
}

// ListDeletedTopics implements DeletedTopics. Checked: the limit (resolved).
func (c *Catalog) ListDeletedTopics(ctx context.Context, pageToken string, limit int) (Page[Topic], error) {
	n, err := PageLimit(limit)
	if err != nil {
		return Page[Topic]{}, err
	}
	return c.d.ListDeletedTopics(ctx, pageToken, n)
}

// PurgeDeletedTopic implements DeletedTopics. Checked: the topic id.
func (c *Catalog) PurgeDeletedTopic(ctx context.Context, id TopicID) error {
	if err := ValidateID("topicID", string(id)); err != nil {
		return err
	}
	return c.d.PurgeDeletedTopic(ctx, id)
}

// GetPartition implements Partitions. Checked: the topic name, the index.
func (c *Catalog) GetPartition(ctx context.Context, topic string, partition int) (Partition, error) {
	if err := validateTopicPartition(topic, partition); err != nil {
		return Partition{}, err
	}
	return c.d.GetPartition(ctx, topic, partition)
}

// ListPartitions implements Partitions. Checked: the topic name, the limit
// (resolved), the page token (an IndexToken, turned into the start index).
func (c *Catalog) ListPartitions(ctx context.Context, topic string, pageToken string, limit int) (Page[Partition], error) {
	if err := ValidateTopicName(topic); err != nil {
		return Page[Partition]{}, err
	}
	n, err := PageLimit(limit)
	if err != nil {
		return Page[Partition]{}, err
	}
	start, err := ParseIndexToken(pageToken)
	if err != nil {
		return Page[Partition]{}, err
	}
	ps, more, err := c.d.ListPartitionRange(ctx, topic, start, n)
	if err != nil {
		return Page[Partition]{}, err
	}
	page := Page[Partition]{Items: ps}
	if more {
		page.NextPageToken = IndexToken(start + len(ps))
	}
	return page, nil
}

// AcquireWriter implements Writers. Checked: the topic name, the index, the
// owner id.
func (c *Catalog) AcquireWriter(ctx context.Context, topic string, partition int, owner string) (Partition, error) {
	if err := validateTopicPartition(topic, partition); err != nil {
		return Partition{}, err
	}
	if err := ValidateID("owner", owner); err != nil {
		return Partition{}, err
	}
	return c.d.AcquireWriter(ctx, topic, partition, owner)
}

// ReleaseWriter implements Writers. Checked: ValidateLease.
func (c *Catalog) ReleaseWriter(ctx context.Context, lease WriterLease) error {
	if err := ValidateLease(lease); err != nil {
		return err
	}
	return c.d.ReleaseWriter(ctx, lease)
}

// AppendLedger implements Writers. Checked: ValidateLease (the ref is
// checked against the chain and the ledger by the driver's AppendedLedger
// and CheckLedgerForLease).
func (c *Catalog) AppendLedger(ctx context.Context, lease WriterLease, ref LedgerRef) (Partition, error) {
	if err := ValidateLease(lease); err != nil {
		return Partition{}, err
	}
	return c.d.AppendLedger(ctx, lease, ref)
}

// TrimLedgers implements LedgerTrimmer. Checked: the topic id, the index.
func (c *Catalog) TrimLedgers(ctx context.Context, topicID TopicID, partition int, through LedgerID, expectVersion int64) (Partition, error) {
	if err := validateTopicIDPartition(topicID, partition); err != nil {
		return Partition{}, err
	}
	return c.d.TrimLedgers(ctx, topicID, partition, through, expectVersion)
}

// HeartbeatOwner implements Owners. Checked: ValidateHeartbeat.
func (c *Catalog) HeartbeatOwner(ctx context.Context, id, address string, ttl time.Duration) (Owner, error) {
	if err := ValidateHeartbeat(id, address, ttl); err != nil {
		return Owner{}, err
	}
	return c.d.HeartbeatOwner(ctx, id, address, ttl)
}

// GetOwner implements Owners. Checked: the id.
func (c *Catalog) GetOwner(ctx context.Context, id string) (Owner, error) {
	if err := ValidateID("id", id); err != nil {
		return Owner{}, err
	}
	return c.d.GetOwner(ctx, id)
}

// ListLiveOwners implements Owners. It takes no arguments to check.
func (c *Catalog) ListLiveOwners(ctx context.Context) ([]Owner, error) {
	return c.d.ListLiveOwners(ctx)
}

// RemoveOwner implements Owners. Checked: the id.
func (c *Catalog) RemoveOwner(ctx context.Context, id string) error {
	if err := ValidateID("id", id); err != nil {
		return err
	}
	return c.d.RemoveOwner(ctx, id)
}

// CreateLedger implements Ledgers. Checked: ValidateLedgerSpec.
func (c *Catalog) CreateLedger(ctx context.Context, spec LedgerSpec) (LedgerMetadata, error) {
	if err := ValidateLedgerSpec(spec); err != nil {
		return LedgerMetadata{}, err
	}
	return c.d.CreateLedger(ctx, spec)
}

// GetLedger implements Ledgers. Any id may be asked for (one that was never
// allocated is ErrNotFound).
func (c *Catalog) GetLedger(ctx context.Context, id LedgerID) (LedgerMetadata, error) {
	return c.d.GetLedger(ctx, id)
}

// GetLedgers implements Ledgers. Checked: LedgerIDs (the driver gets the
// ids sorted and distinct).
func (c *Catalog) GetLedgers(ctx context.Context, ids []LedgerID) ([]LedgerMetadata, error) {
	ids, err := LedgerIDs(ids)
	if err != nil {
		return nil, err
	}
	return c.d.GetLedgers(ctx, ids)
}

// UpdateLedger implements Ledgers. The proposal is checked against the
// stored record by the driver's NextLedger: every rule of an update depends
// on what is stored.
func (c *Catalog) UpdateLedger(ctx context.Context, m LedgerMetadata) (LedgerMetadata, error) {
	return c.d.UpdateLedger(ctx, m)
}

// DeleteLedgerMetadata implements Ledgers. The driver's CheckDeletable
// decides against the stored record.
func (c *Catalog) DeleteLedgerMetadata(ctx context.Context, id LedgerID, expectVersion int64) error {
	return c.d.DeleteLedgerMetadata(ctx, id, expectVersion)
}

// ListLedgersByPartition implements LedgerLister. Checked: the topic id, the
// index, the limit (resolved).
func (c *Catalog) ListLedgersByPartition(ctx context.Context, topicID TopicID, partition int, pageToken string, limit int) (Page[LedgerMetadata], error) {
	if err := validateTopicIDPartition(topicID, partition); err != nil {
		return Page[LedgerMetadata]{}, err
	}
	n, err := PageLimit(limit)
	if err != nil {
		return Page[LedgerMetadata]{}, err
	}
	return c.d.ListLedgersByPartition(ctx, topicID, partition, pageToken, n)
}

// ListLedgersByState implements LedgerLister. Checked: the state, the limit
// (resolved).
func (c *Catalog) ListLedgersByState(ctx context.Context, state LedgerState, pageToken string, limit int) (Page[LedgerMetadata], error) {
	if !state.Valid() {
		return Page[LedgerMetadata]{}, Invalid("state", "%v is not a ledger state", state)
	}
	n, err := PageLimit(limit)
	if err != nil {
		return Page[LedgerMetadata]{}, err
	}
	return c.d.ListLedgersByState(ctx, state, pageToken, n)
}

// HeartbeatBookie implements Bookies. Checked: ValidateBookie.
func (c *Catalog) HeartbeatBookie(ctx context.Context, b Bookie, ttl time.Duration) (Bookie, error) {
	if err := ValidateBookie(b, ttl); err != nil {
		return Bookie{}, err
	}
	return c.d.HeartbeatBookie(ctx, b, ttl)
}

// ListLiveBookies implements Bookies. It takes no arguments to check.
func (c *Catalog) ListLiveBookies(ctx context.Context) ([]Bookie, error) {
	return c.d.ListLiveBookies(ctx)
}

// RemoveBookie implements Bookies. Checked: the id.
func (c *Catalog) RemoveBookie(ctx context.Context, id string) error {
	if err := ValidateID("id", id); err != nil {
		return err
	}
	return c.d.RemoveBookie(ctx, id)
}

// CreateTrigger implements Triggers. Checked: ValidateTrigger.
func (c *Catalog) CreateTrigger(ctx context.Context, name string, spec TriggerSpec) (Trigger, error) {
	if err := ValidateTrigger(name, spec); err != nil {
		return Trigger{}, err
	}
	return c.d.CreateTrigger(ctx, name, spec)
}

// GetTrigger implements Triggers. Checked: the name.
func (c *Catalog) GetTrigger(ctx context.Context, name string) (Trigger, error) {
	if err := ValidateTriggerName(name); err != nil {
		return Trigger{}, err
	}
	return c.d.GetTrigger(ctx, name)
}

// ListTriggers implements Triggers. Checked: the limit (resolved).
func (c *Catalog) ListTriggers(ctx context.Context, pageToken string, limit int) (Page[Trigger], error) {
	n, err := PageLimit(limit)
	if err != nil {
		return Page[Trigger]{}, err
	}
	return c.d.ListTriggers(ctx, pageToken, n)
}

// UpdateTrigger implements Triggers. Checked: ValidateTrigger (that the
// topic did not change is the driver's CheckTriggerUpdate).
func (c *Catalog) UpdateTrigger(ctx context.Context, name string, spec TriggerSpec, expectVersion int64) (Trigger, error) {
	if err := ValidateTrigger(name, spec); err != nil {
		return Trigger{}, err
	}
	return c.d.UpdateTrigger(ctx, name, spec, expectVersion)
}

// DeleteTrigger implements Triggers. Checked: the name.
func (c *Catalog) DeleteTrigger(ctx context.Context, name string) (Trigger, error) {
	if err := ValidateTriggerName(name); err != nil {
		return Trigger{}, err
	}
	return c.d.DeleteTrigger(ctx, name)
}

func validateTopicPartition(topic string, partition int) error {
	if err := ValidateTopicName(topic); err != nil {
		return err
	}
	return ValidatePartitionIndex(partition)
}

func validateTopicIDPartition(id TopicID, partition int) error {
	if err := ValidateID("topicID", string(id)); err != nil {
		return err
	}
	return ValidatePartitionIndex(partition)
}

// RegisterSchema implements Schemas. Checked: the subject, the record,
// expectLatest.
func (c *Catalog) RegisterSchema(ctx context.Context, subject string, rec SchemaRecord, expectLatest int) (SubjectVersion, error) {
	if err := ValidateSubject(subject); err != nil {
		return SubjectVersion{}, err
	}
	if err := ValidateSchemaRecord(rec); err != nil {
		return SubjectVersion{}, err
	}
	if expectLatest < 0 {
		return SubjectVersion{}, Invalid("expectLatest", "%d is negative", expectLatest)
	}
	return c.d.RegisterSchema(ctx, subject, rec, expectLatest)
}

// GetSchema implements Schemas. Checked: the id.
func (c *Catalog) GetSchema(ctx context.Context, id int64) (SchemaRecord, error) {
	if id < 1 {
		return SchemaRecord{}, Invalid("id", "%d; schema ids start at 1", id)
	}
	return c.d.GetSchema(ctx, id)
}

// ListSubjectVersions implements Schemas. Checked: the subject.
func (c *Catalog) ListSubjectVersions(ctx context.Context, subject string, deleted bool) (SubjectVersions, error) {
	if err := ValidateSubject(subject); err != nil {
		return SubjectVersions{}, err
	}
	return c.d.ListSubjectVersions(ctx, subject, deleted)
}

// ListSubjects implements Schemas. Checked: the limit (resolved).
func (c *Catalog) ListSubjects(ctx context.Context, deleted bool, pageToken string, limit int) (Page[string], error) {
	n, err := PageLimit(limit)
	if err != nil {
		return Page[string]{}, err
	}
	return c.d.ListSubjects(ctx, deleted, pageToken, n)
}

// DeleteSubjectVersion implements Schemas. Checked: the subject, the
// version.
func (c *Catalog) DeleteSubjectVersion(ctx context.Context, subject string, version int, permanent bool) (SubjectVersion, error) {
	if err := ValidateSubject(subject); err != nil {
		return SubjectVersion{}, err
	}
	if version < 1 {
		return SubjectVersion{}, Invalid("version", "%d; versions start at 1", version)
	}
	return c.d.DeleteSubjectVersion(ctx, subject, version, permanent)
}

// GetCompatibility implements Schemas. Checked: the subject ("" allowed).
func (c *Catalog) GetCompatibility(ctx context.Context, subject string) (string, error) {
	if subject != "" {
		if err := ValidateSubject(subject); err != nil {
			return "", err
		}
	}
	return c.d.GetCompatibility(ctx, subject)
}

// SetCompatibility implements Schemas. Checked: the subject ("" allowed),
// the level.
func (c *Catalog) SetCompatibility(ctx context.Context, subject, level string) error {
	if subject != "" {
		if err := ValidateSubject(subject); err != nil {
			return err
		}
	}
	if err := ValidateCompatibilityLevel(level); err != nil {
		return err
	}
	return c.d.SetCompatibility(ctx, subject, level)
}

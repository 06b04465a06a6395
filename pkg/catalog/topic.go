package catalog

import (
	"context"
	"errors"
	"time"
)

// TopicID identifies one incarnation of a topic. A topic deleted and created
// again under the same name gets a new id, so partition records, ledgers and
// writer leases of the old incarnation can never be mistaken for the new
// one's (Kafka's topic ids, KIP-516, exist for the same reason).
type TopicID string

// Topic is a topic record.
type Topic struct {
	Name       string
	ID         TopicID
	Partitions int
	Config     TopicConfig
	CreatedAt  time.Time
	DeletedAt  time.Time // zero unless the topic is deleted
	// Version increases by one with every change; pass it back as
	// expectVersion to change the topic with compare-and-set.
	Version int64
}

// Topics manages live topics. Admin and services depend on this.
type Topics interface {
	// CreateTopic creates a topic with partitions partitions, at Version 1.
	// Errors: *ValidationError (name, partitions, config keys),
	// ErrAlreadyExists.
	CreateTopic(ctx context.Context, name string, partitions int, cfg TopicConfig) (Topic, error)

	// GetTopic returns a live topic. Errors: *ValidationError (name),
	// ErrNotFound (also for a deleted topic).
	GetTopic(ctx context.Context, name string) (Topic, error)

	// ListTopics returns live topics in name order. limit 0 means
	// DefaultPageSize. Errors: *ValidationError (limit, pageToken).
	ListTopics(ctx context.Context, pageToken string, limit int) (Page[Topic], error)

	// UpdateTopicConfig replaces the topic's config if its version is still
	// expectVersion. Errors: *ValidationError, ErrNotFound,
	// ErrVersionConflict.
	UpdateTopicConfig(ctx context.Context, name string, cfg TopicConfig, expectVersion int64) (Topic, error)

	// AddPartitions raises the partition count to newCount (Kafka semantics:
	// partitions are never removed) if the version is still expectVersion.
	// Errors: *ValidationError (partitions not above the current count, or
	// above MaxPartitions), ErrNotFound, ErrVersionConflict.
	AddPartitions(ctx context.Context, name string, newCount int, expectVersion int64) (Topic, error)

	// DeleteTopic marks the topic deleted: it disappears from GetTopic and
	// ListTopics at once, its partitions can no longer be acquired, and it
	// shows up in DeletedTopics.ListDeletedTopics until the compactor purges
	// it. The name is free for a new topic at once. Returns the deleted
	// record. Errors: *ValidationError, ErrNotFound.
	DeleteTopic(ctx context.Context, name string) (Topic, error)
}

// DeletedTopics is the compactor's view of deleted topics that still need
// cleaning up.
type DeletedTopics interface {
	// ListDeletedTopics returns deleted topics not yet purged, in TopicID
	// order. Errors: *ValidationError (limit, pageToken).
	ListDeletedTopics(ctx context.Context, pageToken string, limit int) (Page[Topic], error)

	// PurgeDeletedTopic removes a deleted topic's partition records and then
	// its deleted-topic record. Call it after deleting the topic's ledgers
	// (Ledgers.DeleteLedgerMetadata): ledger metadata is not touched here.
	// Idempotent up to the last step; Errors: ErrNotFound when the
	// deleted-topic record is already gone.
	PurgeDeletedTopic(ctx context.Context, id TopicID) error
}

// ValidateNewTopic checks CreateTopic's arguments, reporting every violation.
func ValidateNewTopic(name string, partitions int, cfg TopicConfig) error {
	var errs []error
	if err := ValidateTopicName(name); err != nil {
		errs = append(errs, err)
	}
	if err := ValidatePartitionCount(partitions); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, cfg.violations()...)
	return joinErrs(errs)
}

// ValidatePartitionCount checks a topic's partition count against [1, MaxPartitions].
func ValidatePartitionCount(n int) error {
	if n < 1 || n > MaxPartitions {
		return Invalid("partitions", "%d is outside [1, %d]", n, MaxPartitions)
	}
	return nil
}

// CheckAddPartitions validates AddPartitions against the stored topic.
func CheckAddPartitions(t Topic, newCount int) error {
	if err := ValidatePartitionCount(newCount); err != nil {
		return err
	}
	if newCount <= t.Partitions {
		return Invalid("partitions", "%d does not raise the current count %d (partitions are never removed)", newCount, t.Partitions)
	}
	return nil
}

// joinErrs is errors.Join that returns a lone error unwrapped, so errors.As
// and messages stay simple in the common single-violation case.
func joinErrs(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

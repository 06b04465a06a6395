package ingest

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/schema/registry"
)

// Validation at produce (docs/DESIGN.md §2.11, "Validation at produce"; the API contract is
// ProducerService's comment in proto/sluice/v1/producer.proto). prepare
// asks schemaCheck for a topic's checker; the checker decides for each value
// whether it is valid for the topic's schema.subject, and what becomes of
// it when it is not: the request is refused (reject), or the record is
// kept aside for the dead-letter topic (dlq), which prepare then plans as
// a produce of its own (prepareDeadLetters).

// ReasonSchemaValidation is the google.rpc.ErrorInfo reason of a produce
// refused because a value is not valid for the topic's schema.
const ReasonSchemaValidation = "SCHEMA_VALIDATION"

// The headers a dead-lettered record carries, besides its own.
const (
	HeaderDLQTopic     = "sluice.dlq.topic"     // the topic it was produced to
	HeaderDLQPartition = "sluice.dlq.partition" // its partition there (batches: the batch's)
	HeaderDLQSubject   = "sluice.dlq.subject"   // the topic's schema.subject
	HeaderDLQSchemaID  = "sluice.dlq.schema.id" // the id its value named, if any
	HeaderDLQReason    = "sluice.dlq.reason"    // why it is not valid
)

// schemaChecker validates the values of one produce request against its
// topic's subject.
type schemaChecker struct {
	s     *Service
	topic catalog.Topic
	rc    *registry.RequestCheck
}

// schemaCheck returns the checker for t, or nil when t has no subject.
func (s *Service) schemaCheck(t catalog.Topic) (*schemaChecker, error) {
	if t.Config.SchemaSubject == "" {
		return nil, nil
	}
	if s.schemas == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("topic %q requires schema %q, and this ingest copy was started without the schema registry's store", t.Name, t.Config.SchemaSubject))
	}
	return &schemaChecker{s: s, topic: t, rc: s.schemas.Request()}, nil
}

// check validates value: nil, nil when the value is valid (or a
// tombstone); the reason when it is not; an error when the registry could
// not say (UNAVAILABLE: retry). Nothing is allocated for a valid value.
func (c *schemaChecker) check(ctx context.Context, value []byte) (*registry.InvalidRecordError, error) {
	if len(value) == 0 {
		return nil, nil // a tombstone: nothing to decode
	}
	if _, err := c.rc.Check(ctx, c.topic.Config.SchemaSubject, value); err != nil {
		return c.invalidOf(err)
	}
	return nil, nil
}

// invalidOf splits a failed check into the record's fault or the store's.
func (c *schemaChecker) invalidOf(err error) (*registry.InvalidRecordError, error) {
	var inv *registry.InvalidRecordError
	if errors.As(err, &inv) {
		return inv, nil
	}
	return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("the schema registry's store could not be read to validate the records of topic %q: %w; retry", c.topic.Name, err))
}

// dlq reports whether invalid records go to the dead-letter topic.
func (c *schemaChecker) dlq() bool {
	return c.topic.Config.SchemaValidation == catalog.ValidationDLQ
}

// refuse is reject's answer for the value at field.
func (c *schemaChecker) refuse(field string, inv *registry.InvalidRecordError, extra string) error {
	ce := apierr.Invalid(field, "%v%s", inv, extra)
	return apierr.WithReason(ce, ReasonSchemaValidation, map[string]string{
		"subject":   inv.Subject,
		"schema_id": strconv.FormatInt(inv.SchemaID, 10),
	})
}

// deadLetter is a record bound for the dead-letter topic, as a plain
// record with the sluice.dlq.* headers.
func (c *schemaChecker) deadLetter(r *record.Record, partition int, inv *registry.InvalidRecordError, reason string) *sluicev1.Record {
	out := &sluicev1.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, &sluicev1.Header{Key: h.Key, Value: h.Value})
	}
	add := func(k, v string) { out.Headers = append(out.Headers, &sluicev1.Header{Key: k, Value: []byte(v)}) }
	add(HeaderDLQTopic, c.topic.Name)
	if partition >= 0 {
		add(HeaderDLQPartition, strconv.Itoa(partition))
	}
	add(HeaderDLQSubject, c.topic.Config.SchemaSubject)
	if inv != nil && inv.SchemaID != 0 {
		add(HeaderDLQSchemaID, strconv.FormatInt(inv.SchemaID, 10))
	}
	add(HeaderDLQReason, reason)
	return out
}

// checkBatch checks batch i by record.Validate's rules and its values
// against the subject, in one pass. It returns the records to dead-letter
// in the batch's place and why (nil: the batch is valid), or the error
// that refuses the request (a *record.FormatError is the caller's to word).
func (c *schemaChecker) checkBatch(ctx context.Context, i int, data []byte, partition int, lim record.Limits) ([]*sluicev1.Record, *registry.InvalidRecordError, error) {
	type bad struct {
		j   int
		inv *registry.InvalidRecordError
	}
	var invalid []bad
	// Refuse rather than dead-letter? Asked in the callback only: the
	// batch's header is known to be whole there.
	refuse := func() bool { return !c.dlq() || idempotent(data) }
	failedAt := -1
	var refused *registry.InvalidRecordError
	err := record.ValidateEach(data, lim, func(j int, r *record.Record) error {
		inv, err := c.check(ctx, r.Value)
		switch {
		case err != nil:
			return err
		case inv == nil:
			return nil
		case refuse():
			// The first invalid record is the answer.
			failedAt, refused = j, inv
			return errRefused
		}
		invalid = append(invalid, bad{j, inv})
		return nil
	})
	switch {
	case refused != nil:
		extra := ""
		if c.dlq() {
			extra = " (a batch of an idempotent or transactional producer is refused, not dead-lettered: its sequence numbers cover all its records)"
		}
		return nil, nil, c.refuse(fmt.Sprintf("batches[%d].data.records[%d].value", i, failedAt), refused, extra)
	case err != nil:
		return nil, nil, err
	case len(invalid) == 0:
		return nil, nil, nil
	}
	// dlq: the whole batch goes to the dead-letter topic, each record
	// saying why.
	recs, err := record.Parse(data, lim)
	if err != nil {
		return nil, nil, err
	}
	out := make([]*sluicev1.Record, len(recs))
	k := 0
	for j := range recs {
		var why *registry.InvalidRecordError
		reason := ""
		if k < len(invalid) && invalid[k].j == j {
			why, reason = invalid[k].inv, invalid[k].inv.Error()
			k++
		} else {
			reason = fmt.Sprintf("its batch holds record %d, which is %v", invalid[0].j, invalid[0].inv)
		}
		out[j] = c.deadLetter(&recs[j], partition, why, reason)
	}
	return out, invalid[0].inv, nil
}

// deadResult is the answer's mark of a dead-lettered record or batch.
func (c *schemaChecker) deadResult(inv *registry.InvalidRecordError) *sluicev1.DeadLetter {
	return &sluicev1.DeadLetter{Topic: c.topic.Config.SchemaDLQTopic, Reason: inv.Error(), SchemaId: inv.SchemaID}
}

// errRefused stops checkBatch's walk at the value that refuses the batch.
var errRefused = errors.New("refused")

// idempotent reports whether a batch carries a producer id (idempotent or
// transactional). data must hold a whole batch header.
func idempotent(data []byte) bool {
	return record.Batch(data).ProducerID() != record.NoProducerID
}

// prepareDeadLetters plans the produce of pl's dead letters to the topic's
// schema.dlq.topic.
func (s *Service) prepareDeadLetters(ctx context.Context, t catalog.Topic, recs []*sluicev1.Record) (*plan, error) {
	name := t.Config.SchemaDLQTopic
	if name == t.Name {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("topic %q names itself as its %s; set another topic", t.Name, catalog.KeySchemaDLQTopic))
	}
	ct, err := s.topic(ctx, name)
	if errors.Is(err, catalog.ErrNotFound) {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("topic %q's %s %q does not exist; create it (the invalid records of this request were not written)", t.Name, catalog.KeySchemaDLQTopic, name))
	}
	if err != nil {
		return nil, apierr.FromCatalog(err)
	}
	if ct.t.Config.SchemaSubject != "" {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("topic %q's %s %q has a %s of its own; a dead-letter topic must take any value: unset it there", t.Name, catalog.KeySchemaDLQTopic, name, catalog.KeySchemaSubject))
	}
	pl, err := s.prepare(ctx, &sluicev1.ProduceRequest{Topic: name, Records: recs})
	if ce := new(connect.Error); errors.As(err, &ce) {
		// Say which request failed: the dead letters' (their limits are
		// the dead-letter topic's).
		return nil, connect.NewError(ce.Code(), fmt.Errorf("writing the invalid records to %s %q: %s", catalog.KeySchemaDLQTopic, name, ce.Message()))
	}
	return pl, err
}

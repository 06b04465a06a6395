package catalog

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// Topic config keys, Kafka-named where Kafka has the setting.
const (
	KeyRetentionMs              = "retention.ms"
	KeyRetentionBytes           = "retention.bytes"
	KeyCleanupPolicy            = "cleanup.policy"
	KeyMaxMessageBytes          = "max.message.bytes"
	KeyReplicationEnsemble      = "replication.ensemble"
	KeyReplicationWriteQuorum   = "replication.write.quorum"
	KeyReplicationAckQuorum     = "replication.ack.quorum"
	KeyDurabilityRelaxedAllowed = "durability.relaxed.allowed"
	KeySchemaSubject            = "schema.subject"
	KeySchemaValidation         = "schema.validation"
	KeySchemaDLQTopic           = "schema.dlq.topic"
)

// SchemaValidation says what ingest does with a record that is not valid
// for the topic's schema.subject.
type SchemaValidation string

const (
	// ValidationReject refuses the whole produce request.
	ValidationReject SchemaValidation = "reject"
	// ValidationDLQ writes invalid records to schema.dlq.topic and the
	// valid ones to the topic.
	ValidationDLQ SchemaValidation = "dlq"
)

// Unlimited is the retention.ms / retention.bytes value that disables the limit.
const Unlimited = -1

// CleanupPolicy says what the compactor does with old data.
type CleanupPolicy string

const (
	// CleanupDelete drops data past retention.
	CleanupDelete CleanupPolicy = "delete"
	// CleanupCompact keeps the newest value per key.
	CleanupCompact CleanupPolicy = "compact"
)

// Replication is a ledger's BookKeeper replication: each entry goes to
// WriteQuorum of Ensemble bookies and is acknowledged after AckQuorum of them
// fsynced it (DESIGN §2.2). Valid when MaxEnsembleSize >= Ensemble >=
// WriteQuorum >= AckQuorum >= 1.
type Replication struct {
	Ensemble    int
	WriteQuorum int
	AckQuorum   int
}

// DefaultReplication is 3 copies, acknowledged after 2.
var DefaultReplication = Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}

// validate checks r, naming fields with the given key names.
func (r Replication) validate(keyE, keyQw, keyQa string) error {
	var errs []error
	if r.Ensemble < 1 || r.Ensemble > MaxEnsembleSize {
		errs = append(errs, Invalid(keyE, "%d is outside [1, %d]", r.Ensemble, MaxEnsembleSize))
	}
	if r.WriteQuorum < 1 || r.WriteQuorum > r.Ensemble {
		errs = append(errs, Invalid(keyQw, "%d is outside [1, ensemble %d]", r.WriteQuorum, r.Ensemble))
	}
	if r.AckQuorum < 1 || r.AckQuorum > r.WriteQuorum {
		errs = append(errs, Invalid(keyQa, "%d is outside [1, write quorum %d]", r.AckQuorum, r.WriteQuorum))
	}
	return errors.Join(errs...)
}

// TopicConfig is a topic's typed configuration. The zero value is not valid;
// start from DefaultTopicConfig or ParseTopicConfig.
type TopicConfig struct {
	RetentionMs              int64            // Unlimited or >= 1; default 7 days
	RetentionBytes           int64            // per partition; Unlimited or >= 1; default Unlimited
	CleanupPolicy            CleanupPolicy    // default CleanupDelete
	MaxMessageBytes          int              // largest record batch; [1, MaxMaxMessageBytes]; default 1048588 (Kafka's)
	Replication              Replication      // for new ledgers; default DefaultReplication
	DurabilityRelaxedAllowed bool             // may producers ask to be acked before fsync; default false
	SchemaSubject            string           // "" = records are not schema-checked
	SchemaValidation         SchemaValidation // with SchemaSubject; default ValidationReject
	SchemaDLQTopic           string           // where ValidationDLQ writes; required with it
}

// DefaultTopicConfig returns the config a topic gets for keys it does not set.
func DefaultTopicConfig() TopicConfig {
	return TopicConfig{
		RetentionMs:      7 * 24 * 60 * 60 * 1000,
		RetentionBytes:   Unlimited,
		CleanupPolicy:    CleanupDelete,
		MaxMessageBytes:  1048588,
		Replication:      DefaultReplication,
		SchemaValidation: ValidationReject,
	}
}

// configKeys lists every key with how to parse it into and format it out of
// a TopicConfig. Range checks live in Validate, so a typed config built in
// Go gets the same checks as a parsed one.
var configKeys = map[string]struct {
	parse  func(c *TopicConfig, v string) error
	format func(c TopicConfig) string
}{
	KeyRetentionMs: {
		func(c *TopicConfig, v string) (err error) { c.RetentionMs, err = parseInt(v); return err },
		func(c TopicConfig) string { return strconv.FormatInt(c.RetentionMs, 10) },
	},
	KeyRetentionBytes: {
		func(c *TopicConfig, v string) (err error) { c.RetentionBytes, err = parseInt(v); return err },
		func(c TopicConfig) string { return strconv.FormatInt(c.RetentionBytes, 10) },
	},
	KeyCleanupPolicy: {
		func(c *TopicConfig, v string) error { c.CleanupPolicy = CleanupPolicy(v); return nil },
		func(c TopicConfig) string { return string(c.CleanupPolicy) },
	},
	KeyMaxMessageBytes: {
		func(c *TopicConfig, v string) (err error) { c.MaxMessageBytes, err = parseSmallInt(v); return err },
		func(c TopicConfig) string { return strconv.Itoa(c.MaxMessageBytes) },
	},
	KeyReplicationEnsemble: {
		func(c *TopicConfig, v string) (err error) { c.Replication.Ensemble, err = parseSmallInt(v); return err },
		func(c TopicConfig) string { return strconv.Itoa(c.Replication.Ensemble) },
	},
	KeyReplicationWriteQuorum: {
		func(c *TopicConfig, v string) (err error) {
			c.Replication.WriteQuorum, err = parseSmallInt(v)
			return err
		},
		func(c TopicConfig) string { return strconv.Itoa(c.Replication.WriteQuorum) },
	},
	KeyReplicationAckQuorum: {
		func(c *TopicConfig, v string) (err error) {
			c.Replication.AckQuorum, err = parseSmallInt(v)
			return err
		},
		func(c TopicConfig) string { return strconv.Itoa(c.Replication.AckQuorum) },
	},
	KeyDurabilityRelaxedAllowed: {
		func(c *TopicConfig, v string) error {
			switch v {
			case "true":
				c.DurabilityRelaxedAllowed = true
			case "false":
				c.DurabilityRelaxedAllowed = false
			default:
				return fmt.Errorf("%q is not true or false", v)
			}
			return nil
		},
		func(c TopicConfig) string { return strconv.FormatBool(c.DurabilityRelaxedAllowed) },
	},
	KeySchemaSubject: {
		func(c *TopicConfig, v string) error { c.SchemaSubject = v; return nil },
		func(c TopicConfig) string { return c.SchemaSubject },
	},
	KeySchemaValidation: {
		func(c *TopicConfig, v string) error { c.SchemaValidation = SchemaValidation(v); return nil },
		func(c TopicConfig) string { return string(c.SchemaValidation) },
	},
	KeySchemaDLQTopic: {
		func(c *TopicConfig, v string) error { c.SchemaDLQTopic = v; return nil },
		func(c TopicConfig) string { return c.SchemaDLQTopic },
	},
}

func parseInt(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a decimal integer", v)
	}
	return n, nil
}

func parseSmallInt(v string) (int, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a 32-bit decimal integer", v)
	}
	return int(n), nil
}

// ParseTopicConfig builds a config from string key/values (the Admin API's
// map), starting from DefaultTopicConfig. It rejects unknown keys and bad
// values, reporting every violation (errors.Join of *ValidationError, each
// naming its key, in key order).
func ParseTopicConfig(m map[string]string) (TopicConfig, error) {
	c := DefaultTopicConfig()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	bad := map[string]bool{}
	for _, k := range keys {
		spec, ok := configKeys[k]
		if !ok {
			errs = append(errs, Invalid(k, "unknown topic config key"))
			bad[k] = true
			continue
		}
		if err := spec.parse(&c, m[k]); err != nil {
			errs = append(errs, Invalid(k, "%v", err))
			bad[k] = true
		}
	}
	// Range checks, except for keys already reported as unparsable.
	for _, err := range c.violations() {
		var ve *ValidationError
		if errors.As(err, &ve) && !bad[ve.Field] {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return TopicConfig{}, errors.Join(errs...)
	}
	return c, nil
}

// Map returns every key with its value; ParseTopicConfig(c.Map()) == c.
func (c TopicConfig) Map() map[string]string {
	m := make(map[string]string, len(configKeys))
	for k, spec := range configKeys {
		m[k] = spec.format(c)
	}
	return m
}

// Validate checks every field and reports every violation (errors.Join of
// *ValidationError naming the config key).
func (c TopicConfig) Validate() error { return errors.Join(c.violations()...) }

func (c TopicConfig) violations() []error {
	var errs []error
	if c.RetentionMs != Unlimited && c.RetentionMs < 1 {
		errs = append(errs, Invalid(KeyRetentionMs, "%d: want -1 (unlimited) or at least 1", c.RetentionMs))
	}
	if c.RetentionBytes != Unlimited && c.RetentionBytes < 1 {
		errs = append(errs, Invalid(KeyRetentionBytes, "%d: want -1 (unlimited) or at least 1", c.RetentionBytes))
	}
	if c.CleanupPolicy != CleanupDelete && c.CleanupPolicy != CleanupCompact {
		errs = append(errs, Invalid(KeyCleanupPolicy, "%q: want %q or %q", c.CleanupPolicy, CleanupDelete, CleanupCompact))
	}
	if c.MaxMessageBytes < 1 || c.MaxMessageBytes > MaxMaxMessageBytes {
		errs = append(errs, Invalid(KeyMaxMessageBytes, "%d is outside [1, %d]", c.MaxMessageBytes, MaxMaxMessageBytes))
	}
	if err := c.Replication.validate(KeyReplicationEnsemble, KeyReplicationWriteQuorum, KeyReplicationAckQuorum); err != nil {
		errs = append(errs, unjoin(err)...)
	}
	if c.SchemaSubject != "" {
		if len(c.SchemaSubject) > MaxSchemaSubjectLength {
			errs = append(errs, Invalid(KeySchemaSubject, "is %d bytes, more than %d", len(c.SchemaSubject), MaxSchemaSubjectLength))
		} else if err := validatePrintable(KeySchemaSubject, c.SchemaSubject); err != nil {
			errs = append(errs, err)
		}
	}
	if c.SchemaValidation != ValidationReject && c.SchemaValidation != ValidationDLQ {
		errs = append(errs, Invalid(KeySchemaValidation, "%q: want %q or %q", c.SchemaValidation, ValidationReject, ValidationDLQ))
	}
	if c.SchemaDLQTopic != "" {
		if err := ValidateTopicName(c.SchemaDLQTopic); err != nil {
			errs = append(errs, Invalid(KeySchemaDLQTopic, "%q is not a topic name: %v", c.SchemaDLQTopic, err))
		}
	} else if c.SchemaValidation == ValidationDLQ {
		errs = append(errs, Invalid(KeySchemaDLQTopic, "is required with %s=%s: name the topic invalid records go to", KeySchemaValidation, ValidationDLQ))
	}
	return errs
}

// unjoin flattens an errors.Join result.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

package loadgen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Limits on a workload, checked by Validate. They keep one load generator
// process, on a small machine, within what it can drive and measure.
const (
	MaxTopics             = 1024
	MaxPartitionsPerTopic = 10_000
	MaxTotalPartitions    = 100_000
	MaxMessageSize        = 1 << 20
	MaxProducersPerTopic  = 64
	MaxProducers          = 256
	MaxSubscriptions      = 16
	MaxConsumersPerSub    = 64
	MaxConsumers          = 256
	MaxProducerRate       = 10_000_000 // messages/s, all producers together
	MaxTestDuration       = 24 * time.Hour
	MaxWarmupDuration     = time.Hour

	// MinSearchWarmup is the shortest warm-up of a max-rate workload: the
	// search for the sustainable rate runs during the warm-up, in steps of
	// SearchInterval, and needs several of them.
	MinSearchWarmup = 10 * time.Second

	// MaxRecoveryDuration bounds a recovery phase (and the per-100 ms
	// buckets that follow it); DefaultRecoveryLatency is the latency under
	// which a second of messages counts as recovered.
	MaxRecoveryDuration    = 10 * time.Minute
	DefaultRecoveryLatency = 100 * time.Millisecond
)

// Key distributors: how producers choose message keys (the OpenMessaging
// Benchmark's names). Keys decide partitions in systems that hash them.
const (
	KeyNone       = "NO_KEY"          // no key: the client spreads messages over partitions itself
	KeyRoundRobin = "KEY_ROUND_ROBIN" // keys cycle over a fixed set, one per partition of the topic
	KeyRandom     = "RANDOM_NANO"     // a fresh random key for every message
)

// Workload is one benchmark scenario, in the shape of the OpenMessaging
// Benchmark's workload files (same field names), so its workloads load here
// too. Two additions: durations may be given as Go durations (testDuration:
// 60s) besides OMB's whole minutes, and producerRate 0 means "search for the
// maximum sustainable rate during the warm-up" as in OMB.
//
// Zero values: keyDistributor NO_KEY; consumerPerSubscription 1 when there are
// subscriptions; warm-up none. Everything else must be set.
type Workload struct {
	Name string `yaml:"name" json:"name"`

	Topics             int `yaml:"topics" json:"topics"`
	PartitionsPerTopic int `yaml:"partitionsPerTopic" json:"partitionsPerTopic"`
	// MessageSize is the payload size in bytes, the load generator's header
	// included (HeaderSize).
	MessageSize    int    `yaml:"messageSize" json:"messageSize"`
	KeyDistributor string `yaml:"keyDistributor,omitempty" json:"keyDistributor"`

	ProducersPerTopic int `yaml:"producersPerTopic" json:"producersPerTopic"`
	// ProducerRate is messages per second, all producers of all topics
	// together; 0 searches for the maximum sustainable rate.
	ProducerRate float64 `yaml:"producerRate" json:"producerRate"`

	// Each subscription receives every message of its topic once, spread over
	// its consumers (a Kafka consumer group).
	SubscriptionsPerTopic   int `yaml:"subscriptionsPerTopic" json:"subscriptionsPerTopic"`
	ConsumerPerSubscription int `yaml:"consumerPerSubscription,omitempty" json:"consumerPerSubscription"`

	WarmupDuration Duration `yaml:"warmupDuration,omitempty" json:"warmupDuration"`
	TestDuration   Duration `yaml:"testDuration,omitempty" json:"testDuration"`
	// BacklogDuration makes the run a catch-up test (not in OMB): the
	// producers run at producerRate for this long with no consumer, then
	// the consumers start, from the start of the topic, while production
	// goes on; the measured window starts with them, and the result's
	// catchUp says how fast they drained the backlog. It needs a fixed
	// producerRate and subscriptions, and takes the warm-up's place
	// (warmupDuration must be 0: the backlog phase warms the producers up).
	BacklogDuration Duration `yaml:"backlogDuration,omitempty" json:"backlogDuration,omitempty"`
	// RecoveryRate and RecoveryDuration add a recovery phase after the
	// measured window (not in OMB), for overload tests: at the window's end
	// the producers drop whatever of the window's schedule they have not
	// sent yet and go on at RecoveryRate for RecoveryDuration. The result's
	// recovery says how long after the switch the system took to answer
	// every message within RecoveryLatency (default 100 ms) for a whole
	// second. Messages of the recovery phase are not in the window's
	// numbers.
	RecoveryRate     float64  `yaml:"recoveryRate,omitempty" json:"recoveryRate,omitempty"`
	RecoveryDuration Duration `yaml:"recoveryDuration,omitempty" json:"recoveryDuration,omitempty"`
	RecoveryLatency  Duration `yaml:"recoveryLatency,omitempty" json:"recoveryLatency,omitempty"`
	// TransactionSize makes every producer transactional (not in OMB):
	// each commits a transaction every TransactionSize messages, and a
	// message's send completes (its publish latency ends) once its
	// transaction committed. 0: no transactions. ReadCommitted has the
	// consumers read only committed transactions' messages. Drivers that
	// cannot refuse the workload (TransactionalDriver).
	TransactionSize int  `yaml:"transactionSize,omitempty" json:"transactionSize,omitempty"`
	ReadCommitted   bool `yaml:"readCommitted,omitempty" json:"readCommitted,omitempty"`
	// OMB's forms of the same; normalized into the two above.
	WarmupDurationMinutes float64 `yaml:"warmupDurationMinutes,omitempty" json:"-"`
	TestDurationMinutes   float64 `yaml:"testDurationMinutes,omitempty" json:"-"`
}

// Duration is a time.Duration written as a Go duration string ("1m30s") in
// YAML and JSON.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML reads a Go duration string ("90s", "1m30s").
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a duration such as 60s or 2m", n.Line)
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration such as 60s or 2m", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes d as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration", s)
	}
	*d = Duration(v)
	return nil
}

// LoadWorkload reads, normalizes and validates a workload file.
func LoadWorkload(path string) (Workload, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Workload{}, fmt.Errorf("workload: %w", err)
	}
	w, err := ParseWorkload(b)
	if err != nil {
		return Workload{}, fmt.Errorf("workload %s: %w", path, err)
	}
	return w, nil
}

// ParseWorkload decodes one YAML workload, rejecting unknown fields (a typo
// must not silently fall back to a default), then normalizes and validates
// it.
func ParseWorkload(b []byte) (Workload, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var w Workload
	if err := dec.Decode(&w); err != nil {
		if errors.Is(err, io.EOF) {
			return Workload{}, errors.New("empty workload")
		}
		return Workload{}, nameFields(err, b)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Workload{}, errors.New("more than one YAML document; a workload file holds one")
	}
	if err := w.Normalize(); err != nil {
		return Workload{}, err
	}
	return w, nil
}

// Normalize fills the documented defaults, folds OMB's minute fields into the
// duration fields, and validates the result.
func (w *Workload) Normalize() error {
	var errs []error
	fold := func(d *Duration, minutes float64, name string) {
		if minutes == 0 {
			return
		}
		if *d != 0 {
			errs = append(errs, fmt.Errorf("%s and %sMinutes: set one, not both", name, name))
			return
		}
		if minutes < 0 || math.IsNaN(minutes) || minutes > MaxTestDuration.Minutes() {
			errs = append(errs, fmt.Errorf("%sMinutes: must be between 0 and %v, got %v", name, MaxTestDuration.Minutes(), minutes))
			return
		}
		*d = Duration(time.Duration(minutes * float64(time.Minute)))
	}
	fold(&w.WarmupDuration, w.WarmupDurationMinutes, "warmupDuration")
	fold(&w.TestDuration, w.TestDurationMinutes, "testDuration")
	w.WarmupDurationMinutes, w.TestDurationMinutes = 0, 0
	if w.KeyDistributor == "" {
		w.KeyDistributor = KeyNone
	}
	if w.RecoveryDuration > 0 && w.RecoveryLatency == 0 {
		w.RecoveryLatency = Duration(DefaultRecoveryLatency)
	}
	if w.SubscriptionsPerTopic > 0 && w.ConsumerPerSubscription == 0 {
		w.ConsumerPerSubscription = 1
	}
	if err := w.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Validate reports every field that is out of range, each error naming its
// field.
func (w Workload) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf(field+": "+format, args...))
	}
	between := func(field string, v, lo, hi int) {
		if v < lo || v > hi {
			bad(field, "must be between %d and %d, got %d", lo, hi, v)
		}
	}
	if strings.TrimSpace(w.Name) == "" {
		bad("name", "must be set")
	}
	between("topics", w.Topics, 1, MaxTopics)
	between("partitionsPerTopic", w.PartitionsPerTopic, 1, MaxPartitionsPerTopic)
	if w.Topics*w.PartitionsPerTopic > MaxTotalPartitions {
		bad("partitionsPerTopic", "topics × partitionsPerTopic is %d, more than %d", w.Topics*w.PartitionsPerTopic, MaxTotalPartitions)
	}
	between("messageSize", w.MessageSize, HeaderSize, MaxMessageSize)
	switch w.KeyDistributor {
	case KeyNone, KeyRoundRobin, KeyRandom:
	default:
		bad("keyDistributor", "must be %s, %s or %s, got %q", KeyNone, KeyRoundRobin, KeyRandom, w.KeyDistributor)
	}
	between("producersPerTopic", w.ProducersPerTopic, 1, MaxProducersPerTopic)
	if w.Topics*w.ProducersPerTopic > MaxProducers {
		bad("producersPerTopic", "topics × producersPerTopic is %d, more than %d", w.Topics*w.ProducersPerTopic, MaxProducers)
	}
	if math.IsNaN(w.ProducerRate) || w.ProducerRate < 0 || w.ProducerRate > MaxProducerRate {
		bad("producerRate", "must be between 0 (search for the maximum) and %d messages/s, got %v", MaxProducerRate, w.ProducerRate)
	} else if w.ProducerRate > 0 && w.ProducerRate < float64(w.Topics*w.ProducersPerTopic)/60 {
		bad("producerRate", "%v messages/s over %d producers is less than one message a minute each", w.ProducerRate, w.Topics*w.ProducersPerTopic)
	}
	between("subscriptionsPerTopic", w.SubscriptionsPerTopic, 0, MaxSubscriptions)
	if w.SubscriptionsPerTopic > 0 {
		between("consumerPerSubscription", w.ConsumerPerSubscription, 1, MaxConsumersPerSub)
		if n := w.Topics * w.SubscriptionsPerTopic * w.ConsumerPerSubscription; n > MaxConsumers {
			bad("consumerPerSubscription", "topics × subscriptionsPerTopic × consumerPerSubscription is %d, more than %d", n, MaxConsumers)
		}
	} else if w.ConsumerPerSubscription != 0 {
		bad("consumerPerSubscription", "set without subscriptions (subscriptionsPerTopic is 0)")
	}
	if w.TestDuration.D() < time.Second || w.TestDuration.D() > MaxTestDuration {
		bad("testDuration", "must be between 1s and %v, got %v", MaxTestDuration, w.TestDuration)
	}
	if w.WarmupDuration < 0 || w.WarmupDuration.D() > MaxWarmupDuration {
		bad("warmupDuration", "must be between 0 and %v, got %v", MaxWarmupDuration, w.WarmupDuration)
	} else if w.ProducerRate == 0 && w.WarmupDuration.D() < MinSearchWarmup {
		bad("warmupDuration", "must be at least %v when producerRate is 0: the search for the maximum rate runs during the warm-up", MinSearchWarmup)
	}
	if w.BacklogDuration != 0 {
		switch {
		case w.BacklogDuration < 0 || w.BacklogDuration.D() > MaxWarmupDuration:
			bad("backlogDuration", "must be between 0 and %v, got %v", MaxWarmupDuration, w.BacklogDuration)
		case w.ProducerRate == 0:
			bad("backlogDuration", "needs a fixed producerRate (the backlog is built at that rate)")
		case w.SubscriptionsPerTopic == 0:
			bad("backlogDuration", "needs subscriptions: consumers drain the backlog")
		}
		if w.WarmupDuration != 0 {
			bad("warmupDuration", "must be 0 with backlogDuration: the backlog phase is the warm-up")
		}
	}
	if w.RecoveryDuration != 0 || w.RecoveryRate != 0 {
		switch {
		case w.RecoveryDuration.D() < time.Second || w.RecoveryDuration.D() > MaxRecoveryDuration:
			bad("recoveryDuration", "must be between 1s and %v with recoveryRate, got %v", MaxRecoveryDuration, w.RecoveryDuration)
		case math.IsNaN(w.RecoveryRate) || w.RecoveryRate <= 0 || w.RecoveryRate > MaxProducerRate:
			bad("recoveryRate", "must be between 1 and %d messages/s with recoveryDuration, got %v", MaxProducerRate, w.RecoveryRate)
		case w.BacklogDuration != 0:
			bad("recoveryDuration", "cannot be combined with backlogDuration")
		}
		if w.RecoveryLatency < 0 || w.RecoveryLatency.D() > time.Minute {
			bad("recoveryLatency", "must be between 0 (the default, %v) and 1m, got %v", DefaultRecoveryLatency, w.RecoveryLatency)
		}
	}
	if w.TransactionSize < 0 || w.TransactionSize > MaxTransactionSize {
		bad("transactionSize", "must be between 0 (no transactions) and %d, got %d", MaxTransactionSize, w.TransactionSize)
	}
	return errors.Join(errs...)
}

// MaxTransactionSize bounds a workload's transactionSize.
const MaxTransactionSize = 100_000

// Producers returns the number of producers of the workload.
func (w Workload) Producers() int { return w.Topics * w.ProducersPerTopic }

// Consumers returns the number of consumers of the workload.
func (w Workload) Consumers() int {
	return w.Topics * w.SubscriptionsPerTopic * w.ConsumerPerSubscription
}

var yamlLine = regexp.MustCompile(`^line (\d+): `)

// nameFields prefixes each of a YAML type error's messages ("line 3: cannot
// unmarshal !!str `two` into int") with the field on that line, so every
// error names its field as Validate's do.
func nameFields(err error, src []byte) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	var root yaml.Node
	if yaml.Unmarshal(src, &root) != nil || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return err
	}
	fields := map[int]string{}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		fields[m.Content[i].Line] = m.Content[i].Value
		fields[m.Content[i+1].Line] = m.Content[i].Value
	}
	msgs := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		msgs[i] = e
		if sm := yamlLine.FindStringSubmatch(e); sm != nil {
			if n, _ := strconv.Atoi(sm[1]); fields[n] != "" {
				msgs[i] = fields[n] + ": " + e
			}
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

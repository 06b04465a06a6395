package bookkeeping

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// ValidateName checks a group name, topic name, member id or transactional id:
// 1..MaxNameBytes bytes of valid UTF-8 without control characters. Control
// characters are refused so that names can never break keys or logs (the
// embedded store separates key parts with NUL).
func ValidateName(field, name string) error {
	if reason := nameProblem(name); reason != "" {
		return invalid(field, "%s", reason)
	}
	return nil
}

// nameProblem says what is wrong with name, or "" when it is a valid name.
func nameProblem(name string) string {
	switch {
	case name == "":
		return "must not be empty"
	case len(name) > MaxNameBytes:
		return fmt.Sprintf("is %d bytes, longer than %d", len(name), MaxNameBytes)
	case !utf8.ValidString(name):
		return "is not valid UTF-8"
	}
	for i, r := range name {
		if unicode.IsControl(r) {
			return fmt.Sprintf("has a control character at byte %d", i)
		}
	}
	return ""
}

// ValidateTopicID checks the id of a topic incarnation (Commit.TopicID):
// required, and bounded like a name (1..MaxNameBytes bytes of valid UTF-8
// without control characters). The catalog's ids are shorter (hex); the
// store only compares them, so it asks no more than it must store safely.
func ValidateTopicID(field, id string) error {
	if reason := nameProblem(id); reason != "" {
		return invalid(field, "%s", reason)
	}
	return nil
}

// ValidateTopics checks a member's topic list: at most MaxMemberTopics
// distinct valid topic names. Every problem is reported for field itself,
// the reason naming the index (the list is one field of the member).
func ValidateTopics(field string, topics []string) error {
	if len(topics) > MaxMemberTopics {
		return invalid(field, "has %d topics, more than %d", len(topics), MaxMemberTopics)
	}
	seen := make(map[string]int, len(topics))
	for i, t := range topics {
		if reason := nameProblem(t); reason != "" {
			return invalid(field, "topic %d %s", i, reason)
		}
		if j, dup := seen[t]; dup {
			return invalid(field, "topic %d %q repeats topic %d", i, t, j)
		}
		seen[t] = i
	}
	return nil
}

// ValidatePartition checks 0 ≤ p < MaxPartitions.
func ValidatePartition(field string, p int32) error {
	if p < 0 || p >= MaxPartitions {
		return invalid(field, "%d is outside [0, %d)", p, MaxPartitions)
	}
	return nil
}

// ValidateSessionTimeout checks MinSessionTimeout ≤ d ≤ MaxSessionTimeout.
func ValidateSessionTimeout(field string, d time.Duration) error {
	if d < MinSessionTimeout || d > MaxSessionTimeout {
		return invalid(field, "%v is outside [%v, %v]", d, MinSessionTimeout, MaxSessionTimeout)
	}
	return nil
}

// ValidateLeaseKey checks the arguments of Acquire and Release.
func ValidateLeaseKey(group, topic string, partition int32, member string) error {
	if err := ValidateName("group", group); err != nil {
		return err
	}
	if err := ValidateName("topic", topic); err != nil {
		return err
	}
	if err := ValidatePartition("partition", partition); err != nil {
		return err
	}
	return ValidateName("member", member)
}

// ValidateEpoch checks that a lease epoch given by a lease holder is ≥ 1
// (epoch 0 means "never leased" and is never handed out).
func ValidateEpoch(field string, epoch int64) error {
	if epoch < 1 {
		return invalid(field, "%d is not a lease epoch (epochs start at 1)", epoch)
	}
	return nil
}

// ValidateListLimit checks 1 ≤ limit ≤ MaxListLimit.
func ValidateListLimit(limit int) error {
	if limit < 1 || limit > MaxListLimit {
		return invalid("limit", "%d is outside [1, %d]", limit, MaxListLimit)
	}
	return nil
}

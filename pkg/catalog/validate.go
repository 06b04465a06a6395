package catalog

import (
	"slices"
	"time"
	"unicode/utf8"
)

// ValidateTopicName applies Kafka's rule: 1..249 characters of
// [a-zA-Z0-9._-], and not "." or "..". The restricted alphabet also keeps
// names safe inside storage keys ('#' and '/' can never appear).
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return Invalid("name", "topic name is empty")
	case len(name) > MaxTopicNameLength:
		return Invalid("name", "topic name is %d characters, more than %d", len(name), MaxTopicNameLength)
	case name == "." || name == "..":
		return Invalid("name", "topic name cannot be %q", name)
	}
	for i := 0; i < len(name); i++ {
		if !isNameByte(name[i]) {
			return Invalid("name", "topic name %q has %q at byte %d; allowed are [a-zA-Z0-9._-]", name, name[i], i)
		}
	}
	return nil
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// ValidateID checks an owner, bookie or writer id: 1..MaxIDLength bytes of
// [a-zA-Z0-9._:@-] — enough for host:port, UUIDs and pod names, and safe
// inside storage keys.
func ValidateID(field, id string) error {
	if id == "" {
		return Invalid(field, "is empty")
	}
	if len(id) > MaxIDLength {
		return Invalid(field, "is %d bytes, more than %d", len(id), MaxIDLength)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !isNameByte(c) && c != ':' && c != '@' {
			return Invalid(field, "%q has %q at byte %d; allowed are [a-zA-Z0-9._:@-]", id, c, i)
		}
	}
	return nil
}

// ValidateAddress checks a network address: 1..MaxAddressLength bytes of
// printable UTF-8 without spaces. It is not resolved.
func ValidateAddress(field, addr string) error {
	if addr == "" {
		return Invalid(field, "is empty")
	}
	if len(addr) > MaxAddressLength {
		return Invalid(field, "is %d bytes, more than %d", len(addr), MaxAddressLength)
	}
	return validatePrintable(field, addr)
}

func validatePrintable(field, s string) error {
	if !utf8.ValidString(s) {
		return Invalid(field, "is not valid UTF-8")
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return Invalid(field, "%q contains a space or control character", s)
		}
	}
	return nil
}

// ValidatePartitionIndex checks that p can be a partition index at all; whether
// the topic has that many partitions is the store's ErrNotFound.
func ValidatePartitionIndex(p int) error {
	if p < 0 || p >= MaxPartitions {
		return Invalid("partition", "%d is outside [0, %d)", p, MaxPartitions)
	}
	return nil
}

// ValidateTTL checks a heartbeat TTL against [MinHeartbeatTTL, MaxHeartbeatTTL].
func ValidateTTL(ttl time.Duration) error {
	if ttl < MinHeartbeatTTL || ttl > MaxHeartbeatTTL {
		return Invalid("ttl", "%v is outside [%v, %v]", ttl, MinHeartbeatTTL, MaxHeartbeatTTL)
	}
	return nil
}

// LedgerIDs checks a GetLedgers call's ids and returns them sorted, each
// once.
func LedgerIDs(ids []LedgerID) ([]LedgerID, error) {
	if len(ids) > MaxPageSize {
		return nil, Invalid("ids", "%d ids, at most %d per call", len(ids), MaxPageSize)
	}
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// PageLimit resolves a List call's limit: 0 means DefaultPageSize; otherwise
// it must be in [1, MaxPageSize].
func PageLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultPageSize, nil
	case limit < 0 || limit > MaxPageSize:
		return 0, Invalid("limit", "%d is outside [1, %d] (0 means %d)", limit, MaxPageSize, DefaultPageSize)
	}
	return limit, nil
}

package ledger

// Test-only switches that remove a safety measure, so the simulation can
// show it catches the bug each one prevents. Production code cannot reach
// them: they exist only in test builds.

// UnsafeNoReadFence makes recovery reads skip the fence flag (BookKeeper
// before PR #2616).
func UnsafeNoReadFence(c *Config) { c.unsafe.noReadFence = true }

// UnsafeReadBelowSegment makes recovery start at the highest LAC + 1 even
// below the last segment's first entry (BookKeeper before PR #2654).
func UnsafeReadBelowSegment(c *Config) { c.unsafe.readBelowSegment = true }

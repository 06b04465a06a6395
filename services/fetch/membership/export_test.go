package membership

// Test-only access for the simulation (package membership_test), and
// switches that remove a safety rule so the simulation can show it catches
// the bug each one prevents. Production code cannot reach them: they exist
// only in test builds.

// Check verifies the invariants the machine can check alone.
func (m *Member) Check() error { return m.check() }

// HeldLeases returns every lease held, revoking ones included.
func (m *Member) HeldLeases() map[Key]Held {
	out := make(map[Key]Held, len(m.leases))
	for k := range m.leases {
		out[k], _ = m.Lease(k)
	}
	return out
}

// UnsafeKeepLeasesWhenForgotten makes MemberForgotten keep the leases
// instead of dropping them as lost.
func UnsafeKeepLeasesWhenForgotten(c *Config) { c.unsafe.keepLeasesWhenForgotten = true }

// UnsafeBeatAtAnswer makes liveness count from a heartbeat's answer
// instead of from when it was sent.
func UnsafeBeatAtAnswer(c *Config) { c.unsafe.beatAtAnswer = true }

// UnsafeKeepStrays makes a view's strays count as the member's, neither
// released nor acquired.
func UnsafeKeepStrays(c *Config) { c.unsafe.keepStrays = true }

// UnsafeFollowKept makes a lease the store gave back at an epoch the view
// showed be followed instead of released.
func UnsafeFollowKept(c *Config) { c.unsafe.followKept = true }

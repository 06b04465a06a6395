// Package assign decides which partition leases of one topic a consumer
// group member should acquire and which it should release: cooperative
// balancing with no global barrier, no leader and no generation
// (docs/DESIGN.md §2.6): members acquire up to their fair share, release
// extras and take expired leases.
//
// Every balancing round (fetch's Config.BalanceInterval) a member reads the
// group's live members subscribed to the topic (bookkeeping ListMembers) and
// the topic's leases (ListLeases), calls [Decide], and carries out the
// [Plan] with Acquire and Release. Members never talk to each other; each
// runs the same pure function on (nearly) the same view, and the lease
// store's compare-and-set settles the races that remain.
//
// The package is pure: no I/O, no goroutines, no clock. Decide is
// deterministic and does not depend on the order of its inputs.
//
// # Rules
//
// Let P be the topic's partition count and n the number of live members,
// sorted by id. The member at index i has the share P/n, plus one if
// i < P%n ([Share]). Shares depend on membership alone, not on who holds
// what, so every member that sees the same members computes the same shares
// for everyone, and they add up to P. A partition is free when it has no
// owner or its owner is not among the live members — the lease of a member
// that left or expired is taken over ("stolen") without waiting for it.
//
//   - Holding more than my share: release the extras, the highest-numbered
//     partitions I hold first, at most MaxReleasePerRound. Because shares add
//     up to P, a member above its share implies one below it, so a release
//     is never wasted.
//   - Holding less: acquire free partitions up to my share, at most
//     MaxAcquirePerRound, from my slot of the free list (below).
//   - At my share: nothing. A plan never both acquires and releases, and
//     never names a partition that, in the view, a live member other than
//     me holds.
//   - Not a live member myself: my share is 0, so I release whatever the
//     view says I hold (still at most MaxReleasePerRound a round) and
//     acquire nothing.
//
// # Slots: why members acquiring at once rarely collide
//
// Each member can see from the view how far below its share every other
// member is. Walking the members in id order, each takes the next
// min(shortfall, MaxAcquirePerRound) partitions of the ascending list of
// free partitions; my slot starts after the slots of the members before me.
// When the members' views agree the slots are disjoint, so nobody races.
// When my slot begins past the end of the free list, the partitions I am
// owed are still held by members above their share: I wait a round for
// their releases rather than race the members ahead of me.
//
// The obvious alternative — start at a fixed position such as i·P/n — does
// as well when every partition is free (the slots are then the blocks of
// consecutive shares) but not after a crash: the dead member's partitions
// are one run of free partitions, every survivor's start lies before or
// after it, and they all converge on its first few partitions. With slots
// the run is split among them.
//
// # Safety does not rest on this package
//
// Exclusive ownership and fencing are the lease store's job: Acquire takes a
// lease only if it is free and bumps its epoch; commits carry the epoch. A
// plan made from a stale view is harmless: an Acquire of a partition someone
// took meanwhile fails with ErrLeaseHeld, a Release of a lease no longer
// held is fenced. The caller treats both as expected outcomes and plans
// again next round.
//
// # Why it converges
//
// Once membership stops changing:
//
//  1. Within a round every view shows the final membership, so all members
//     agree on the shares.
//  2. A member's view of its own leases is exact: the store gives
//     read-your-writes (ListLeases sees every write acknowledged before it
//     started), and nobody else can take a live member's lease. So a member
//     never acquires past its share nor releases below it: each member's
//     count moves monotonically towards its share.
//  3. The extras are released within ceil(extras/MaxReleasePerRound) rounds.
//     From then on the free partitions number exactly the total shortfall,
//     and only members below their share take them.
//  4. Every round the first member below its share (in id order) has slot 0
//     in a current view: it acquires min(shortfall, MaxAcquirePerRound,
//     free) partitions free in its view, and whichever member gets each of
//     them, the total shortfall shrinks. With agreeing views all members
//     below their share fill their slots in the same round.
//  5. Balanced is a fixed point: every member at its share plans nothing,
//     however stale the rest of its view.
//
// So the assignment is balanced after about ceil(P/MaxReleasePerRound) +
// ceil(P/MaxAcquirePerRound) rounds, plus a few for views that are a round
// old (the first round may act on the old membership; a release is seen by
// everyone two rounds later) and for the occasional collision.
//
// The property test (sim_test.go) checks this against a model of the lease
// store: up to 8 members joining, leaving, crashing and expiring, each
// planning on a snapshot taken some steps earlier, their operations
// interleaved at random. After every step it checks that at most one live
// member believes it holds a partition and that epochs strictly increase
// with every change of owner; after membership stops changing it checks the
// assignment is balanced within ceil(P/MaxReleasePerRound) +
// ceil(P/MaxAcquirePerRound) + 6 rounds and then stays put. The same test
// shows each check failing on a broken planner or store.
//
// # For the caller
//
// A planned Release may take a while (commit on revoke, fetch's
// RevokeTimeout); the next rounds plan the same partitions again, because
// the highest-numbered extras do not change, so the caller should skip
// releases already under way. Members lists only the members subscribed to
// the topic, since shares are per topic.
//
// Cost: O(n log n + P) time and O(n + P) memory per Decide.
package assign

package membership

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// Event is an input to the machine: an answer of the store (or of the
// catalog) to an action, the passing of time (Tick), or a call of the
// member's owner (RevokeDone, Advance, Leave).
//
// The coordinator's events come in a cycle the machine's phase names
// (member.go): Tick starts it; each action that asks for an answer gets
// exactly one of the events listed on it. RevokeDone, Advance and Leave
// may come at any time, from any goroutine of the owner (under the
// wrapper's lock).
type Event interface {
	fmt.Stringer
	isEvent()
}

// Joined: the store accepted a Join (the first, or the re-join SendJoin
// asked for). Sent is when the request was sent: the store renews the
// member for a session timeout from a moment after it, so liveness counts
// from Sent. Now is when the answer came.
type Joined struct{ Sent, Now time.Time }

// JoinFailed: a Join failed. Before the first Joined it changes nothing
// (the owner retries or gives up); after SendJoin the round runs anyway,
// and the next Tick heartbeats (and so re-joins) again.
type JoinFailed struct {
	Err error
	Now time.Time
}

// Tick: the balancing interval passed (the coordinator's ticker); Now is
// the wrapper's clock. Taken only between cycles.
type Tick struct{ Now time.Time }

// HeartbeatOK: the store renewed the member (answer to SendHeartbeat).
// Sent and Now as for Joined.
type HeartbeatOK struct{ Sent, Now time.Time }

// HeartbeatFailed: the heartbeat failed for a reason other than the store
// not knowing the member (answer to SendHeartbeat); the round runs anyway.
type HeartbeatFailed struct {
	Err error
	Now time.Time
}

// MemberForgotten: the store no longer lists the member (bookkeeping's
// ErrNotFound to SendHeartbeat): its session expired, so other members may
// hold its leases by now.
type MemberForgotten struct{}

// MembersListed: the group's live members (answer to ListMembers).
type MembersListed struct{ Members []bookkeeping.Member }

// MembersFailed: ListMembers failed; the round ends.
type MembersFailed struct{ Err error }

// TopicView: the store's leases of a topic (answer to ReadTopic).
// Partitions is the topic's partition count; Leases are ListLeases's
// records, with offsets of another topic incarnation already forgotten
// (NoOffset). Records of partitions at or beyond Partitions are ignored.
// Now is the wrapper's clock (revoke deadlines count from it).
type TopicView struct {
	Topic      string
	Partitions int32
	Leases     []bookkeeping.Lease
	Now        time.Time
}

// TopicFailed: reading the topic or its leases failed (answer to
// ReadTopic); the round goes on with the next topic.
type TopicFailed struct {
	Topic string
	Err   error
}

// LeaseAcquired: the store gave the member the lease at Epoch, and work
// on it starts at Offset (the committed offset, or where the member's
// start position resolved). One of the three answers per partition of
// Acquire. An Epoch no higher than the round's view showed means the
// store had the lease under the member already (a stray whose release
// failed): it is released, not followed (package doc, "Strays").
type LeaseAcquired struct {
	Key
	Epoch  int64
	Offset int64
}

// AcquireHeld: another live member holds the lease
// (bookkeeping.ErrLeaseHeld): the view was stale. Not an error of the
// round.
type AcquireHeld struct{ Key }

// AcquireFailed: the acquisition failed (the store, or resolving the start
// offset; a lease taken for it was given back by the wrapper).
type AcquireFailed struct {
	Key
	Err error
}

// RevokeDone: the owner is done with a revoked lease — its commit was
// stored, or its worker ended — so it can be released now. Ignored for a
// lease that is not held or not revoked.
type RevokeDone struct{ Key }

// Advance: the owner moved its position in a held lease from From to To
// (a session delivered records, or skipped below the log start). Applied
// only while the lease is held at Epoch with Next == From; the owner
// checks with Lease first if it needs to know.
type Advance struct {
	Key
	Epoch    int64
	From, To int64
}

// Leave: the owner ends the membership; every lease is dropped and the
// member leaves the group. The machine then ignores every event.
type Leave struct{}

func (Joined) isEvent()          {}
func (JoinFailed) isEvent()      {}
func (Tick) isEvent()            {}
func (HeartbeatOK) isEvent()     {}
func (HeartbeatFailed) isEvent() {}
func (MemberForgotten) isEvent() {}
func (MembersListed) isEvent()   {}
func (MembersFailed) isEvent()   {}
func (TopicView) isEvent()       {}
func (TopicFailed) isEvent()     {}
func (LeaseAcquired) isEvent()   {}
func (AcquireHeld) isEvent()     {}
func (AcquireFailed) isEvent()   {}
func (RevokeDone) isEvent()      {}
func (Advance) isEvent()         {}
func (Leave) isEvent()           {}

func (e Joined) String() string {
	return fmt.Sprintf("joined sent=%s now=%s", clock(e.Sent), clock(e.Now))
}
func (e JoinFailed) String() string { return fmt.Sprintf("join-failed %v", e.Err) }
func (e Tick) String() string       { return "tick " + clock(e.Now) }
func (e HeartbeatOK) String() string {
	return fmt.Sprintf("heartbeat-ok sent=%s now=%s", clock(e.Sent), clock(e.Now))
}
func (e HeartbeatFailed) String() string {
	return fmt.Sprintf("heartbeat-failed %v", e.Err)
}
func (MemberForgotten) String() string { return "member-forgotten" }
func (e MembersListed) String() string {
	var b strings.Builder
	b.WriteString("members")
	for _, m := range e.Members {
		fmt.Fprintf(&b, " %s:%s", m.ID, strings.Join(m.Topics, ","))
	}
	return b.String()
}
func (e MembersFailed) String() string { return fmt.Sprintf("members-failed %v", e.Err) }
func (e TopicView) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "view %s partitions=%d", e.Topic, e.Partitions)
	for _, l := range e.Leases {
		fmt.Fprintf(&b, " %s", storedString(l))
	}
	return b.String()
}
func (e TopicFailed) String() string { return fmt.Sprintf("view-failed %s %v", e.Topic, e.Err) }
func (e LeaseAcquired) String() string {
	return fmt.Sprintf("acquired %v e%d at %d", e.Key, e.Epoch, e.Offset)
}
func (e AcquireHeld) String() string   { return fmt.Sprintf("acquire-held %v", e.Key) }
func (e AcquireFailed) String() string { return fmt.Sprintf("acquire-failed %v %v", e.Key, e.Err) }
func (e RevokeDone) String() string    { return fmt.Sprintf("revoke-done %v", e.Key) }
func (e Advance) String() string {
	return fmt.Sprintf("advance %v e%d %d->%d", e.Key, e.Epoch, e.From, e.To)
}
func (Leave) String() string { return "leave" }

// storedString is a stored lease as "p:owner@epoch" (owner "-" when free),
// with "/offset" when one is committed.
func storedString(l bookkeeping.Lease) string {
	owner := l.Owner
	if owner == "" {
		owner = "-"
	}
	s := fmt.Sprintf("%d:%s@%d", l.Partition, owner, l.Epoch)
	if l.Offset != bookkeeping.NoOffset {
		s += fmt.Sprintf("/%d", l.Offset)
	}
	return s
}

// clock shows a time as the Unix time in seconds (transcripts start their
// clock at zero).
func clock(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return time.Duration(t.UnixNano()).String()
}

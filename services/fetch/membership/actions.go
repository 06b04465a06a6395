package membership

import (
	"fmt"
	"strings"
)

// Action is an output of the machine. The wrapper carries out a step's
// actions in the order returned, in two kinds:
//
//   - hooks — Follow, Unfollow, Announce — change what the owner works on
//     and tells its client. The wrapper runs them at once, under the same
//     lock as the step, so the leases and what the owner was told change
//     together (a session sends no record of a partition before the event
//     that assigns it, and none after the one that takes it away);
//   - requests — SendHeartbeat, SendJoin, ListMembers, ReadTopic, Acquire,
//     ReleaseLease, LeaveGroup — are I/O, carried out after the lock is
//     released; RoundDone only reports.
//
// At most one action of a step asks for an answer (SendHeartbeat,
// SendJoin, ListMembers, ReadTopic, Acquire), and it is the step's last.
type Action interface {
	fmt.Stringer
	isAction()
}

// Follow: start the owner's work on a lease just acquired (a session
// delivers it; a trigger runner starts a worker), from Lease.Offset.
type Follow struct{ Lease Lease }

// Unfollow: stop the owner's work on a lease (revoked, lost, or leaving).
type Unfollow struct{ Key Key }

// Announce: tell the owner's client how one topic's assignment changed.
// Without Lost: Added were just acquired (and followed), Revoked are kept
// until committed or RevokeTimeout. With Lost: Revoked are already gone
// (another member may hold them); Added is empty.
type Announce struct {
	Added, Revoked []Lease
	Lost           bool
}

// SendHeartbeat: renew the member in the store (bookkeeping Heartbeat);
// answer HeartbeatOK, MemberForgotten (ErrNotFound) or HeartbeatFailed.
type SendHeartbeat struct{}

// SendJoin: join the group again after MemberForgotten; answer Joined or
// JoinFailed.
type SendJoin struct{}

// ListMembers: start a balancing round by listing the group's live
// members; answer MembersListed or MembersFailed.
type ListMembers struct{}

// ReadTopic: read Topic's partition count and its leases in the store;
// answer TopicView or TopicFailed.
type ReadTopic struct{ Topic string }

// Acquire: take the leases of Topic's partitions in Want (bookkeeping
// Acquire, which bumps the epoch of a free lease, and gives one the member
// holds already back at its epoch: the machine then releases it) and
// resolve where work on each starts. Answer each partition with
// LeaseAcquired, AcquireHeld or AcquireFailed, in any order; the topic's
// changes are announced after the last answer.
type Acquire struct {
	Topic string
	Want  []Want
}

// Want is one partition to acquire, with its committed offset in the view
// (bookkeeping.NoOffset: none, so work starts at the member's start
// position).
type Want struct {
	Partition int32
	Committed int64
}

// ReleaseLease: give the lease of Key at Epoch back to the store
// (bookkeeping Release); no answer. The machine already forgot the lease.
type ReleaseLease struct {
	Key   Key
	Epoch int64
}

// LeaveGroup: end the membership in the store (bookkeeping Leave), so the
// member's leases are free at once; no answer.
type LeaveGroup struct{}

// RoundDone: the balancing round ended; Err joins what failed in it (nil:
// nothing). For the wrapper's log only.
type RoundDone struct{ Err error }

func (Follow) isAction()        {}
func (Unfollow) isAction()      {}
func (Announce) isAction()      {}
func (SendHeartbeat) isAction() {}
func (SendJoin) isAction()      {}
func (ListMembers) isAction()   {}
func (ReadTopic) isAction()     {}
func (Acquire) isAction()       {}
func (ReleaseLease) isAction()  {}
func (LeaveGroup) isAction()    {}
func (RoundDone) isAction()     {}

func (a Follow) String() string   { return "follow " + a.Lease.String() }
func (a Unfollow) String() string { return fmt.Sprintf("unfollow %v", a.Key) }
func (a Announce) String() string {
	if a.Lost {
		return "announce lost=" + leaseList(a.Revoked)
	}
	return fmt.Sprintf("announce added=%s revoked=%s", leaseList(a.Added), leaseList(a.Revoked))
}
func (SendHeartbeat) String() string { return "send-heartbeat" }
func (SendJoin) String() string      { return "send-join" }
func (ListMembers) String() string   { return "list-members" }
func (a ReadTopic) String() string   { return "read-topic " + a.Topic }
func (a Acquire) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "acquire %s", a.Topic)
	for _, w := range a.Want {
		if w.Committed >= 0 {
			fmt.Fprintf(&b, " %d(committed %d)", w.Partition, w.Committed)
		} else {
			fmt.Fprintf(&b, " %d", w.Partition)
		}
	}
	return b.String()
}
func (a ReleaseLease) String() string { return fmt.Sprintf("release %v e%d", a.Key, a.Epoch) }
func (LeaveGroup) String() string     { return "leave-group" }
func (a RoundDone) String() string {
	if a.Err != nil {
		return fmt.Sprintf("round-done: %v", a.Err)
	}
	return "round-done"
}

func leaseList(ls []Lease) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = l.String()
	}
	return "[" + strings.Join(s, ", ") + "]"
}

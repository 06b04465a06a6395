// Package membership is a consumer group member's protocol logic as a
// pure, deterministic state machine, in the style of bookkeeper/ledger:
// the member's life in the group store (join, heartbeat, re-join after the
// store forgot it, leave) and its balancing rounds (docs/DESIGN.md §2.6),
// which acquire its fair share of partition leases, revoke extras (kept
// until committed or RevokeTimeout), and notice leases that moved. Which
// partitions to move is services/fetch/assign's pure decision; this
// package carries it out. Nothing here does I/O, starts a goroutine or
// reads a clock: time comes in events (Tick, and the answers that carry
// it). services/fetch's member (member.go) is the wrapper: one
// coordinator goroutine feeds the machine the store's and the catalog's
// answers, carries out its actions and runs the owner's hooks; a Subscribe
// session and a trigger runner are its two owners.
//
// # The cycle
//
// Every balancing interval the coordinator feeds Tick{Now}. The machine
// answers with one cycle, each step asking for the next answer:
//
//	Tick ─► SendHeartbeat (when a third of the session timeout passed since the
//	   │       last one succeeded; retried every Tick while it fails)
//	   │      ├─ HeartbeatOK / HeartbeatFailed ─► round
//	   │      └─ MemberForgotten ─► drop every lease as lost ─► SendJoin
//	   │                              └─ Joined / JoinFailed ─► round
//	   └─► round: ReleaseLease for each revoked lease past its deadline,
//	       ListMembers ─► MembersListed ─► for each topic, in order:
//	         ReadTopic ─► TopicView: drop moved leases as lost; release
//	                      strays; assign.Decide; revoke extras (Unfollow);
//	                      Acquire the free share
//	                  ─► LeaseAcquired / AcquireHeld / AcquireFailed, one per
//	                     partition ─► after the last: release the kept,
//	                     Follow each acquired, Announce
//	       ─► RoundDone
//
// RevokeDone (a commit of a revoked lease stored; a trigger worker ended),
// Advance (the owner's position moved) and Leave may come at any time.
// Any other event out of turn is refused with ErrInvalidEvent.
//
// # Events and actions
//
//	event            from                      actions it can lead to
//	Joined           Join's answer             (first: none) round
//	JoinFailed       Join's answer             (first: none) round
//	Tick             the coordinator's ticker  SendHeartbeat | ReleaseLease…, ListMembers
//	HeartbeatOK      SendHeartbeat's answer    ReleaseLease…, ListMembers
//	HeartbeatFailed  SendHeartbeat's answer    ReleaseLease…, ListMembers
//	MemberForgotten  SendHeartbeat: ErrNotFound Unfollow…, Announce{Lost}…, SendJoin
//	MembersListed    ListMembers's answer      ReadTopic
//	MembersFailed    ListMembers's answer      RoundDone
//	TopicView        ReadTopic's answer        Unfollow…, Announce{Lost}, ReleaseLease…, Unfollow…, Acquire | …
//	TopicFailed      ReadTopic's answer        ReadTopic | RoundDone
//	LeaseAcquired    Acquire, per partition    (last:) ReleaseLease…, Follow…, Announce, ReadTopic | RoundDone
//	AcquireHeld      Acquire: ErrLeaseHeld     as LeaseAcquired
//	AcquireFailed    Acquire: other errors     as LeaseAcquired
//	RevokeDone       the owner                 ReleaseLease
//	Advance          the owner                 none
//	Leave            the owner                 Unfollow…, LeaveGroup
//
// Follow, Unfollow and Announce are hooks: the wrapper runs them under the
// lock it steps the machine under, so the leases and what the owner's
// client is told change together. The rest are requests, carried out
// after the lock is released (actions.go).
//
// # Invariants
//
// Written on the fields they constrain (member.go); the simulation
// (sim_test.go) checks them after every step, with several members
// sharing a model of the lease store:
//
//  1. A lease is followed iff the member holds it and is not revoking it;
//     Follow and the Announce that adds it come in the same step, as do
//     the Unfollow of a lost lease and the Announce that says so.
//  2. A revoked lease is released (ReleaseLease) on the owner's RevokeDone
//     or by the first round that starts after its deadline, RevokeTimeout
//     after the revoke; it is never followed again.
//  3. A member the store forgot holds no lease: MemberForgotten drops them
//     all, announcing them lost, before it joins again.
//  4. Live(now) — the store confirmed the member less than ¾ of its session
//     timeout ago, counted from when that Join or Heartbeat was sent —
//     implies every lease the member follows is still its own in the
//     store at the epoch it holds. So no partition is followed by two live
//     members at once, whatever the timing of the store's answers.
//  5. The member holds a lease only at an epoch the store gave it in
//     answer to its Acquire, higher than the epoch the round's view showed
//     for it (so higher than any its id held the lease at before: see
//     Strays), and a view that shows another owner or epoch drops the
//     lease first.
//  6. A stray — a lease the store names the member owner of, at an epoch
//     the machine does not hold — is released at its stored epoch by
//     every round that sees it, and is free in that round's plan. So once
//     the store answers again no partition stays with a live owner that
//     does not work on it.
//
// # Strays
//
// Three ways lead to a stray: an Acquire the store applied whose answer
// was lost; a start offset that failed after the Acquire (the wrapper gives
// the lease back) whose give-back failed too; and a re-join under the same
// member id after the store forgot the member (MemberForgotten dropped the
// leases, and the store names the member again as soon as it is live, for
// every lease nobody took meanwhile). A release of a revoked lease that
// failed leaves one as well. assign.Decide would count a stray as the
// member's own, so it would be neither acquired nor released, and nobody
// would work on the partition until the member left.
//
// The rule (view, answered in round.go): a round releases every stray at
// its stored epoch and counts it free in the plan, which may hand it to
// this member or leave it to another. bookkeeping's Acquire gives a
// lease the member already holds back at its epoch unchanged (a retried
// Acquire is harmless), so an Acquire answered at an epoch no higher than
// the view showed means the lease named the member already (the release
// failed, or the view showed it free while the member was not live): the
// lease is released again and not followed, and a later round acquires
// it at a new epoch (testdata/strays.txt shows each way and this one).
//
// Fencing stays sound: every epoch the member worked at came in an answer
// (LeaseAcquired) before the view was read, and epochs only grow, so an
// epoch above the view's is above all of them. Work of those epochs — a
// client told the lease was lost, a trigger worker still finishing — may
// still try to commit, and the store fences it: a commit must name the
// current epoch. Had the machine followed the lease at the epoch the
// store gave back, that older work's commit would pass (bookkeeping
// accepts a commit by the owner at its epoch, live or not). A release
// names its epoch, so it frees the stray and nothing acquired since.
//
// Re-joining under a fresh member id per incarnation was the alternative:
// it fences an older incarnation as well, but a session's member id is
// its client's (SessionStarted names it; the client's commits and Leave
// carry it; it routes them to the session's copy), so changing it in a
// session is a protocol change; and it covers only the re-join, not the
// lost answer or the failed give-back, which happen within one incarnation.
// Member ids stay unique per session and per trigger runner, as the store
// asks (fetch's routedID).
//
// # Testing
//
// testdata/*.txt are transcripts (events in, actions out) run by
// TestTranscripts; regenerate them with
// `go test ./services/fetch/membership -run Transcripts -rewrite` and
// review the diff; every step also checks the invariants the machine can
// check alone. TestSimulation runs up to five members over a seeded model
// of the lease store with random timing, failed and lost requests, late
// answers, pauses, crashes, leaves and joins (-seeds N for more, -seed N
// -v to replay one with its trace), checks the invariants above after
// every step, that a member never follows a partition at an epoch it
// followed it at before, and after the faults stop that every partition
// is followed by exactly one member (none orphaned: invariant 6).
// TestSimulationCatchesKeptLeases and TestSimulationCatchesBeatAtAnswer
// show it finding two live members on one partition once invariant 3's
// dropping, or invariant 4's counting from the sending, is switched off;
// TestSimulationCatchesStrays finds orphaned partitions once strays count
// as the member's (the behaviour before invariant 6), and
// TestSimulationCatchesFollowKept a lease followed again at an epoch its
// older work holds once a lease given back at the view's epoch is
// followed (Config.unsafe, export_test.go).
//
// # Open point (today's behaviour, kept)
//
// Invariant 4 assumes only the member ends its own membership. fetch's
// Leave RPC, when it cannot reach the member's copy, leaves for it in the
// store, since its contract is that the leases are free when it returns;
// the member, if its copy still runs, stays Live and keeps following its
// leases until its next heartbeat (due a third of the session timeout
// after the last) finds it forgotten, while another member may already
// hold them. Commits stay fenced. Closing that window needs the RPC to
// wait for the member's liveness to run out, or to refuse while its copy
// cannot be reached: a change of the RPC's contract, not of this machine.
//
// # Files
//
//	doc.go         this overview
//	config.go      Config (and the test-only unsafe switches), Key, Lease, Held
//	events.go      Event and the events
//	actions.go     Action and the actions
//	member.go      Member: fields and invariants, Step, the heartbeat, forgetting, leaving, accessors, check
//	round.go       the balancing round: views, lost leases, Decide, revokes, acquisitions
//
// Tests: transcript_test.go (testdata/*.txt), sim_test.go, export_test.go
// (test-only access and the unsafe switches), race_test.go and
// norace_test.go (fewer seeds under the race detector).
package membership

// Package fault injects the faults of a chaos run into processes and
// links the harness itself started, on loopback only, and records each one
// in the run's history (op "fault") so a report shows what happened when.
//
// Three kinds of fault:
//
//   - Process faults (Proc): SIGKILL and restart on the same address and
//     data directory; SIGSTOP and SIGCONT (a pause: the process keeps its
//     sockets but answers nothing, like a long GC pause or a stalled VM).
//   - Link faults (Proxy): an in-process TCP proxy in front of a listener.
//     A process is told to advertise the proxy's address (a bookie's
//     --advertise), so every peer reaches it through the proxy; Cut closes
//     the proxied connections and refuses new ones, Blackhole keeps them
//     open but forwards nothing (a silent partition), Mute forwards the
//     requests but drops the answers (work done, replies lost), Heal
//     restores.
//   - The Injector ties them to a history.Recorder and a budget: every
//     injection is counted, bounded (Budget), and written down, failed
//     injections included.
//
// Everything here only ever touches what the harness started: a Proc
// signals only its own child's pid, a Proxy only its own connections.
//
// A proxy sits in front of a process; with Identify it also names the
// process behind each connection it accepts (from /proc), so SetFrom can
// cut, blackhole or mute one pair of processes ("ingest-2 from bookie 3")
// while every other peer still gets through. The target keeps its own
// outgoing links (a bookie's catalog heartbeat): an asymmetric partition in
// which the registry still thinks the bookie alive.
package fault

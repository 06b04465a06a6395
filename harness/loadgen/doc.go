// Package loadgen is Sluice's benchmark load generator: it runs workloads in
// the shape of the OpenMessaging Benchmark (OMB) against a messaging system
// through a small Driver interface, and reports OMB-style numbers — publish
// and end-to-end latency p50/p99/p99.9/max, throughput in msg/s and MiB/s —
// plus what OMB leaves out: the CPU the servers and the load generator spent,
// as MiB/s per server core and server CPU seconds per GiB. `sluice bench`
// is its command line; the drivers are in kafkadriver (Apache Kafka, via
// franz-go), memdriver (in-process loopback) and sluicedriver (Sluice:
// producers through the Go SDK, consumers as group sessions over the
// generated ConsumerService client).
//
// It is test support (harness/README.md): benchmark tooling that
// `sluice bench` exposes; nothing the services run imports it.
//
// # A run
//
//  1. Create the workload's topics under fresh names (prefix, workload,
//     random run id), start the consumers (one consumer group per
//     subscription, reading from the start), create the producers, and send
//     one probe message per producer, waiting for its acknowledgement, so
//     connection and metadata set-up stay out of the clock.
//  2. Warm up. With a fixed producerRate the producers run their schedule
//     from the start; with producerRate 0 the warm-up searches for the
//     maximum sustainable rate (rateSearch: grow by half while each 2 s
//     step keeps up, then back off below what was achieved and climb again
//     from 5% a step, doubling the step while steps keep up; a step keeps up
//     when producers end it within 100 ms of their schedule and
//     acknowledgements and deliveries reach 98% of the rate — counting as
//     reached, with transactionSize, the messages of the transactions open
//     at the step's end, which are acknowledged only when they commit; and
//     a producer waiting for its commit, which blocks it as Kafka's
//     commitTransaction does, as behind as it was when the commit began:
//     the wait is in the publish latency, and commits slower than the
//     schedule allows start further behind each time).
//  3. Measure for testDuration at the fixed or found rate. CPU is sampled at
//     the window's two ends: /proc/<pid>/stat utime+stime of every server
//     pid given (pid and start time, so a restarted server is noticed), and
//     getrusage for this process.
//  4. Drain: producers finish the window's schedule, then acknowledgements
//     and deliveries of the window's messages get until DrainTimeout after
//     the window. What is still missing is reported, never waited for
//     without bound. Topics are deleted.
//
// # Catch-up runs
//
// A workload with backlogDuration measures how fast consumers drain a
// backlog (the [fetch] and [bench] issues' catch-up scenario). The
// producers start on their fixed schedule with no consumer; after
// backlogDuration the consumers start, from the start of the topic, the
// measured window begins, and production goes on at the same rate. The
// runner samples the backlog (acknowledged messages × subscriptions minus
// deliveries) every 10 ms until it is at most 100 ms of production or 1%
// of the starting backlog, whichever is larger — then the consumers have
// caught up — or until the window ends. Result.CatchUp reports the backlog,
// the time to the first delivery (joining the group), the time to catch up
// from the consumers' start, and the read rate: deliveries over the time
// from the first delivery until caught up, as msg/s and as a multiple of
// the produce rate. End-to-end latencies of the window then include the
// wait behind the backlog, by design.
//
// # Recovery phases
//
// A workload with recoveryRate and recoveryDuration (overload tests, the
// [bench] issue's S5) goes on after the window: the producers drop what
// they had not sent of the window's schedule (it counts as not sent) and
// produce at recoveryRate for recoveryDuration. Its messages are counted
// per 100 ms of intended send time (recovery.go), and Result.Recovery
// reports when the first whole second began whose messages were all
// acknowledged within recoveryLatency (100 ms by default): the time the
// system, client buffers included, took to work off the overload. The
// window's numbers and the CPU window do not include the phase.
//
// # Counting, and why latency is honest
//
// Producers send on a fixed-rate Schedule: message k is due at
// start + k/rate, whatever happened before. The payload header (HeaderSize
// bytes) carries the message's *intended* send time, and both latencies are
// measured from it: publish latency until the driver's done callback,
// end-to-end latency until a consumer receives it. A producer that falls
// behind — because Send blocked on a full client buffer, or the system
// stalled — sends the overdue messages back to back, each still stamped
// with its own due time, so time spent queued in the load generator counts.
// This avoids coordinated omission, where a stalled system also stalls its
// load and only one slow sample is recorded.
//
// Latencies go into HDR histograms (1 µs to 1 h, 3 significant digits), one
// per producer and consumer, merged for the report. A message belongs to
// the measured window when its intended send time is inside it; its latency
// counts wherever it completes (in the window or during the drain).
// Throughput counts acknowledgements and deliveries that happen inside the
// window. A run is "sustained" when nothing failed or went missing and
// publish (and consume, per subscription) rates reached 95% of the target
// and producers ended the window less than a second behind schedule;
// otherwise Result.Notes say how it fell short.
//
// # File map
//
//	workload.go  Workload: YAML (OMB field names), defaults, Validate naming each field
//	driver.go    Driver, Producer, Consumer: the seam to the system under test
//	payload.go   the payload header (intended send time)
//	schedule.go  Schedule: fixed-rate due times, pure
//	search.go    rateSearch: the max-rate search, a pure state machine
//	latency.go   recorder (HDR histograms) and LatencySummary
//	cpu.go       /proc/<pid>/stat parsing, getrusage, server pid lists
//	run.go       Run: topics, consumers, phases, the rate search's windows, catch-up
//	produce.go   the producing side: pacing to the schedule, sending, recording deliveries
//	report.go    progress lines and the Result a run fills
//	result.go    Result, results.json and the markdown tables
//
// Producers and consumers must live in one process (they do): the intended
// send time is on this process's monotonic clock.
package loadgen

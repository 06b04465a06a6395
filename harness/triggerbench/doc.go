// Package triggerbench measures Sluice's function triggers end to end
// (issue 22's benchmark): a `sluice dev` process whose fetch service runs
// triggers against aws-lambda-go handlers under AWS's Runtime Interface
// Emulator (internal/lambdapool), driven from outside through the public
// API.
//
// Two workloads, each repeated:
//
//   - T1 throughput: N records are produced first to a topic of P
//     partitions; a trigger (batch size 100, starting at the earliest
//     record) then runs a no-op handler (internal/functions/recorder with
//     nothing to record). Measured from the trigger's creation until
//     DescribeTrigger shows no lag on any partition: records/s,
//     invocations/s (the sluice_trigger_invocations counter of /metrics:
//     those the function ran; throttled ones apart),
//     and the CPU time of the whole sluice dev process per invocation
//     (/proc; an upper bound for the fetch service's share: ingest, the
//     bookies and the catalog run in the same process).
//   - T2 latency: a trigger on a topic of P partitions runs the recorder,
//     which notes when each invocation started; records are produced at a
//     fixed rate (default 1,000 records/s, in requests of 10 every 10 ms),
//     each carrying its send time. Latency = handler start − send time,
//     per record: p50, p99, max.
//
// There is no peer in the run: Lambda's own Kafka event source mapping
// needs AWS, so the figures stand against the targets (≥ 20,000
// records/s at batch 100; p99 ≤ 100 ms at 1,000 records/s) rather than as
// ratios.
//
// The CI smoke (TestIntegrationTriggerBenchSmoke) runs both workloads once,
// small, and checks only that every record was handled; `task
// bench:triggers` runs the full version (TRIGGER_BENCH_FULL=1) and writes
// bench/results/<date>-triggers.
//
// It is test support (harness/README.md): the benchmark is the package's
// integration test, and the package has no code of its own.
package triggerbench

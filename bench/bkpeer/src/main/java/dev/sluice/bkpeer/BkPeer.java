package dev.sluice.bkpeer;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.HdrHistogram.Histogram;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.conf.ClientConfiguration;

/**
 * The Apache BookKeeper peer of {@code sluice bench ledger} (harness/ledgerbench): the same
 * four scenarios, with the same shapes, against BookKeeper bookies through the BookKeeper client.
 *
 * <p>Each writer is its own ledger (ensemble 3, write quorum 3, ack quorum 2, CRC32C digest) fed
 * by its own thread. A writer keeps at most {@code window} asyncAddEntry calls outstanding. For the
 * maximum-rate scenarios it sends whenever the window has room, and the latency runs from the
 * send. For the fixed-rate scenarios it follows an open-loop schedule (rate / writers per writer,
 * writers staggered), and the latency runs from the entry's intended send time, so an add that
 * waits behind a slow one is charged for the wait (no coordinated omission). An entry counts when
 * its intended send time falls in the measured window and it is acknowledged before the window
 * ends, as in ledgerbench. Latencies go into an HdrHistogram (microseconds, 3 significant digits).
 *
 * <p>Phases mirror {@code sluice bench ledger}: "max" runs 64k-max and 1k-max; "half" runs
 * 64k-half-rate (at --half-rate, half of the 64k-max entries/s) and 1k-5000/s; the script gives
 * each phase fresh bookies, as ledgerbench does. With --bk-pid the bookie JVM's CPU seconds over
 * each measured window are read from /proc/PID/stat (utime + stime).
 */
public final class BkPeer {
    record Scenario(String name, int entryBytes, int writers, int window, double rate,
                    double warmupSec, double durationSec) {}

    record Result(Scenario sc, long entries, double entriesPerSec, double mbPerSec,
                  long p50, long p99, long p999, long max, double cpuSec, double cpuSecPerGB,
                  long errors) {}

    /** Completions of one scenario: counted and recorded under the object's lock. */
    static final class Stats {
        final Histogram hist = new Histogram(TimeUnit.SECONDS.toMicros(60), 3);
        final long measureFrom;
        final long end;
        long entries;
        long errors;

        Stats(long measureFrom, long end) {
            this.measureFrom = measureFrom;
            this.end = end;
        }

        synchronized void complete(int rc, long intended, long done) {
            if (rc != BKException.Code.OK) {
                errors++;
                return;
            }
            if (intended >= measureFrom && done < end) {
                hist.recordValue(Math.min(hist.getHighestTrackableValue(), (done - intended) / 1000));
                entries++;
            }
        }

        synchronized void error() {
            errors++;
        }
    }

    public static void main(String[] args) throws Exception {
        String metadataUri = "zk+hierarchical://127.0.0.1:2181/ledgers";
        String phase = "all";
        String out = null;
        double warmup = 5;
        double duration = 20;
        double halfRate = 0;
        int bookies = 3;
        int waitSec = 60;
        long bkPid = 0;
        int clkTck = 100;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--metadata-uri" -> metadataUri = args[++i];
                case "--phase" -> phase = args[++i];
                case "--out" -> out = args[++i];
                case "--warmup" -> warmup = Double.parseDouble(args[++i]);
                case "--duration" -> duration = Double.parseDouble(args[++i]);
                case "--quick" -> { warmup = 0; duration = 2; }
                case "--half-rate" -> halfRate = Double.parseDouble(args[++i]);
                case "--bookies" -> bookies = Integer.parseInt(args[++i]);
                case "--wait" -> waitSec = Integer.parseInt(args[++i]);
                case "--bk-pid" -> bkPid = Long.parseLong(args[++i]);
                case "--clk-tck" -> clkTck = Integer.parseInt(args[++i]);
                default -> {
                    System.err.println("""
                        usage: BkPeer [--phase all|max|half] [--quick | --warmup S --duration S]
                                      [--half-rate ENTRIES_PER_S] [--out DIR] [--bk-pid PID --clk-tck N]
                                      [--metadata-uri zk+hierarchical://127.0.0.1:2181/ledgers]
                                      [--bookies 3 --wait 60]""");
                    System.exit(2);
                }
            }
        }

        ClientConfiguration conf = new ClientConfiguration();
        conf.setMetadataServiceUri(metadataUri);
        BookKeeper bk = new BookKeeper(conf);
        try {
            waitForBookies(bk, bookies, waitSec);
            System.out.printf(Locale.ROOT, "bkpeer: %d writable bookies, phase %s, %.0f s per scenario after %.0f s warm-up%n",
                bookies, phase, duration, warmup);
            List<Result> results = new ArrayList<>();
            if (phase.equals("all") || phase.equals("max")) {
                results.add(run(bk, new Scenario("64k-max", 64 << 10, 4, 16, 0, warmup, duration), bkPid, clkTck));
                results.add(run(bk, new Scenario("1k-max", 1 << 10, 8, 128, 0, warmup, duration), bkPid, clkTck));
                if (halfRate == 0) {
                    halfRate = results.get(0).entriesPerSec() / 2;
                }
            }
            if (phase.equals("all") || phase.equals("half")) {
                if (halfRate <= 0) {
                    throw new IllegalArgumentException("phase half needs --half-rate (half of 64k-max entries/s)");
                }
                results.add(run(bk, new Scenario("64k-half-rate", 64 << 10, 4, 64, halfRate, warmup, duration), bkPid, clkTck));
                results.add(run(bk, new Scenario("1k-5000/s", 1 << 10, 4, 256, 5000, warmup, duration), bkPid, clkTck));
            }
            String md = markdown(results);
            System.out.print(md);
            if (out != null) {
                Path dir = Path.of(out);
                Files.createDirectories(dir);
                Files.writeString(dir.resolve("bk-" + phase + ".md"), md, StandardCharsets.UTF_8);
                Files.writeString(dir.resolve("bk-" + phase + ".json"), json(results, metadataUri), StandardCharsets.UTF_8);
            }
        } finally {
            bk.close();
        }
    }

    /** Waits until at least n bookies registered as writable, for at most waitSec seconds. */
    static void waitForBookies(BookKeeper bk, int n, int waitSec) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(waitSec);
        int seen = 0;
        while (System.nanoTime() < deadline) {
            seen = bk.getMetadataClientDriver().getRegistrationClient().getWritableBookies()
                .get(5, TimeUnit.SECONDS).getValue().size();
            if (seen >= n) {
                return;
            }
            Thread.sleep(250);
        }
        throw new IllegalStateException("only " + seen + " of " + n + " bookies writable after " + waitSec + " s");
    }

    static Result run(BookKeeper bk, Scenario sc, long bkPid, int clkTck) throws Exception {
        List<LedgerHandle> ledgers = new ArrayList<>();
        for (int i = 0; i < sc.writers(); i++) {
            ledgers.add(bk.createLedger(3, 3, 2, BookKeeper.DigestType.CRC32C, "bench".getBytes(StandardCharsets.UTF_8)));
        }
        byte[] payload = new byte[sc.entryBytes()];
        for (int i = 0; i < payload.length; i++) {
            payload[i] = (byte) (i * 31);
        }
        long start = System.nanoTime();
        long measureFrom = start + (long) (sc.warmupSec() * 1e9);
        long end = measureFrom + (long) (sc.durationSec() * 1e9);
        Stats stats = new Stats(measureFrom, end);
        List<Semaphore> windows = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        // Per writer: entries/s = rate / writers, so one entry every writers / rate seconds.
        long interval = sc.rate() > 0 ? (long) (1e9 * sc.writers() / sc.rate()) : 0;
        for (int w = 0; w < sc.writers(); w++) {
            LedgerHandle lh = ledgers.get(w);
            Semaphore window = new Semaphore(sc.window());
            windows.add(window);
            long first = start + (long) w * interval / sc.writers();
            Thread t = new Thread(() -> write(lh, window, payload, interval, first, stats), sc.name() + "-w" + w);
            threads.add(t);
            t.start();
        }

        // Wake at the start of the measured window (CPU snapshot), once a second (progress) and at its end.
        double cpu0 = 0;
        boolean cpuTaken = false;
        long tick = start + TimeUnit.SECONDS.toNanos(1);
        while (true) {
            long now = System.nanoTime();
            if (!cpuTaken && now >= measureFrom) {
                cpu0 = cpuSeconds(bkPid, clkTck);
                cpuTaken = true;
            }
            if (now >= end) {
                break;
            }
            if (now >= tick) {
                tick += TimeUnit.SECONDS.toNanos(1);
                synchronized (stats) {
                    System.out.printf(Locale.ROOT, "  %s: %5.1fs  %d entries measured, %d errors%n",
                        sc.name(), (now - start) / 1e9, stats.entries, stats.errors);
                }
            }
            long wake = Math.min(tick, end);
            if (!cpuTaken) {
                wake = Math.min(wake, measureFrom);
            }
            LockSupport.parkNanos(wake - now);
        }
        double cpu1 = cpuSeconds(bkPid, clkTck);

        for (Thread t : threads) {
            t.interrupt();
        }
        for (Thread t : threads) {
            t.join(TimeUnit.SECONDS.toMillis(30));
        }
        // Let the outstanding adds finish (bounded) before closing the ledgers.
        for (Semaphore window : windows) {
            window.tryAcquire(sc.window(), 30, TimeUnit.SECONDS);
        }
        for (LedgerHandle lh : ledgers) {
            try {
                lh.closeAsync().get(30, TimeUnit.SECONDS);
            } catch (Exception e) {
                System.err.println("bkpeer: closing ledger " + lh.getId() + ": " + e);
            }
        }

        synchronized (stats) {
            double eps = stats.entries / sc.durationSec();
            double mbps = eps * sc.entryBytes() / 1e6;
            double gb = (double) stats.entries * sc.entryBytes() / 1e9;
            double cpu = bkPid > 0 ? cpu1 - cpu0 : 0;
            Histogram h = stats.hist;
            long n = h.getTotalCount();
            return new Result(sc, stats.entries, eps, mbps,
                n > 0 ? h.getValueAtPercentile(50) : 0, n > 0 ? h.getValueAtPercentile(99) : 0,
                n > 0 ? h.getValueAtPercentile(99.9) : 0, n > 0 ? h.getMaxValue() : 0,
                cpu, gb > 0 ? cpu / gb : 0, stats.errors);
        }
    }

    /** One writer's loop: until interrupted, wait for the schedule (fixed rate) and the window, then add. */
    static void write(LedgerHandle lh, Semaphore window, byte[] payload, long interval, long first, Stats stats) {
        long next = first;
        try {
            while (!Thread.currentThread().isInterrupted()) {
                long intended = 0;
                if (interval > 0) {
                    for (long d = next - System.nanoTime(); d > 0; d = next - System.nanoTime()) {
                        LockSupport.parkNanos(d);
                        if (Thread.currentThread().isInterrupted()) {
                            return;
                        }
                    }
                    intended = next;
                    next += interval;
                }
                window.acquire();
                if (intended == 0) {
                    intended = System.nanoTime();
                }
                long sent = intended;
                try {
                    lh.asyncAddEntry(payload, (rc, h, entryId, ctx) -> {
                        long done = System.nanoTime();
                        window.release();
                        stats.complete(rc, sent, done);
                    }, null);
                } catch (RuntimeException e) {
                    window.release();
                    stats.error();
                }
            }
        } catch (InterruptedException e) {
            // stopped
        }
    }

    /** utime + stime of a process, in seconds (fields 14 and 15 of /proc/PID/stat). */
    static double cpuSeconds(long pid, int clkTck) throws IOException {
        if (pid <= 0) {
            return 0;
        }
        String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        // f[0] is field 3 (state): utime is field 14, stime field 15.
        return (Long.parseLong(f[11]) + Long.parseLong(f[12])) / (double) clkTck;
    }

    static String size(int n) {
        return n >= 1024 && n % 1024 == 0 ? (n / 1024) + " KiB" : n + " B";
    }

    static String ms(long micros) {
        return String.format(Locale.ROOT, "%.2f ms", micros / 1000.0);
    }

    /** The same columns as ledgerbench.Markdown. */
    static String markdown(List<Result> results) {
        StringBuilder b = new StringBuilder();
        b.append("| scenario | entry | writers × window | target rate | entries/s | MB/s | add p50 | p99 | p99.9 | max | bookie CPU s/GB | errors |\n");
        b.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (Result r : results) {
            Scenario sc = r.sc();
            String rate = sc.rate() > 0 ? String.format(Locale.ROOT, "%.0f/s", sc.rate()) : "max";
            b.append(String.format(Locale.ROOT, "| %s | %s | %d × %d | %s | %.0f | %.1f | %s | %s | %s | %s | %.1f | %d |%n",
                sc.name(), size(sc.entryBytes()), sc.writers(), sc.window(), rate, r.entriesPerSec(), r.mbPerSec(),
                ms(r.p50()), ms(r.p99()), ms(r.p999()), ms(r.max()), r.cpuSecPerGB(), r.errors()));
        }
        return b.toString();
    }

    static String json(List<Result> results, String metadataUri) {
        StringBuilder b = new StringBuilder();
        b.append("{\n  \"system\": \"Apache BookKeeper ")
            .append(BookKeeper.class.getPackage().getImplementationVersion())
            .append("\",\n  \"metadataServiceUri\": \"").append(metadataUri)
            .append("\",\n  \"ledger\": {\"ensemble\": 3, \"writeQuorum\": 3, \"ackQuorum\": 2, \"digest\": \"CRC32C\"},\n")
            .append("  \"latencyUnit\": \"us\",\n  \"scenarios\": [\n");
        for (int i = 0; i < results.size(); i++) {
            Result r = results.get(i);
            Scenario sc = r.sc();
            b.append(String.format(Locale.ROOT,
                "    {\"name\": \"%s\", \"entryBytes\": %d, \"writers\": %d, \"window\": %d, \"rate\": %.1f, "
                    + "\"warmupSec\": %.1f, \"durationSec\": %.1f, \"entries\": %d, \"entriesPerSec\": %.1f, "
                    + "\"mbPerSec\": %.2f, \"p50\": %d, \"p99\": %d, \"p999\": %d, \"max\": %d, "
                    + "\"bookieCpuSec\": %.2f, \"cpuSecPerGB\": %.2f, \"errors\": %d}%s%n",
                sc.name(), sc.entryBytes(), sc.writers(), sc.window(), sc.rate(), sc.warmupSec(), sc.durationSec(),
                r.entries(), r.entriesPerSec(), r.mbPerSec(), r.p50(), r.p99(), r.p999(), r.max(),
                r.cpuSec(), r.cpuSecPerGB(), r.errors(), i + 1 < results.size() ? "," : ""));
        }
        b.append("  ]\n}\n");
        return b.toString();
    }

    private BkPeer() {}
}

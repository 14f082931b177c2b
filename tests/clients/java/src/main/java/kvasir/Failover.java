package kvasir;

import static kvasir.Harness.check;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import redis.clients.jedis.Connection;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.Transaction;
import redis.clients.jedis.exceptions.JedisMovedDataException;
import redis.clients.jedis.providers.ClusterConnectionProvider;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * Failover test of Kvasir with Jedis (JedisCluster); the same scenario as
 * {@code kvclient-go failover} (tests/clients/go/main.go), driven by
 * tests/python/test_cluster_clients.py:
 *
 * <pre>java -cp target/kvclient-java.jar kvasir.Failover PORT|HOST:PORT...</pre>
 *
 * Writes keys, prints "KILL host:port" (the master of a slot it wrote to) and
 * "READY", then waits for the line GO on stdin (the test kills that node
 * meanwhile). The same JedisCluster must then write to the killed node's slot
 * again: the time that takes is printed as "RECOVERY_SECONDS x" (the test
 * asserts on it). Every acknowledged write (before and after the kill) must
 * read back, and a final round must succeed without application-level
 * retries. Then it prints "RESTART" and waits for GO again (the test restarts
 * the node and waits for cluster_state:ok); while the restarted node takes
 * back its shards' leadership, writes and MULTI/EXEC on its slot must keep
 * succeeding, until the client routes the slot to that node again (within
 * 30 s); everything written reads back.
 *
 * Every line of the outcome starts with PASS or FAIL; the exit code is 1 if
 * any check failed. A watchdog ends the run after 180 s.
 */
public final class Failover {
    private static void info(String what) {
        System.out.println("      " + what);
    }

    public static void main(String[] args) {
        Set<HostAndPort> seeds = Harness.seeds(args, "java -cp kvclient-java.jar kvasir.Failover PORT|HOST:PORT...");
        Harness.watchdog(180, "failover: ");
        Harness.runAndExit("failover", () -> run(seeds));
    }

    // --- application-level retries -------------------------------------

    interface Op {
        void run() throws Exception;
    }

    /** Outcome of {@link #retrying}: last is null on success. */
    static final class Tries {
        int fails;
        Exception first;
        Exception last;
    }

    /** Runs op until it succeeds or the deadline (System.nanoTime()) passes,
     * pausing 50 ms after each failure. */
    static Tries retrying(long deadline, Op op) {
        Tries t = new Tries();
        for (;;) {
            try {
                op.run();
                t.last = null;
                return t;
            } catch (Exception e) {
                t.fails++;
                if (t.first == null) {
                    t.first = e;
                }
                t.last = e;
                if (System.nanoTime() >= deadline) {
                    return t;
                }
                sleep(50);
            }
        }
    }

    static long after(long millis) {
        return System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
    }

    static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The exception with its causes and suppressed exceptions (Jedis puts
     * the connection error that made it give up in there). */
    static String msg(Throwable e) {
        if (e == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder();
        describe(e, b, 0);
        return b.toString();
    }

    private static void describe(Throwable e, StringBuilder b, int depth) {
        b.append(e);
        if (depth >= 4) {
            return;
        }
        for (Throwable s : e.getSuppressed()) {
            b.append(" [suppressed: ");
            describe(s, b, depth + 1);
            b.append(']');
        }
        if (e.getCause() != null && e.getCause() != e) {
            b.append(" <- ");
            describe(e.getCause(), b, depth + 1);
        }
    }

    // --- stdin handshake --------------------------------------------------

    private static final LinkedBlockingQueue<String> STDIN = new LinkedBlockingQueue<>();

    static {
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    STDIN.add(line.trim());
                }
            } catch (Exception e) {
                // end of input
            }
            STDIN.add("<EOF>");
        });
        t.setDaemon(true);
        t.start();
    }

    /** Waits (at most 90 s) for the line GO on stdin, sent by the test once
     * it has done what the last printed line asked for. */
    static boolean waitGo(String after) {
        String line;
        try {
            line = STDIN.poll(90, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            line = null;
        }
        if (line == null) {
            return check(false, "no GO on stdin within 90s after " + after);
        }
        if (!"GO".equals(line)) {
            return check(false, "expected GO on stdin after " + after + ", got \"" + line + "\"");
        }
        return true;
    }

    // --- the scenario -----------------------------------------------------

    /** MULTI/EXEC of SETs on one slot, through the slot owner's connection:
     * JedisCluster.multi() is unsupported in Jedis 5 (see ClusterSmoke), so
     * the transaction runs outside JedisCluster's command executor, which is
     * what follows MOVED for ordinary commands. On a MOVED reply this does
     * what the executor would: re-read the slot map (else every retry would
     * go to the same former master), then fails so the caller retries. */
    static void txSet(JedisCluster jc, ClusterConnectionProvider provider, int slot, String[] keys, String value,
            boolean incrToo) {
        try (Connection c = jc.getConnectionFromSlot(slot)) {
            Transaction t = new Transaction(c);
            for (String k : keys) {
                t.set(k, value);
            }
            if (incrToo) {
                t.incr(keys[0] + ":n");
            }
            List<Object> res = t.exec();
            if (res == null) {
                throw new IllegalStateException("EXEC answered null (aborted)");
            }
            for (Object o : res) {
                if (o instanceof JedisMovedDataException) {
                    throw (JedisMovedDataException) o;
                }
                if (o instanceof Exception) {
                    throw new IllegalStateException("EXEC reply holds an error: " + o, (Exception) o);
                }
            }
        } catch (JedisMovedDataException e) {
            provider.renewSlotCache();
            throw e;
        }
    }

    private static void run(Set<HostAndPort> seeds) {
        DefaultJedisClientConfig config = DefaultJedisClientConfig.builder()
                .connectionTimeoutMillis(1000)
                .socketTimeoutMillis(3000)
                .build();
        // Built from its ClusterConnectionProvider (a public JedisCluster
        // constructor, what JedisCluster(seeds, config, ...) does inside) only
        // so the test can ask which node the client routes a slot to
        // (provider.getNode(slot)); the JedisCluster itself is the usual one.
        ClusterConnectionProvider provider = new ClusterConnectionProvider(seeds, config);
        // JedisCluster retries a command whose connection fails inside the
        // call, up to maxAttempts times within maxTotalRetriesDuration (the
        // two documented retry knobs; defaults 5 and soTimeout x maxAttempts,
        // here 15 s). Jedis 5.2's ClusterCommandExecutor re-reads the slot map
        // only after two consecutive connection failures, and first sleeps a
        // random time in [0, timeLeft / attemptsLeft^2]. If that re-read
        // happens during the election (Kvasir's CLUSTER SLOTS names the dead
        // node until a new leader is known, as Redis does until a replica is
        // promoted), the next two attempts fail again and the sleep before the
        // second re-read can be up to timeLeft / 1, i.e. almost the whole
        // 15 s. Measured with the defaults: recovery after 0.9, 1.25, 1.27,
        // 1.35, 6.1, 8.6, 14.1 and 14.6 s. The defaults fit Redis Cluster,
        // whose failover takes cluster-node-timeout (15 s by default); Kvasir
        // elects within about a second, so we give Jedis more, cheaper
        // attempts (a refused connection costs nothing) in a shorter budget:
        // the sleeps are then at most 5s/64, 5s/36, 5s/16 and 5s/4, so the
        // slot map is re-read several times in the first second (measured:
        // recovery after 0.5 to 1.5 s). A command whose attempts all fail
        // before the election ends gives up with "No more cluster attempts
        // left" and the application retries it with a fresh budget (counted
        // as failed attempts below). jedis issue #4154 reports the same slow
        // recovery against Redis Cluster.
        int maxAttempts = 10;
        Duration maxTotalRetriesDuration = Duration.ofSeconds(5);
        try (JedisCluster jc = new JedisCluster(provider, maxAttempts, maxTotalRetriesDuration)) {
            scenario(jc, provider);
        }
    }

    private static void scenario(JedisCluster jc, ClusterConnectionProvider provider) {
        final int n = 300;
        Map<String, String> acked = new LinkedHashMap<>();
        Exception firstErr = null;
        for (int i = 0; i < n; i++) {
            String k = "java:fo:before:" + i;
            String v = "b" + i;
            try {
                jc.set(k, v);
                acked.put(k, v);
            } catch (Exception e) {
                if (firstErr == null) {
                    firstErr = e;
                }
            }
        }
        if (!check(acked.size() == n, n + " writes before the kill (first error: " + msg(firstErr) + ")")) {
            return;
        }

        final String probe = "java:fo:before:0";
        final int probeSlot = JedisClusterCRC16.getSlot(probe);
        final HostAndPort victim = provider.getNode(probeSlot);
        if (!check(victim != null, "master of " + probe + "'s slot known (" + victim + ")")) {
            return;
        }
        info("slot " + probeSlot + " of " + probe + " is served by " + victim);
        int onVictim = 0;
        for (int i = 0; i < n; i++) {
            if (victim.equals(provider.getNode(JedisClusterCRC16.getSlot("java:fo:before:" + i)))) {
                onVictim++;
            }
        }
        info(onVictim + " of the " + n + " keys are on " + victim);
        System.out.println("KILL " + victim);
        System.out.println("READY");
        System.out.flush();
        if (!waitGo("the kill")) {
            return;
        }

        // The node is dead. Writes to its former slots must work again within
        // a few seconds on the same client object.
        long t0 = System.nanoTime();
        Tries r = retrying(after(15_000), () -> jc.set(probe, "after-kill"));
        double rec = (System.nanoTime() - t0) / 1e9;
        System.out.printf("RECOVERY_SECONDS %.3f%n", rec);
        if (!check(r.last == null, String.format(
                "write to slot %d (master killed) succeeds again after %.2fs (%d failed attempts; first error: %s; last: %s)",
                probeSlot, rec, r.fails, msg(r.first), msg(r.last)))) {
            return;
        }
        acked.put(probe, "after-kill");
        HostAndPort now = provider.getNode(probeSlot);
        info("slot " + probeSlot + " is now served by " + now);
        check(now != null && !now.equals(victim),
                "client routes slot " + probeSlot + " away from the killed node (now " + now + ")");

        // Writes over all slots, each retried by the application for a
        // bounded time: all must be acknowledged.
        long deadline = after(20_000);
        int totalFails = 0;
        Exception firstAfter = null;
        for (int i = 0; i < n; i++) {
            String k = "java:fo:after:" + i;
            String v = "a" + i;
            r = retrying(deadline, () -> jc.set(k, v));
            totalFails += r.fails;
            if (firstAfter == null) {
                firstAfter = r.first;
            }
            if (r.last != null) {
                check(false, "SET " + k + " never succeeded within the deadline: " + msg(r.last));
                return;
            }
            acked.put(k, v);
        }
        check(true, n + " writes after the kill acknowledged (" + totalFails
                + " attempts failed and were retried; first error: " + msg(firstAfter) + ")");

        // Every acknowledged write reads back.
        int lost = 0;
        List<String> lostEx = new ArrayList<>();
        int readFails = 0;
        for (Map.Entry<String, String> e : acked.entrySet()) {
            String[] got = new String[1];
            r = retrying(after(5_000), () -> got[0] = jc.get(e.getKey()));
            readFails += r.fails;
            if (r.last != null || !e.getValue().equals(got[0])) {
                lost++;
                if (lostEx.size() < 5) {
                    lostEx.add(e.getKey() + "=" + got[0] + " want " + e.getValue() + " (" + msg(r.last) + ")");
                }
            }
        }
        check(lost == 0, "all " + acked.size() + " acknowledged writes read back (" + lost + " missing or wrong: "
                + lostEx + "; " + readFails + " read attempts retried)");

        // Steady state: one more round must need no application retries.
        String steadyErr = null;
        for (int i = 0; i < 200 && steadyErr == null; i++) {
            String k = "java:fo:steady:" + i;
            try {
                jc.set(k, "s");
                String v = jc.get(k);
                if (!"s".equals(v)) {
                    steadyErr = "GET " + k + " = " + v;
                }
            } catch (Exception e) {
                steadyErr = k + ": " + msg(e);
            }
        }
        check(steadyErr == null, "200 SET+GET after recovery with no application retries (err=" + steadyErr + ")");
        info("masters after the kill: " + masters(provider));

        // The node comes back and, once caught up, takes back the leadership
        // of its preferred shards. Clients holding the old slot map are
        // redirected with MOVED (also at EXEC), and must follow without being
        // recreated.
        System.out.println("RESTART");
        System.out.flush();
        if (!waitGo("the restart")) {
            return;
        }
        long t1 = System.nanoTime();
        final String tag = "{" + probe + "}"; // hashes to probeSlot, the killed node's slot
        final String[] txKeys = {tag + ":a", tag + ":b"};
        boolean back = false;
        int round = 0;
        Map<String, String> written = new LinkedHashMap<>();
        int backFails = 0;
        Exception firstBackErr = null;
        while (System.nanoTime() - t1 < TimeUnit.SECONDS.toNanos(30)) {
            round++;
            long dl = after(15_000);
            for (int i = 0; i < 50; i++) {
                String k = "java:fo:back:" + round + ":" + i;
                String v = "r" + round;
                r = retrying(dl, () -> jc.set(k, v));
                backFails += r.fails;
                if (firstBackErr == null) {
                    firstBackErr = r.first;
                }
                if (r.last != null) {
                    check(false, "SET " + k + " during the leadership moves never succeeded: " + msg(r.last));
                    return;
                }
                written.put(k, v);
            }
            String v = "tx" + round;
            r = retrying(dl, () -> txSet(jc, provider, probeSlot, txKeys, v, false));
            backFails += r.fails;
            if (firstBackErr == null) {
                firstBackErr = r.first;
            }
            if (r.last != null) {
                check(false, "MULTI/EXEC on slot " + probeSlot + " during the leadership moves never succeeded: "
                        + msg(r.last));
                return;
            }
            written.put(txKeys[0], v);
            written.put(txKeys[1], v);
            if (victim.equals(provider.getNode(probeSlot))) {
                back = true;
                break;
            }
            sleep(200);
        }
        check(back, String.format("slot %d is led by the restarted node %s again (after %.2fs, %d rounds of writes)",
                probeSlot, victim, (System.nanoTime() - t1) / 1e9, round));
        check(true, (50 * round) + " writes and " + round + " MULTI/EXEC on slot " + probeSlot
                + " acknowledged while leadership moved back (" + backFails
                + " attempts retried by the application; first error: " + msg(firstBackErr) + ")");
        lost = 0;
        lostEx.clear();
        for (Map.Entry<String, String> e : written.entrySet()) {
            String got;
            try {
                got = jc.get(e.getKey());
            } catch (Exception ex) {
                got = "error: " + ex;
            }
            if (!e.getValue().equals(got)) {
                lost++;
                if (lostEx.size() < 5) {
                    lostEx.add(e.getKey() + "=" + got + " want " + e.getValue());
                }
            }
        }
        check(lost == 0, "all " + written.size() + " keys written around the restart read back (" + lost
                + " missing or wrong: " + lostEx + ")");

        // Wait for the remaining leadership moves to settle, then no retries.
        sleep(2000);
        steadyErr = null;
        for (int i = 0; i < 200 && steadyErr == null; i++) {
            try {
                jc.set("java:fo:steady2:" + i, "s");
            } catch (Exception e) {
                steadyErr = "SET java:fo:steady2:" + i + ": " + msg(e);
            }
        }
        if (steadyErr == null) {
            try {
                txSet(jc, provider, probeSlot, new String[] {txKeys[0]}, "final", true);
            } catch (Exception e) {
                steadyErr = "MULTI/EXEC: " + msg(e);
            }
        }
        check(steadyErr == null, "200 SET and a MULTI/EXEC after the restart with no application retries (err="
                + steadyErr + ")");
        info("masters after the restart: " + masters(provider));
    }

    /** The nodes the client routes some slot to. */
    static Set<String> masters(ClusterConnectionProvider provider) {
        Set<String> out = new TreeSet<>();
        for (int s = 0; s < 16384; s++) {
            HostAndPort h = provider.getNode(s);
            if (h != null) {
                out.add(h.toString());
            }
        }
        return out;
    }
}

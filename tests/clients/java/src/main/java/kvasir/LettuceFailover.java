package kvasir;

import static kvasir.Harness.check;

import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.sync.RedisAdvancedClusterCommands;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Failover test of Kvasir with Lettuce's cluster client (periodic and
 * adaptive topology refresh, as {@link LettuceSmoke#clusterClient}), the
 * scenario of {@link Failover} and {@code kvclient-go failover}, driven by
 * tests/python/test_lettuce.py:
 *
 * <pre>java -cp kvclient-java.jar kvasir.LettuceFailover PORT|HOST:PORT...</pre>
 *
 * Writes keys over every slot, prints "KILL host:port" (the master of the
 * first key's slot) and "READY", waits for GO (the test kills that node);
 * then writes to that slot again through the same client, retrying, and
 * prints "RECOVERY_SECONDS x" for the time to the first acknowledged write.
 * Every acknowledged write must read back. Prints "RESTART" and waits for
 * GO (the test restarts the node); writes to the slot must keep succeeding
 * (with retries within 10 s each) while the restarted node takes its shards
 * back, and everything reads back. A watchdog ends the run after 180 s.
 */
public final class LettuceFailover {
    public static void main(String[] args) {
        if (args.length == 0) {
            System.err.println("usage: LettuceFailover PORT|HOST:PORT...");
            System.exit(2);
        }
        Harness.watchdog(180, "lettuce failover: ");
        List<RedisURI> seeds = new ArrayList<>();
        for (String a : args) {
            String host = a.contains(":") ? a.substring(0, a.lastIndexOf(':')) : "127.0.0.1";
            int port = Integer.parseInt(a.substring(a.lastIndexOf(':') + 1));
            seeds.add(RedisURI.builder().withHost(host).withPort(port).withTimeout(Duration.ofSeconds(1)).build());
        }
        Harness.runAndExit("lettuce failover", () -> run(seeds));
    }

    private static void run(List<RedisURI> seeds) {
        // A short command timeout: a command sent to the dead node fails
        // fast and the loop below retries it, as an application would.
        RedisClusterClient client = LettuceSmoke.clusterClient(seeds, Duration.ofSeconds(1));
        Map<String, String> acked = new LinkedHashMap<>();
        try (StatefulRedisClusterConnection<String, String> conn = client.connect()) {
            RedisAdvancedClusterCommands<String, String> r = conn.sync();
            for (int i = 0; i < 200; i++) {
                String k = "lf:" + i;
                r.set(k, "before" + i);
                acked.put(k, "before" + i);
            }
            String key = "lf:0";
            int slot = SlotHash.getSlot(key);
            RedisClusterNode victim = client.getPartitions().getPartitionBySlot(slot);
            System.out.println("KILL " + victim.getUri().getHost() + ":" + victim.getUri().getPort());
            System.out.println("READY");
            System.out.flush();
            if (!Failover.waitGo("READY")) {
                return;
            }

            long killedAt = System.nanoTime();
            Failover.Tries t = Failover.retrying(Failover.after(30_000), () -> r.set(key, "after-kill"));
            double recovery = (System.nanoTime() - killedAt) / 1e9;
            if (check(t.last == null, "write to the killed node's slot " + slot + " succeeded again ("
                    + t.fails + " failed tries, first error: " + Failover.msg(t.first) + ")")) {
                acked.put(key, "after-kill");
                System.out.printf("RECOVERY_SECONDS %.2f%n", recovery);
                System.out.flush();
            } else {
                return;
            }
            checkAll(r, acked, "after the kill");

            System.out.println("RESTART");
            System.out.flush();
            if (!Failover.waitGo("RESTART")) {
                return;
            }
            int failedWrites = 0;
            int retriedWrites = 0;
            for (int i = 0; i < 40; i++) {
                String k = "{lf:0}:" + i;
                String v = "restart" + i;
                Failover.Tries w = Failover.retrying(Failover.after(10_000), () -> r.set(k, v));
                if (w.last == null) {
                    acked.put(k, v);
                    if (w.fails > 0) {
                        retriedWrites++;
                    }
                } else {
                    failedWrites++;
                }
                Failover.sleep(100);
            }
            check(failedWrites == 0, "40 writes to the slot while the restarted node takes its shards back ("
                    + failedWrites + " failed for 10 s, " + retriedWrites + " needed retries)");
            checkAll(r, acked, "after the restart");
        } finally {
            client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
        }
    }

    private static void checkAll(RedisAdvancedClusterCommands<String, String> r, Map<String, String> acked,
            String when) {
        int wrong = 0;
        String first = null;
        for (Map.Entry<String, String> e : acked.entrySet()) {
            Failover.Tries t = Failover.retrying(Failover.after(10_000), () -> {
                String got = r.get(e.getKey());
                if (!e.getValue().equals(got)) {
                    throw new IllegalStateException(e.getKey() + " = " + got + ", acknowledged " + e.getValue());
                }
            });
            if (t.last != null) {
                wrong++;
                if (first == null) {
                    first = Failover.msg(t.last);
                }
            }
        }
        check(wrong == 0, "every acknowledged write reads back " + when + " (" + acked.size() + " keys, "
                + wrong + " wrong; first: " + first + ")");
    }
}

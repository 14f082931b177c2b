package kvasir;

import static kvasir.Harness.check;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import redis.clients.jedis.ClusterPipeline;
import redis.clients.jedis.Connection;
import redis.clients.jedis.ConnectionPool;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.Response;
import redis.clients.jedis.Transaction;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * Cluster-client smoke test of Kvasir with Jedis (JedisCluster).
 *
 * <pre>java -jar target/kvclient-java.jar PORT|HOST:PORT...</pre>
 *
 * Checks: getClusterNodes() knows the 3 nodes, SET/GET of 1000 keys spread over
 * the slots, a ClusterPipeline over many slots, and a MULTI/EXEC transaction on
 * one slot. JedisCluster.multi() throws UnsupportedOperationException in every
 * Jedis release so far, so the transaction runs the way Jedis documents for a
 * cluster: a Transaction on the connection getConnectionFromSlot(slot) returns.
 * Prints PASS/FAIL lines; exits 1 if any check failed. A watchdog ends the run
 * after 60 s.
 */
public final class ClusterSmoke {
    public static void main(String[] args) {
        Set<HostAndPort> seeds = Harness.seeds(args, "java -jar kvclient-java.jar PORT|HOST:PORT...");
        Harness.watchdog(60, "");
        Harness.runAndExit("jedis", () -> run(seeds));
    }

    private static void run(Set<HostAndPort> seeds) {
        DefaultJedisClientConfig config = DefaultJedisClientConfig.builder()
                .connectionTimeoutMillis(2000)
                .socketTimeoutMillis(3000)
                .build();
        try (JedisCluster jc = new JedisCluster(seeds, config, 5)) {
            Map<String, ConnectionPool> nodes = jc.getClusterNodes();
            check(nodes.size() == 3, "getClusterNodes() has 3 nodes (got " + nodes.size() + ": " + nodes.keySet() + ")");

            final int n = 1000;
            String setErr = null;
            String getErr = null;
            for (int i = 0; i < n; i++) {
                String k = "java:basic:" + i;
                try {
                    String r = jc.set(k, "v" + i);
                    if (!"OK".equals(r) && setErr == null) {
                        setErr = "SET " + k + " answered " + r;
                    }
                } catch (Exception e) {
                    if (setErr == null) {
                        setErr = "SET " + k + ": " + e;
                    }
                }
            }
            for (int i = 0; i < n; i++) {
                String k = "java:basic:" + i;
                try {
                    String v = jc.get(k);
                    if (!("v" + i).equals(v) && getErr == null) {
                        getErr = "GET " + k + " = " + v;
                    }
                } catch (Exception e) {
                    if (getErr == null) {
                        getErr = "GET " + k + ": " + e;
                    }
                }
            }
            check(setErr == null, "SET " + n + " keys (first error: " + setErr + ")");
            check(getErr == null, "GET " + n + " keys read back (first error: " + getErr + ")");
            Set<Integer> slots = new HashSet<>();
            for (int i = 0; i < 100; i++) {
                slots.add(JedisClusterCRC16.getSlot("java:basic:" + i));
            }
            check(slots.size() >= 90, "keys spread over slots (" + slots.size() + " distinct slots in a sample of 100)");

            // ClusterPipeline: commands for many slots, sent per node.
            String pipeErr = null;
            try (ClusterPipeline p = jc.pipelined()) {
                List<Response<String>> sets = new ArrayList<>();
                List<Response<Long>> incrs = new ArrayList<>();
                List<Response<String>> gets = new ArrayList<>();
                for (int i = 0; i < 50; i++) {
                    sets.add(p.set("java:pipe:" + i, "p" + i));
                }
                for (int i = 0; i < 25; i++) {
                    incrs.add(p.incrBy("java:pipe:ctr:" + i, i + 1));
                }
                for (int i = 0; i < 25; i++) {
                    gets.add(p.get("java:basic:" + (i * 37)));
                }
                p.sync();
                for (int i = 0; i < 50 && pipeErr == null; i++) {
                    if (!"OK".equals(sets.get(i).get())) {
                        pipeErr = "SET reply " + i + " = " + sets.get(i).get();
                    }
                }
                for (int i = 0; i < 25 && pipeErr == null; i++) {
                    if (incrs.get(i).get() != i + 1) {
                        pipeErr = "INCRBY reply " + i + " = " + incrs.get(i).get();
                    }
                }
                for (int i = 0; i < 25 && pipeErr == null; i++) {
                    if (!("v" + (i * 37)).equals(gets.get(i).get())) {
                        pipeErr = "GET reply " + i + " = " + gets.get(i).get();
                    }
                }
            } catch (Exception e) {
                pipeErr = e.toString();
            }
            check(pipeErr == null, "ClusterPipeline of 100 commands over many slots (first error: " + pipeErr + ")");
            if (pipeErr == null) {
                String v = jc.get("java:pipe:49");
                check("p49".equals(v), "pipelined SET visible afterwards (java:pipe:49 = " + v + ")");
            }

            // MULTI/EXEC on one slot through the slot owner's connection.
            String tag = "{java:tx}";
            int slot = JedisClusterCRC16.getSlot(tag + ":a");
            List<Object> txReplies = null;
            String txErr = null;
            try (Connection c = jc.getConnectionFromSlot(slot)) {
                Transaction t = new Transaction(c);
                t.set(tag + ":a", "1");
                t.incrBy(tag + ":n", 5);
                t.rpush(tag + ":l", "x", "y");
                t.get(tag + ":a");
                txReplies = t.exec();
            } catch (Exception e) {
                txErr = e.toString();
            }
            String got = String.valueOf(txReplies);
            check(txErr == null && "[OK, 5, 2, 1]".equals(got),
                    "MULTI/EXEC on slot " + slot + " (replies " + got + ", error " + txErr + ")");
            String after = jc.get(tag + ":a") + " " + jc.get(tag + ":n") + " " + jc.lrange(tag + ":l", 0, -1);
            check("1 5 [x, y]".equals(after), "transaction effects visible afterwards (" + after + ")");

            // A transaction on one slot's connection that names a key of
            // another slot must not run there: the server refuses it
            // (MOVED, or CROSSSLOT / EXECABORT).
            String otherKey = "java:elsewhere";
            int otherSlot = JedisClusterCRC16.getSlot(otherKey);
            String crossOutcome;
            try (Connection c = jc.getConnectionFromSlot(slot)) {
                Transaction t = new Transaction(c);
                t.set(tag + ":b", "1");
                t.set(otherKey, "1");
                crossOutcome = "EXEC succeeded: " + t.exec();
            } catch (Exception e) {
                crossOutcome = null;
                System.out.println("      cross-slot transaction refused: " + e);
            }
            check(crossOutcome == null, "MULTI/EXEC naming slots " + slot + " and " + otherSlot
                    + " on one connection is refused (" + (crossOutcome == null ? "refused" : crossOutcome) + ")");
            String b = jc.get(tag + ":b");
            check(b == null, "nothing of the refused transaction was applied (" + tag + ":b = " + b + ")");
        }
    }
}

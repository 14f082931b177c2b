package kvasir;

import static kvasir.Harness.check;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.KeyValue;
import io.lettuce.core.LettuceFutures;
import io.lettuce.core.Range;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.ScanIterator;
import io.lettuce.core.ScoredValue;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.StreamMessage;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.TransactionResult;
import io.lettuce.core.XReadArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.async.RedisAdvancedClusterAsyncCommands;
import io.lettuce.core.cluster.api.sync.RedisAdvancedClusterCommands;
import io.lettuce.core.cluster.models.partitions.Partitions;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import io.lettuce.core.cluster.pubsub.StatefulRedisClusterPubSubConnection;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import io.lettuce.core.RedisURI;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * Kvasir with Lettuce (the client Spring Data Redis uses by default), which
 * speaks RESP3 whenever HELLO 3 works:
 *
 * <pre>java -cp kvclient-java.jar kvasir.LettuceSmoke standalone PORT
 * java -cp kvclient-java.jar kvasir.LettuceSmoke cluster PORT...</pre>
 *
 * Standalone: the RESP3 handshake, every data type's common commands and
 * their RESP3 replies, scripts, MULTI/EXEC with WATCH, a pipeline of 1,000
 * commands, pub/sub and a blocking pop. Cluster: Lettuce's topology from
 * CLUSTER NODES (3 masters, every slot covered), 1,000 keys over the slots,
 * the multi-slot commands Lettuce splits by slot (MGET, MSET, DEL), an async
 * pipeline over many slots, KEYS / DBSIZE / SCAN across the nodes, a
 * transaction on one slot's node, a script and cluster pub/sub. Prints
 * PASS/FAIL lines; exits 1 if any check failed. A watchdog ends the run
 * after 90 s.
 */
public final class LettuceSmoke {
    public static void main(String[] args) {
        if (args.length < 2 || !(args[0].equals("standalone") || args[0].equals("cluster"))) {
            System.err.println("usage: LettuceSmoke standalone PORT | cluster PORT...");
            System.exit(2);
        }
        Harness.watchdog(90, "lettuce " + args[0] + ": ");
        List<RedisURI> uris = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            String host = a.contains(":") ? a.substring(0, a.lastIndexOf(':')) : "127.0.0.1";
            int port = Integer.parseInt(a.substring(a.lastIndexOf(':') + 1));
            uris.add(RedisURI.builder().withHost(host).withPort(port).withTimeout(Duration.ofSeconds(5)).build());
        }
        if (args[0].equals("standalone")) {
            Harness.runAndExit("lettuce standalone", () -> standalone(uris.get(0)));
        } else {
            Harness.runAndExit("lettuce cluster", () -> cluster(uris));
        }
    }

    static <T> T await(RedisFuture<T> f) {
        try {
            return f.get(5, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    private static void standalone(RedisURI uri) {
        RedisClient client = RedisClient.create(uri);
        client.setOptions(ClientOptions.builder()
                .timeoutOptions(TimeoutOptions.enabled(Duration.ofSeconds(5)))
                .build());
        try (StatefulRedisConnection<String, String> conn = client.connect()) {
            RedisCommands<String, String> r = conn.sync();
            r.flushall();
            String info = r.clientInfo();
            check(info.contains("resp=3"), "Lettuce negotiated RESP3 with HELLO (CLIENT INFO: " + info.trim() + ")");

            check("OK".equals(r.set("s", "v")) && "v".equals(r.get("s")), "SET/GET");
            r.setex("ttl", 100, "x");
            long ttl = r.ttl("ttl");
            check(ttl > 90 && ttl <= 100, "SETEX then TTL (" + ttl + ")");
            check(r.incrby("n", 5) == 5 && r.incrbyfloat("f", 1.5) == 1.5, "INCRBY, INCRBYFLOAT");
            r.mset(Map.of("a", "1", "b", "2"));
            List<KeyValue<String, String>> mget = r.mget("a", "b", "missing");
            check(mget.size() == 3 && mget.get(0).getValue().equals("1") && !mget.get(2).hasValue(),
                    "MSET/MGET with a missing key (" + mget + ")");

            r.hset("h", Map.of("f1", "v1", "f2", "v2"));
            Map<String, String> h = r.hgetall("h");
            check(h.equals(Map.of("f1", "v1", "f2", "v2")), "HSET/HGETALL as a RESP3 map (" + h + ")");
            r.rpush("l", "x", "y", "z");
            check(r.lrange("l", 0, -1).equals(List.of("x", "y", "z")), "RPUSH/LRANGE");
            r.sadd("set", "m1", "m2");
            check(r.smembers("set").size() == 2 && r.sismember("set", "m1"), "SADD/SMEMBERS (a RESP3 set)/SISMEMBER");
            r.zadd("z", 1.5, "one", 2.25, "two");
            List<ScoredValue<String>> z = r.zrangeWithScores("z", 0, -1);
            check(z.size() == 2 && z.get(0).getScore() == 1.5 && z.get(1).getValue().equals("two"),
                    "ZADD/ZRANGE WITHSCORES with RESP3 doubles (" + z + ")");
            Double score = r.zscore("z", "two");
            check(score != null && score == 2.25, "ZSCORE (" + score + ")");

            String id = r.xadd("st", Map.of("k", "v"));
            List<StreamMessage<String, String>> range = r.xrange("st", Range.create("-", "+"));
            check(range.size() == 1 && range.get(0).getId().equals(id) && range.get(0).getBody().equals(Map.of("k", "v")),
                    "XADD/XRANGE (" + range + ")");
            r.xgroupCreate(XReadArgs.StreamOffset.from("st", "0"), "g");
            List<StreamMessage<String, String>> read = r.xreadgroup(io.lettuce.core.Consumer.from("g", "c1"),
                    XReadArgs.StreamOffset.lastConsumed("st"));
            check(read.size() == 1 && r.xack("st", "g", id) == 1, "XGROUP CREATE, XREADGROUP, XACK");

            List<Object> evald = r.eval("return {1, 'two', {3}}", ScriptOutputType.MULTI);
            check(evald.size() == 3 && evald.get(1).equals("two"), "EVAL returning nested tables (" + evald + ")");
            String sha = r.scriptLoad("return redis.call('GET', KEYS[1])");
            String viaSha = r.evalsha(sha, ScriptOutputType.VALUE, "s");
            check("v".equals(viaSha), "SCRIPT LOAD then EVALSHA (" + viaSha + ")");

            r.multi();
            r.set("tx", "1");
            r.incr("tx");
            TransactionResult tx = r.exec();
            check(!tx.wasDiscarded() && tx.size() == 2 && Long.valueOf(2).equals(tx.get(1)),
                    "MULTI/EXEC (" + tx + ")");
            r.watch("tx");
            try (StatefulRedisConnection<String, String> other = client.connect()) {
                other.sync().set("tx", "changed");
            }
            r.multi();
            r.set("tx", "mine");
            TransactionResult aborted = r.exec();
            check(aborted.wasDiscarded() && "changed".equals(r.get("tx")), "WATCH aborts EXEC after another client wrote");

            RedisAsyncCommands<String, String> async = conn.async();
            conn.setAutoFlushCommands(false);
            List<RedisFuture<?>> futures = new ArrayList<>();
            for (int i = 0; i < 1000; i++) {
                futures.add(async.set("p:" + i, "v" + i));
            }
            conn.flushCommands();
            conn.setAutoFlushCommands(true);
            boolean done = LettuceFutures.awaitAll(Duration.ofSeconds(10), futures.toArray(new RedisFuture[0]));
            check(done && "v999".equals(r.get("p:999")) && r.dbsize() >= 1000, "a pipeline of 1,000 SETs");

            LinkedBlockingQueue<String> got = new LinkedBlockingQueue<>();
            StatefulRedisPubSubConnection<String, String> sub = client.connectPubSub();
            sub.addListener(new RedisPubSubAdapter<>() {
                @Override
                public void message(String channel, String message) {
                    got.add(channel + "=" + message);
                }

                @Override
                public void message(String pattern, String channel, String message) {
                    got.add(pattern + ":" + channel + "=" + message);
                }
            });
            sub.sync().subscribe("news");
            sub.sync().psubscribe("n*");
            long receivers = r.publish("news", "hello");
            String m1 = poll(got);
            String m2 = poll(got);
            check(receivers == 2 && m1 != null && m2 != null,
                    "SUBSCRIBE and PSUBSCRIBE over RESP3 pushes (" + receivers + " receivers, got " + m1 + ", " + m2 + ")");
            sub.close();

            RedisFuture<KeyValue<String, String>> blpop;
            try (StatefulRedisConnection<String, String> blocked = client.connect()) {
                blpop = blocked.async().blpop(5, "queue");
                Thread.sleep(200);
                r.rpush("queue", "job");
                KeyValue<String, String> popped = await(blpop);
                check(popped != null && "job".equals(popped.getValue()), "BLPOP woken by RPUSH from another client (" + popped + ")");
            }
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        } finally {
            client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
        }
    }

    static String poll(LinkedBlockingQueue<String> q) {
        try {
            return q.poll(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            return null;
        }
    }

    /** A cluster client as an application would configure it: periodic and adaptive topology refresh. */
    static RedisClusterClient clusterClient(List<RedisURI> seeds, Duration commandTimeout) {
        RedisClusterClient client = RedisClusterClient.create(seeds);
        client.setOptions(ClusterClientOptions.builder()
                .timeoutOptions(TimeoutOptions.enabled(commandTimeout))
                .topologyRefreshOptions(ClusterTopologyRefreshOptions.builder()
                        .enablePeriodicRefresh(Duration.ofSeconds(5))
                        .enableAllAdaptiveRefreshTriggers()
                        .adaptiveRefreshTriggersTimeout(Duration.ofMillis(500))
                        .build())
                .build());
        return client;
    }

    private static void cluster(List<RedisURI> seeds) {
        RedisClusterClient client = clusterClient(seeds, Duration.ofSeconds(5));
        try (StatefulRedisClusterConnection<String, String> conn = client.connect()) {
            RedisAdvancedClusterCommands<String, String> r = conn.sync();
            r.flushall();
            Partitions parts = client.getPartitions();
            int covered = 0;
            int masters = 0;
            for (RedisClusterNode n : parts) {
                if (n.is(RedisClusterNode.NodeFlag.UPSTREAM)) {
                    masters++;
                    covered += n.getSlots().size();
                }
            }
            check(masters == 3 && covered == SlotHash.SLOT_COUNT,
                    "topology from CLUSTER NODES: " + masters + " masters covering " + covered + " slots");

            int bad = 0;
            for (int i = 0; i < 1000; i++) {
                r.set("lt:" + i, "v" + i);
            }
            for (int i = 0; i < 1000; i++) {
                if (!("v" + i).equals(r.get("lt:" + i))) {
                    bad++;
                }
            }
            check(bad == 0, "SET/GET of 1,000 keys over the slots (" + bad + " wrong)");

            Map<String, String> many = new LinkedHashMap<>();
            for (int i = 0; i < 20; i++) {
                many.put("multi:" + i, "m" + i);
            }
            check("OK".equals(r.mset(many)), "MSET over many slots (split by Lettuce)");
            List<KeyValue<String, String>> values = r.mget(many.keySet().toArray(new String[0]));
            boolean inOrder = values.size() == 20;
            for (int i = 0; inOrder && i < 20; i++) {
                inOrder = values.get(i).getValue().equals("m" + i);
            }
            check(inOrder, "MGET over many slots, in order");
            check(r.del(many.keySet().toArray(new String[0])) == 20, "DEL over many slots");

            RedisAdvancedClusterAsyncCommands<String, String> async = conn.async();
            conn.setAutoFlushCommands(false);
            List<RedisFuture<?>> futures = new ArrayList<>();
            for (int i = 0; i < 500; i++) {
                futures.add(async.incr("ctr:" + i));
            }
            conn.flushCommands();
            conn.setAutoFlushCommands(true);
            boolean done = LettuceFutures.awaitAll(Duration.ofSeconds(10), futures.toArray(new RedisFuture[0]));
            check(done && "1".equals(r.get("ctr:499")), "an async pipeline of 500 INCRs over many slots");

            List<String> keys = r.keys("lt:99*");
            check(keys.size() == 11, "KEYS across every master (" + keys.size() + " of 11)");
            long dbsize = r.dbsize();
            check(dbsize == 1500, "DBSIZE summed over the masters (" + dbsize + ")");
            int scanned = 0;
            ScanIterator<String> it = ScanIterator.scan(r, io.lettuce.core.ScanArgs.Builder.matches("lt:*").limit(200));
            while (it.hasNext()) {
                it.next();
                scanned++;
            }
            check(scanned == 1000, "SCAN across every master (" + scanned + " of 1000)");

            String tag = "{lt:tx}";
            int slot = SlotHash.getSlot(tag);
            RedisClusterNode owner = client.getPartitions().getPartitionBySlot(slot);
            RedisCommands<String, String> node = conn.getConnection(owner.getNodeId()).sync();
            node.multi();
            node.set(tag + ":a", "1");
            node.incrby(tag + ":n", 5);
            TransactionResult tx = node.exec();
            check(!tx.wasDiscarded() && Long.valueOf(5).equals(tx.get(1)) && "1".equals(r.get(tag + ":a")),
                    "MULTI/EXEC on the node of slot " + slot + " (" + tx + ")");

            Long n = r.eval("return redis.call('INCRBY', KEYS[1], ARGV[1])", ScriptOutputType.INTEGER,
                    new String[] {"{lt:tx}:n"}, "10");
            check(n != null && n == 15, "EVAL routed by its key (" + n + ")");

            LinkedBlockingQueue<String> got = new LinkedBlockingQueue<>();
            StatefulRedisClusterPubSubConnection<String, String> sub = client.connectPubSub();
            sub.addListener(new RedisPubSubAdapter<>() {
                @Override
                public void message(String channel, String message) {
                    got.add(channel + "=" + message);
                }
            });
            sub.sync().subscribe("cluster-news");
            r.publish("cluster-news", "hi");
            String m = poll(got);
            check("cluster-news=hi".equals(m), "SUBSCRIBE / PUBLISH in the cluster (" + m + ")");
            sub.close();
        } finally {
            client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
        }
    }
}

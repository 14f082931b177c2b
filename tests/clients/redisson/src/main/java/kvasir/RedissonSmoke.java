package kvasir;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.BatchResult;
import org.redisson.api.RAtomicLong;
import org.redisson.api.RBatch;
import org.redisson.api.RBlockingQueue;
import org.redisson.api.RBloomFilter;
import org.redisson.api.RBucket;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RDelayedQueue;
import org.redisson.api.RHyperLogLog;
import org.redisson.api.RKeys;
import org.redisson.api.RLock;
import org.redisson.api.RMap;
import org.redisson.api.RMapCache;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RScoredSortedSet;
import org.redisson.api.RSemaphore;
import org.redisson.api.RStream;
import org.redisson.api.RTopic;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.api.StreamMessageId;
import org.redisson.api.stream.StreamAddArgs;
import org.redisson.api.stream.StreamCreateGroupArgs;
import org.redisson.api.stream.StreamReadGroupArgs;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * Kvasir with Redisson, Java's library of distributed objects over Redis:
 *
 * <pre>java -jar kvclient-redisson.jar standalone PORT
 * java -jar kvclient-redisson.jar cluster PORT...</pre>
 *
 * Every object here is Lua scripts and pub/sub underneath, as applications
 * use them: a reentrant lock (held, re-entered, refused to another thread,
 * handed to a waiter on unlock, freed when its lease ends), a read-write
 * lock, a semaphore, a countdown latch, a blocking queue, a delayed queue,
 * a topic, a map with per-entry TTL, a rate limiter, a Bloom filter, a
 * stream with a consumer group, a batch of 100 commands, keys by pattern.
 * Prints PASS/FAIL lines and a RESULT line; exits 1 if any check failed.
 * A watchdog ends the run after 100 s.
 */
public final class RedissonSmoke {
    private static boolean failed = false;

    private RedissonSmoke() {}

    static boolean check(boolean ok, String what) {
        if (!ok) {
            failed = true;
        }
        System.out.println((ok ? "PASS: " : "FAIL: ") + what);
        return ok;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2 || !(args[0].equals("standalone") || args[0].equals("cluster"))) {
            System.err.println("usage: RedissonSmoke standalone PORT | cluster PORT...");
            System.exit(2);
        }
        // Redisson's own warnings (a node unreachable, a retry) on stderr.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        String label = "redisson " + args[0];
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(100_000);
            } catch (InterruptedException e) {
                return;
            }
            System.out.println("FAIL: " + label + ": deadline of 100s exceeded");
            System.out.flush();
            Runtime.getRuntime().halt(1);
        });
        watchdog.setDaemon(true);
        watchdog.start();

        Config config = new Config();
        config.setCodec(StringCodec.INSTANCE);
        if (args[0].equals("standalone")) {
            config.useSingleServer()
                    .setAddress(address(args[1]))
                    .setTimeout(5000)
                    .setConnectionMinimumIdleSize(2)
                    .setConnectionPoolSize(8);
        } else {
            var cluster = config.useClusterServers()
                    .setTimeout(5000)
                    .setScanInterval(2000)
                    .setMasterConnectionMinimumIdleSize(2)
                    .setSlaveConnectionMinimumIdleSize(1);
            for (int i = 1; i < args.length; i++) {
                cluster.addNodeAddress(address(args[i]));
            }
        }
        long started = System.nanoTime();
        RedissonClient r = null;
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            r = Redisson.create(config);
            run(r, pool);
        } catch (Exception e) {
            check(false, "unexpected exception: " + e);
            e.printStackTrace(System.out);
        } finally {
            pool.shutdownNow();
            if (r != null) {
                r.shutdown(0, 2, TimeUnit.SECONDS);
            }
        }
        System.out.printf("      %s took %.2fs%n", label, (System.nanoTime() - started) / 1e9);
        System.out.println("RESULT: " + label + " " + (failed ? "FAILED" : "PASSED"));
        System.out.flush();
        System.exit(failed ? 1 : 0);
    }

    private static String address(String arg) {
        return "redis://" + (arg.matches("\\d+") ? "127.0.0.1:" + arg : arg);
    }

    private static void run(RedissonClient r, ExecutorService pool) throws Exception {
        RKeys keys = r.getKeys();
        keys.flushall();

        RBucket<String> bucket = r.getBucket("bucket");
        bucket.set("v1");
        check("v1".equals(bucket.get()), "RBucket set/get");
        check(!bucket.setIfAbsent("other") && "v1".equals(bucket.getAndSet("v2")) && "v2".equals(bucket.get()),
                "RBucket setIfAbsent on a present key, getAndSet");
        RBucket<String> ttl = r.getBucket("ttl");
        ttl.set("x", Duration.ofSeconds(100));
        long remain = ttl.remainTimeToLive();
        check(remain > 90_000 && remain <= 100_000, "RBucket with a TTL (" + remain + " ms left)");

        RAtomicLong counter = r.getAtomicLong("counter");
        check(counter.incrementAndGet() == 1 && counter.addAndGet(9) == 10, "RAtomicLong incrementAndGet/addAndGet");
        check(counter.compareAndSet(10, 42) && !counter.compareAndSet(10, 43) && counter.get() == 42,
                "RAtomicLong compareAndSet (a Lua script)");

        RMap<String, String> map = r.getMap("map");
        map.put("a", "1");
        map.fastPut("b", "2");
        check(map.putIfAbsent("a", "x").equals("1") && map.readAllMap().equals(Map.of("a", "1", "b", "2")),
                "RMap put/fastPut/putIfAbsent/readAllMap");

        // Per-entry TTL: Redisson keeps the deadlines in a sorted set and
        // judges them in Lua at every read.
        RMapCache<String, String> cache = r.getMapCache("cache");
        cache.put("short", "gone soon", 1, TimeUnit.SECONDS);
        cache.put("long", "stays");
        check("gone soon".equals(cache.get("short")) && cache.size() == 2, "RMapCache entry with a 1 s TTL readable");
        Thread.sleep(1500);
        check(cache.get("short") == null && "stays".equals(cache.get("long")),
                "RMapCache entry gone after its TTL, the other one kept");

        locks(r, pool);

        RSemaphore semaphore = r.getSemaphore("semaphore");
        check(semaphore.trySetPermits(2), "RSemaphore trySetPermits(2)");
        semaphore.acquire();
        semaphore.acquire();
        boolean third = semaphore.tryAcquire();
        semaphore.release();
        check(!third && semaphore.tryAcquire(), "RSemaphore: a third permit refused, one back after release");

        RCountDownLatch latch = r.getCountDownLatch("latch");
        check(latch.trySetCount(1), "RCountDownLatch trySetCount(1)");
        Future<Boolean> awaited = pool.submit(() -> r.getCountDownLatch("latch").await(10, TimeUnit.SECONDS));
        Thread.sleep(300);
        latch.countDown();
        check(awaited.get(10, TimeUnit.SECONDS), "RCountDownLatch await released by countDown (pub/sub)");

        RBlockingQueue<String> queue = r.getBlockingQueue("queue");
        Future<String> taken = pool.submit(() -> r.<String>getBlockingQueue("queue").poll(10, TimeUnit.SECONDS));
        Thread.sleep(300);
        queue.offer("job-1");
        check("job-1".equals(taken.get(10, TimeUnit.SECONDS)), "RBlockingQueue poll(10 s) woken by offer (BLPOP)");
        long t0 = System.nanoTime();
        String none = queue.poll(1, TimeUnit.SECONDS);
        long waited = (System.nanoTime() - t0) / 1_000_000;
        check(none == null && waited >= 900, "RBlockingQueue poll(1 s) on an empty queue times out (" + waited + " ms)");

        RBlockingQueue<String> destination = r.getBlockingQueue("delayed-destination");
        RDelayedQueue<String> delayed = r.getDelayedQueue(destination);
        t0 = System.nanoTime();
        delayed.offer("later", 1, TimeUnit.SECONDS);
        String arrived = destination.poll(10, TimeUnit.SECONDS);
        long after = (System.nanoTime() - t0) / 1_000_000;
        check("later".equals(arrived) && after >= 900, "RDelayedQueue moves an element after its 1 s delay (" + after + " ms)");
        delayed.destroy();

        RTopic topic = r.getTopic("news");
        LinkedBlockingQueue<String> heard = new LinkedBlockingQueue<>();
        int listener = topic.addListener(String.class, (channel, msg) -> heard.add(msg));
        long receivers = topic.publish("hello");
        String message = heard.poll(5, TimeUnit.SECONDS);
        check(receivers >= 1 && "hello".equals(message), "RTopic publish reaches a listener (" + receivers + " receivers)");
        topic.removeListener(listener);

        RScoredSortedSet<String> zset = r.getScoredSortedSet("zset");
        zset.add(1.5, "a");
        zset.add(2.0, "b");
        zset.add(0.5, "c");
        check(zset.rank("b") == 2 && zset.getScore("a") == 1.5
                        && new ArrayList<>(zset.valueRange(0, -1)).equals(List.of("c", "a", "b")),
                "RScoredSortedSet add/rank/getScore/valueRange");

        RRateLimiter limiter = r.getRateLimiter("limiter");
        check(limiter.trySetRate(RateType.OVERALL, 5, Duration.ofSeconds(30)), "RRateLimiter trySetRate(5 per 30 s)");
        int granted = 0;
        for (int i = 0; i < 7; i++) {
            if (limiter.tryAcquire()) {
                granted++;
            }
        }
        check(granted == 5, "RRateLimiter grants 5 of 7 (" + granted + ")");

        RBloomFilter<String> bloom = r.getBloomFilter("bloom");
        check(bloom.tryInit(1000, 0.01), "RBloomFilter tryInit(1000, 0.01)");
        for (int i = 0; i < 100; i++) {
            bloom.add("member-" + i);
        }
        int falsePositives = 0;
        for (int i = 0; i < 100; i++) {
            if (bloom.contains("stranger-" + i)) {
                falsePositives++;
            }
        }
        check(bloom.contains("member-7") && bloom.contains("member-99") && falsePositives <= 5,
                "RBloomFilter contains its members, " + falsePositives + " false positives of 100");

        RHyperLogLog<String> hll = r.getHyperLogLog("hll");
        for (int i = 0; i < 1000; i++) {
            hll.add("visitor-" + (i % 500));
        }
        long distinct = hll.count();
        check(distinct > 480 && distinct < 520, "RHyperLogLog counts about 500 distinct (" + distinct + ")");

        RStream<String, String> stream = r.getStream("events");
        stream.createGroup(StreamCreateGroupArgs.name("workers").makeStream());
        StreamMessageId id = stream.add(StreamAddArgs.entry("type", "signup"));
        Map<StreamMessageId, Map<String, String>> delivered =
                stream.readGroup("workers", "w1", StreamReadGroupArgs.neverDelivered());
        check(delivered.size() == 1 && delivered.get(id).equals(Map.of("type", "signup")) && stream.ack("workers", id) == 1,
                "RStream createGroup/add/readGroup/ack");

        RBatch batch = r.createBatch();
        for (int i = 0; i < 100; i++) {
            batch.<String>getBucket("batch:" + i).setAsync("v" + i);
        }
        batch.getAtomicLong("batch-counter").incrementAndGetAsync();
        BatchResult<?> result = batch.execute();
        check(result.getResponses().size() == 101 && "v99".equals(r.<String>getBucket("batch:99").get()),
                "RBatch of 101 commands (" + result.getResponses().size() + " responses)");

        check(keys.countExists("bucket", "batch:1", "no-such-key") == 2, "RKeys countExists");
        long matched = 0;
        for (String ignored : keys.getKeysByPattern("batch:*")) {
            matched++;
        }
        check(matched == 100, "RKeys getKeysByPattern (SCAN MATCH) finds 100 (" + matched + ")");
        long deleted = keys.deleteByPattern("batch:*");
        check(deleted == 100 && keys.countExists("batch:5") == 0, "RKeys deleteByPattern deletes 100 (" + deleted + ")");
    }

    private static void locks(RedissonClient r, ExecutorService pool) throws Exception {
        RLock lock = r.getLock("lock");
        lock.lock();
        lock.lock();
        check(lock.isHeldByCurrentThread() && lock.getHoldCount() == 2, "RLock held and re-entered (hold count 2)");
        Future<Boolean> other = pool.submit(() -> r.getLock("lock").tryLock());
        check(!other.get(10, TimeUnit.SECONDS), "RLock refused to another thread");
        CountDownLatch waiting = new CountDownLatch(1);
        Future<Long> waiter = pool.submit(() -> {
            RLock mine = r.getLock("lock");
            waiting.countDown();
            long t0 = System.nanoTime();
            // Redisson parks on the lock's pub/sub channel until unlock.
            if (!mine.tryLock(20, TimeUnit.SECONDS)) {
                return -1L;
            }
            long ms = (System.nanoTime() - t0) / 1_000_000;
            mine.unlock();
            return ms;
        });
        waiting.await();
        Thread.sleep(500);
        lock.unlock();
        check(lock.isLocked() && lock.isHeldByCurrentThread(), "RLock still held after one of two unlocks");
        lock.unlock();
        long handedOver = waiter.get(20, TimeUnit.SECONDS);
        check(handedOver >= 400 && handedOver < 5000, "RLock handed to a waiting thread on unlock (" + handedOver + " ms)");
        check(!lock.isLocked(), "RLock free after the waiter unlocked");

        // A lease: the lock frees itself when its time is up.
        lock.lock(1, TimeUnit.SECONDS);
        Future<Long> leased = pool.submit(() -> {
            RLock mine = r.getLock("lock");
            long t0 = System.nanoTime();
            if (!mine.tryLock(10, TimeUnit.SECONDS)) {
                return -1L;
            }
            long ms = (System.nanoTime() - t0) / 1_000_000;
            mine.unlock();
            return ms;
        });
        long afterLease = leased.get(15, TimeUnit.SECONDS);
        check(afterLease >= 500 && afterLease < 5000, "RLock with a 1 s lease taken by another thread after it (" + afterLease + " ms)");

        RReadWriteLock rw = r.getReadWriteLock("rw");
        rw.readLock().lock();
        Future<Boolean> secondReader = pool.submit(() -> {
            RLock read = r.getReadWriteLock("rw").readLock();
            boolean got = read.tryLock();
            if (got) {
                read.unlock();
            }
            return got;
        });
        Future<Boolean> writer = pool.submit(() -> r.getReadWriteLock("rw").writeLock().tryLock());
        check(secondReader.get(10, TimeUnit.SECONDS) && !writer.get(10, TimeUnit.SECONDS),
                "RReadWriteLock: readers share, a writer is refused");
        rw.readLock().unlock();
    }
}

//! maxmemory-policy's evicting policies: over `maxmemory` keys are evicted
//! so that writes go on, used memory stays near the limit, `volatile-*`
//! policies never take a key without an expiry, LRU keeps the keys in use,
//! evictions are counted and announced, and OBJECT IDLETIME/FREQ report
//! what the policies use (side by side with redis-server where the answer
//! is exact). In cluster mode the leader picks the keys and the deletions
//! go through the log: replicas stay identical.

#[path = "common/cluster.rs"]
mod cluster;
mod common;

use cluster::{Cluster, NODES};
use common::redis_server::{start_redis, start_redis_in};
use common::{q, Kvasir, RawConn};
use std::time::Duration;

fn info_field(conn: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let info: String = q(conn, &["INFO", section]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in INFO {section}: {info}"))
}

/// Writes `n` keys `prefix:i` of `size` bytes, every `volatile_every`-th
/// one without an expiry and the others with one (1 = none has one), in
/// pipelines of 100; returns the error replies.
fn fill(
    conn: &mut redis::Connection,
    prefix: &str,
    n: usize,
    size: usize,
    persistent_every: usize,
) -> Vec<String> {
    let value = "x".repeat(size);
    let mut errors = Vec::new();
    for start in (0..n).step_by(100) {
        let mut pipe = redis::pipe();
        for i in start..(start + 100).min(n) {
            let key = format!("{prefix}:{i}");
            if i % persistent_every == 0 {
                pipe.cmd("SET").arg(&key).arg(&value);
            } else {
                pipe.cmd("SET").arg(&key).arg(&value).arg("EX").arg(100_000);
            }
        }
        let replies: Vec<redis::Value> = pipe
            .query(conn)
            .unwrap_or_else(|e| panic!("{prefix}: pipeline at key {start}: {e}"));
        for r in replies {
            if let redis::Value::ServerError(e) = r {
                errors.push(format!("{} {}", e.code(), e.details().unwrap_or("")));
            }
        }
    }
    errors
}

#[test]
fn evicting_policies_keep_memory_near_the_limit_and_volatile_ones_spare_persistent_keys() {
    let kvasir = Kvasir::start(&[]);
    let mut conn = kvasir.conn();
    for policy in [
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let _: () = q(&mut conn, &["FLUSHALL"]);
        let _: () = q(&mut conn, &["CONFIG", "SET", "maxmemory", "0"]);
        let base = info_field(&mut conn, "memory", "used_memory");
        let limit = base + 16 * 1024 * 1024;
        let _: () = q(&mut conn, &["CONFIG", "SET", "maxmemory-policy", policy]);
        let _: () = q(
            &mut conn,
            &["CONFIG", "SET", "maxmemory", &limit.to_string()],
        );
        let evicted_before = info_field(&mut conn, "stats", "evicted_keys");
        // ~40 MB of values: more than twice what fits. One key in four has
        // no expiry (10 MB of them, which fit).
        let errors = fill(&mut conn, policy, 40_000, 1_000, 4);
        assert!(
            errors.is_empty(),
            "{policy}: {:?}",
            &errors[..errors.len().min(3)]
        );
        let used = info_field(&mut conn, "memory", "used_memory");
        assert!(
            used <= limit + 1024 * 1024,
            "{policy}: used_memory {used} over maxmemory {limit}"
        );
        // Every command may evict while memory is over the limit: the
        // counts are read around DBSIZE.
        let evicted_first = info_field(&mut conn, "stats", "evicted_keys") - evicted_before;
        let keys: u64 = q(&mut conn, &["DBSIZE"]);
        let evicted_then = info_field(&mut conn, "stats", "evicted_keys") - evicted_before;
        assert!(evicted_first >= 15_000, "{policy}: evicted {evicted_first}");
        assert!(
            keys + evicted_first <= 40_000 && 40_000 <= keys + evicted_then,
            "{policy}: {keys} kept, {evicted_first}..{evicted_then} evicted of 40000"
        );
        assert!(
            keys >= 8_000,
            "{policy}: only {keys} kept under a 16 MB allowance"
        );
        if policy.starts_with("volatile") {
            let mut pipe = redis::pipe();
            for i in (0..40_000).step_by(4) {
                pipe.cmd("EXISTS").arg(format!("{policy}:{i}"));
            }
            let exist: Vec<i64> = pipe.query(&mut conn).expect("exists");
            assert!(
                exist.iter().all(|&e| e == 1),
                "{policy} evicted a key without an expiry"
            );
        }
    }
    kvasir_alive(&kvasir);
}

/// Redis's own suite (unit/maxmemory, "is the memory limit honoured?" and
/// "only allkeys-* should remove non-volatile keys"): with `maxmemory` 100
/// KB above used memory, writing as many small keys again as filled it
/// keeps used memory within 4 KB of the limit under every evicting policy
/// and never takes a persistent key under a volatile one; with only
/// persistent keys a volatile policy refuses writes, and after FLUSHALL
/// the next write is admitted. Before: jemalloc's thread caches counted
/// freed blocks as used, so evictions seemed to free nothing and emptied
/// the keyspace, then refused every write (also right after a FLUSHALL,
/// on a reading taken before it).
#[test]
fn a_limit_100_kb_above_used_memory_holds_as_redis_suite_checks() {
    let kvasir = Kvasir::start(&[]);
    let mut c = kvasir.conn();
    let run = |c: &mut redis::Connection, args: &[&str]| -> redis::RedisResult<redis::Value> {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(c)
    };
    // Each command's first call allocates its latency histogram (24 KB,
    // as in Redis): made before the limits are measured.
    for args in [
        &["SET", "w", "x"][..],
        &["SETEX", "w", "10", "x"],
        &["EXISTS", "w"],
        &["DBSIZE"],
        &["FLUSHALL"],
    ] {
        run(&mut c, args).expect("warm-up");
    }
    for policy in [
        "allkeys-random",
        "allkeys-lru",
        "allkeys-lfu",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        run(&mut c, &["FLUSHALL"]).expect("flushall");
        let used = info_field(&mut c, "memory", "used_memory");
        let limit = used + 100 * 1024;
        let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
        let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory-policy", policy]);
        // Odd keys volatile, even keys persistent, until the limit is
        // almost reached.
        let mut n = 0;
        loop {
            let key = format!("key:{n}");
            let r = if n % 2 == 1 {
                run(&mut c, &["SETEX", &key, "10000", "x"])
            } else {
                run(&mut c, &["SET", &key, "x"])
            };
            r.unwrap_or_else(|e| panic!("{policy}: write {n} under the limit: {e}"));
            n += 1;
            if info_field(&mut c, "memory", "used_memory") + 4096 > limit {
                break;
            }
            assert!(n < 100_000, "{policy}: 100 KB took over 100000 keys");
        }
        assert!(n > 10, "{policy}: only {n} keys in 100 KB");
        for j in 0..n {
            run(&mut c, &["SETEX", &format!("foo:{j}"), "10000", "x"])
                .unwrap_or_else(|e| panic!("{policy}: volatile write {j} over the limit: {e}"));
        }
        let after = info_field(&mut c, "memory", "used_memory");
        assert!(
            after < limit + 4096,
            "{policy}: used_memory {after}, limit {limit}"
        );
        let kept: u64 = q(&mut c, &["DBSIZE"]);
        assert!(
            kept as usize > n / 2,
            "{policy}: {kept} keys left of {n} written twice"
        );
        if policy.starts_with("volatile") {
            for j in (0..n).step_by(2) {
                let exists: i64 = q(&mut c, &["EXISTS", &format!("key:{j}")]);
                assert_eq!(exists, 1, "{policy} evicted persistent key:{j}");
            }
            // Persistent keys only: writes beyond the limit are refused.
            let refused = (0..2 * n).any(|j| {
                run(&mut c, &["SET", &format!("p:{j}"), "x"])
                    .is_err_and(|e| e.to_string().contains("used memory > 'maxmemory'"))
            });
            assert!(
                refused,
                "{policy}: persistent writes over the limit were never refused"
            );
        }
    }
    kvasir_alive(&kvasir);
}

fn kvasir_alive(k: &Kvasir) {
    let mut c = k.conn();
    let pong: String = q(&mut c, &["PING"]);
    assert_eq!(pong, "PONG");
}

/// allkeys-lru evicts the keys idle longest: keys written and left alone
/// go before keys read since (LRU stamps have a resolution of a second,
/// as Redis's, and the choice is Redis's approximation by sampling).
#[test]
fn allkeys_lru_keeps_the_keys_in_use() {
    let kvasir = Kvasir::start(&[]);
    let mut conn = kvasir.conn();
    let base = info_field(&mut conn, "memory", "used_memory");
    let limit = base + 16 * 1024 * 1024;
    let _: () = q(
        &mut conn,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    );
    let _: () = q(
        &mut conn,
        &["CONFIG", "SET", "maxmemory", &limit.to_string()],
    );
    // Old keys fill most of the room; two seconds later the hot keys come
    // and are read; then new keys push past the limit.
    assert!(fill(&mut conn, "old", 12_000, 1_000, 1).is_empty());
    std::thread::sleep(Duration::from_millis(2_100));
    assert!(fill(&mut conn, "hot", 500, 1_000, 1).is_empty());
    let read_hot = |conn: &mut redis::Connection| {
        let mut pipe = redis::pipe();
        for i in 0..500 {
            pipe.cmd("EXISTS").arg(format!("hot:{i}"));
        }
        let exist: Vec<i64> = pipe.query(conn).expect("exists");
        let mut pipe = redis::pipe();
        for i in 0..500 {
            pipe.cmd("GET").arg(format!("hot:{i}"));
        }
        let _: Vec<Option<String>> = pipe.query(conn).expect("get");
        exist.iter().sum::<i64>()
    };
    assert_eq!(read_hot(&mut conn), 500);
    for round in 0..5 {
        assert!(fill(&mut conn, &format!("new{round}"), 2_000, 1_000, 1).is_empty());
        read_hot(&mut conn);
    }
    let evicted = info_field(&mut conn, "stats", "evicted_keys");
    assert!(evicted >= 3_000, "evicted {evicted}");
    // The policy samples 5 keys per pick (maxmemory-samples) into a pool
    // of the 16 best candidates, as Redis: with thousands of idle keys
    // left, a pick finds one (redis-server 7.0.15 keeps all 500 hot keys
    // in this scenario). Kvasir kept 430-470 when each eviction round drew
    // the positions of the round before (seeds one step apart): deleting
    // a key moves the newest entry into its slot, so the same positions
    // came to hold new keys. A random pick would take about half of them.
    let hot = read_hot(&mut conn);
    assert!(
        hot >= 495,
        "only {hot} of 500 hot keys survived {evicted} evictions"
    );
    let mut pipe = redis::pipe();
    for i in 0..12_000 {
        pipe.cmd("EXISTS").arg(format!("old:{i}"));
    }
    let old: Vec<i64> = pipe.query(&mut conn).expect("exists");
    let old_kept: i64 = old.iter().sum();
    assert!(
        old_kept <= 12_000 - 3_000,
        "the idle keys should have gone first: {old_kept} of 12000 kept"
    );
}

/// Evicted keys are announced as `evicted` keyspace events, and a
/// volatile policy with no key to evict refuses writes as noeviction does.
#[test]
fn evictions_are_announced_and_a_volatile_policy_without_volatile_keys_refuses_writes() {
    let kvasir = Kvasir::start(&[]);
    let mut conn = kvasir.conn();
    let _: () = q(
        &mut conn,
        &["CONFIG", "SET", "notify-keyspace-events", "Ee"],
    );
    let mut sub = RawConn::to_port(kvasir.port);
    let _ = sub.cmd_str(&["SUBSCRIBE", "__keyevent@0__:evicted"]);
    let _: () = q(&mut conn, &["SET", "victim", "v"]);
    let _: () = q(
        &mut conn,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-random"],
    );
    let _: () = q(&mut conn, &["CONFIG", "SET", "maxmemory", "1"]);
    // Over the limit, the write evicts what there is and is refused only
    // once nothing is left.
    let _ = common::err(&mut conn, &["SET", "k", "v"]);
    let message = sub
        .read_reply_within(Duration::from_secs(5))
        .expect("an evicted event");
    let text = String::from_utf8_lossy(&message);
    assert!(
        text.contains("__keyevent@0__:evicted") && text.contains("victim"),
        "{text}"
    );
    let _: () = q(&mut conn, &["CONFIG", "SET", "maxmemory", "0"]);

    let (_redis, redis_port) = start_redis();
    let session = |port: u16| {
        let mut c = RawConn::to_port(port);
        let mut out = Vec::new();
        for args in [
            &["FLUSHALL"][..],
            &["SET", "p1", "v"],
            &["SET", "p2", "v"],
            &["CONFIG", "SET", "maxmemory-policy", "volatile-lru"],
            &["CONFIG", "SET", "maxmemory", "1"],
            &["SET", "k", "v"],
            &["GET", "p1"],
            &["DBSIZE"],
            &["CONFIG", "SET", "maxmemory-policy", "bogus"],
            &["CONFIG", "GET", "maxmemory-policy"],
            &["CONFIG", "SET", "maxmemory", "0"],
        ] {
            out.push(c.cmd_str(args));
        }
        out
    };
    assert_eq!(session(kvasir.port), session(redis_port));
}

/// OBJECT IDLETIME, OBJECT FREQ and TOUCH as Redis answers them (the LFU
/// counter's first increments are certain, so exact).
#[test]
fn object_idletime_and_freq_answer_as_redis() {
    let kvasir = Kvasir::start(&[]);
    let (_redis, redis_port) = start_redis();
    let session = |port: u16| {
        let mut c = RawConn::to_port(port);
        let mut out = Vec::new();
        for args in [
            // Not small integers: Redis shares those objects, and their
            // one stamp.
            &["SET", "a", "va"][..],
            &["OBJECT", "IDLETIME", "a"],
            &["OBJECT", "FREQ", "a"],
            &["OBJECT", "IDLETIME", "missing"],
            &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
            &["SET", "b", "vb"],
            &["OBJECT", "FREQ", "b"],
            &["GET", "b"],
            &["OBJECT", "FREQ", "b"],
            &["TYPE", "b"],
            &["EXISTS", "b"],
            &["TTL", "b"],
            &["OBJECT", "FREQ", "b"],
            &["OBJECT", "IDLETIME", "b"],
            &["OBJECT", "FREQ", "missing"],
            &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
        ] {
            out.push(c.cmd_str(args));
        }
        out
    };
    assert_eq!(session(kvasir.port), session(redis_port));
    // A key last used under LRU and read after a switch to LFU (go-redis's
    // own suite does this): its stamp holds no LFU counter, so the value
    // is whatever its bits say, on Redis too; it is an answer, not a crash.
    for port in [kvasir.port, redis_port] {
        let mut c = RawConn::to_port(port);
        c.cmd_str(&["SET", "lru-key", "v"]);
        c.cmd_str(&["CONFIG", "SET", "maxmemory-policy", "volatile-lfu"]);
        let freq = c.cmd_str(&["OBJECT", "FREQ", "lru-key"]);
        assert!(freq.starts_with(':'), "port {port}: {freq:?}");
        c.cmd_str(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
        assert_eq!(c.cmd_str(&["PING"]), "+PONG\r\n", "port {port}");
    }
    // Idle time counts seconds since the last access; OBJECT does not
    // count as one, GET and TOUCH do.
    let mut conn = kvasir.conn();
    let _: () = q(&mut conn, &["SET", "idle", "v"]);
    std::thread::sleep(Duration::from_millis(2_100));
    let idle: i64 = q(&mut conn, &["OBJECT", "IDLETIME", "idle"]);
    assert!((2..=3).contains(&idle), "{idle}");
    let touched: i64 = q(&mut conn, &["TOUCH", "idle"]);
    assert_eq!(touched, 1);
    let idle: i64 = q(&mut conn, &["OBJECT", "IDLETIME", "idle"]);
    assert_eq!(idle, 0);

    // RESTORE's IDLETIME and FREQ set what OBJECT then reports, on both.
    for port in [kvasir.port, redis_port] {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|cl| cl.get_connection())
            .expect("connect");
        let _: () = q(&mut c, &["SET", "src", "payload"]);
        let dump: Vec<u8> = redis::cmd("DUMP").arg("src").query(&mut c).expect("dump");
        let restore = |c: &mut redis::Connection, key: &str, opt: &str, v: &str| {
            let _: () = redis::cmd("RESTORE")
                .arg(key)
                .arg(0)
                .arg(&dump)
                .arg(opt)
                .arg(v)
                .query(c)
                .expect("restore");
        };
        restore(&mut c, "r1", "IDLETIME", "1000");
        let idle: i64 = q(&mut c, &["OBJECT", "IDLETIME", "r1"]);
        assert!((1000..=1001).contains(&idle), "port {port}: {idle}");
        let _: () = q(
            &mut c,
            &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
        );
        restore(&mut c, "r2", "FREQ", "77");
        let freq: i64 = q(&mut c, &["OBJECT", "FREQ", "r2"]);
        assert_eq!(freq, 77, "port {port}");
        let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    }
}

/// In cluster mode each node's limit is its own; a leader over it picks
/// keys of the shards it leads and orders their eviction through the log,
/// so writes go on and every replica holds the same keys.
#[test]
fn cluster_leaders_evict_through_the_log() {
    let mut c = Cluster::start(&[]);
    c.try_wait_ready(Duration::from_secs(20))
        .expect("cluster ready");
    for id in 1..=NODES {
        let mut conn = c.conn(id);
        let base = info_field(&mut conn, "memory", "used_memory");
        let limit = (base + 6 * 1024 * 1024).to_string();
        let _: () = q(
            &mut conn,
            &["CONFIG", "SET", "maxmemory-policy", "allkeys-random"],
        );
        let _: () = q(&mut conn, &["CONFIG", "SET", "maxmemory", &limit]);
    }
    let client = c.cluster_client();
    let mut conn = client.get_connection().expect("cluster connection");
    let value = "x".repeat(500);
    let mut failed = 0;
    for start in (0..30_000).step_by(100) {
        let mut pipe = redis::cluster::cluster_pipe();
        for i in start..start + 100 {
            pipe.cmd("SET").arg(format!("ev:{i}")).arg(&value).ignore();
        }
        if pipe.query::<()>(&mut conn).is_err() {
            // The pipeline's first error; count the batch as failed.
            failed += 100;
        }
    }
    // A write may meet the limit before the eviction ordered for it has
    // applied; nearly all go through.
    assert!(failed <= 300, "{failed} of 30000 writes failed");
    let evicted: u64 = (1..=NODES)
        .map(|id| info_field(&mut c.conn(id), "stats", "evicted_keys"))
        .sum();
    assert!(evicted >= 5_000, "evicted {evicted}");
    c.wait_digests_equal(Duration::from_secs(30));
    for id in 1..=NODES {
        let _: () = c
            .query(id, &["CONFIG", "SET", "maxmemory", "0"])
            .expect("config set");
    }
}

/// Under an LRU policy dump.rdb carries each key's idle time, as Redis's
/// files do: written by Kvasir and read by redis-server, and back.
#[test]
fn idle_times_travel_through_dump_rdb_both_ways() {
    let dir = std::env::temp_dir().join(format!("kvasir-evict-rdb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let lru = ["--maxmemory-policy", "allkeys-lru"];
    let restore_idle = |c: &mut redis::Connection, key: &str, idle: &str| {
        let _: () = q(c, &["SET", "src", "payload"]);
        let dump: Vec<u8> = redis::cmd("DUMP").arg("src").query(c).expect("dump");
        let _: () = redis::cmd("RESTORE")
            .arg(key)
            .arg(0)
            .arg(&dump)
            .arg("IDLETIME")
            .arg(idle)
            .query(c)
            .expect("restore");
        let _: () = q(c, &["DEL", "src"]);
    };
    let idle = |c: &mut redis::Connection, key: &str| -> i64 { q(c, &["OBJECT", "IDLETIME", key]) };
    {
        let kvasir = Kvasir::start_in(&dir, &lru);
        let mut c = kvasir.conn();
        restore_idle(&mut c, "from-kvasir", "1000");
        let _: () = q(&mut c, &["SAVE"]);
    }
    {
        let (_redis, port) = start_redis_in(Some(&dir), &lru);
        let mut r = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|c| c.get_connection())
            .expect("connect to redis-server");
        let got = idle(&mut r, "from-kvasir");
        assert!((1000..=1003).contains(&got), "redis-server read {got}");
        restore_idle(&mut r, "from-redis", "500");
        let _: () = q(&mut r, &["SAVE"]);
    }
    let kvasir = Kvasir::start_in(&dir, &lru);
    let mut c = kvasir.conn();
    let got = idle(&mut c, "from-redis");
    assert!((500..=503).contains(&got), "Kvasir read {got}");
    let got = idle(&mut c, "from-kvasir");
    assert!((1000..=1006).contains(&got), "Kvasir read {got}");
    drop(kvasir);
    let _ = std::fs::remove_dir_all(&dir);
}

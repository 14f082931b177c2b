//! The append-only file of a standalone server (`appendonly yes`): what a
//! client was answered survives kill -9 and replays to the same state
//! (random picks, relative expiry times and scripts included), in Redis
//! 7's multi-part folder that redis-server loads too, rewritten by
//! BGREWRITEAOF, started and stopped by CONFIG SET, and a write cut short
//! by a crash is truncated at load.

mod common;

use common::redis_server::start_redis_in;
use common::{err, q, temp_dir, Kvasir};
use std::time::Duration;

/// A server in `dir` (DEBUG DIGEST allowed).
fn start(dir: &std::path::Path, extra: &[&str]) -> Kvasir {
    let mut args = vec!["--enable-debug-command", "yes"];
    args.extend_from_slice(extra);
    Kvasir::start_in(dir, &args)
}

/// Kills `server` with -9 and starts one in `dir` again with the log on.
fn kill_and_restart(dir: &std::path::Path, server: Kvasir) -> (Kvasir, redis::Connection) {
    drop(server);
    let server = start(dir, &["--appendonly", "yes"]);
    let c = server.conn();
    (server, c)
}

fn digest(c: &mut redis::Connection) -> String {
    q(c, &["DEBUG", "DIGEST"])
}

fn info_field(c: &mut redis::Connection, field: &str) -> String {
    let info: String = q(c, &["INFO", "persistence"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("{field} in INFO persistence"))
        .trim()
        .to_string()
}

/// Writes whose result depends on the time or a random pick, scripts,
/// transactions, several databases.
fn write_mix(c: &mut redis::Connection) {
    let _: () = q(c, &["SET", "plain", "v"]);
    let _: i64 = q(c, &["SADD", "set", "a", "b", "c", "d", "e", "f"]);
    let _: Option<String> = q(c, &["SPOP", "set"]);
    let _: Vec<String> = q(c, &["SPOP", "set", "2"]);
    let _: i64 = q(c, &["EXPIRE", "plain", "1000"]);
    let _: () = q(c, &["SET", "short", "v", "PX", "50"]);
    let _: i64 = q(c, &["HSET", "hash", "f1", "1", "f2", "2"]);
    let _: Option<String> = q(c, &["HRANDFIELD", "hash"]);
    let _: i64 = q(c, &["ZADD", "zset", "1", "a", "2", "b", "3", "c"]);
    let _: Vec<String> = q(c, &["ZPOPMIN", "zset"]);
    let _: i64 = q(c, &["RPUSH", "list", "1", "2", "3"]);
    let _: Option<String> = q(c, &["LMOVE", "list", "list2", "LEFT", "RIGHT"]);
    let _: String = q(
        c,
        &[
            "EVAL",
            "redis.call('SET', KEYS[1], math.random(1000000)); return redis.call('INCR', KEYS[2])",
            "2",
            "scripted",
            "counter",
        ],
    );
    let sha: String = q(
        c,
        &[
            "SCRIPT",
            "LOAD",
            "return redis.call('INCRBY', KEYS[1], ARGV[1])",
        ],
    );
    let _: i64 = q(c, &["EVALSHA", &sha, "1", "counter", "5"]);
    let _: String = q(
        c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib\nredis.register_function('bump', function(keys) return redis.call('INCR', keys[1]) end)",
        ],
    );
    let _: i64 = q(c, &["FCALL", "bump", "1", "counter"]);
    let (_, _): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("counter")
        .cmd("SADD")
        .arg("set")
        .arg("z")
        .query(c)
        .expect("MULTI/EXEC");
    let _: () = q(c, &["SELECT", "3"]);
    let _: () = q(c, &["SET", "in-db-3", "v"]);
    let _: i64 = q(c, &["DEL", "missing"]);
    let _: () = q(c, &["SELECT", "0"]);
    let _: i64 = q(c, &["DEL", "list2"]);
    // The short key expires and the active cycle deletes it.
    std::thread::sleep(Duration::from_millis(300));
}

#[test]
fn acknowledged_writes_survive_kill_9_and_replay_to_the_same_state() {
    for fsync in ["always", "everysec", "no"] {
        let dir = temp_dir();
        let server = start(&dir, &["--appendonly", "yes", "--appendfsync", fsync]);
        let mut c = server.conn();
        write_mix(&mut c);
        let before = digest(&mut c);
        let plain_deadline: i64 = q(&mut c, &["PEXPIRETIME", "plain"]);
        let members: Vec<String> = q(&mut c, &["SMEMBERS", "set"]);
        assert_eq!(info_field(&mut c, "aof_enabled"), "1");
        let (server, mut c) = kill_and_restart(&dir, server);
        assert_eq!(
            digest(&mut c),
            before,
            "appendfsync {fsync}: state after replay"
        );
        let deadline: i64 = q(&mut c, &["PEXPIRETIME", "plain"]);
        assert_eq!(
            deadline, plain_deadline,
            "EXPIRE replays to its first deadline"
        );
        let after: Vec<String> = q(&mut c, &["SMEMBERS", "set"]);
        assert_eq!(common::sorted(after), common::sorted(members));
        let short: i64 = q(&mut c, &["EXISTS", "short"]);
        assert_eq!(short, 0);
        // Writes go on in the same log after a restart.
        let _: () = q(&mut c, &["SET", "after-restart", "1"]);
        let before = digest(&mut c);
        let (server, mut c) = kill_and_restart(&dir, server);
        assert_eq!(
            digest(&mut c),
            before,
            "appendfsync {fsync}: second restart"
        );
        drop(c);
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Kvasir's folder is Redis 7's: redis-server loads it, and Kvasir loads
/// one redis-server wrote.
#[test]
fn redis_server_and_kvasir_load_each_others_append_only_folder() {
    let dir = temp_dir();
    let server = start(&dir, &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "k", "from-kvasir"]);
    let _: i64 = q(&mut c, &["RPUSH", "l", "a", "b", "c"]);
    let _: i64 = q(&mut c, &["HSET", "h", "f", "v"]);
    let _: () = q(&mut c, &["SELECT", "2"]);
    let _: i64 = q(&mut c, &["INCRBY", "n", "41"]);
    drop(c);
    drop(server);
    let folder = dir.join("appendonlydir");
    let manifest =
        std::fs::read_to_string(folder.join("appendonly.aof.manifest")).expect("manifest");
    assert_eq!(
        manifest,
        "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );

    let (redis, port) = start_redis_in(Some(&dir), &["--appendonly", "yes"]);
    let mut r = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|c| c.get_connection())
        .expect("connect to redis-server");
    let k: String = q(&mut r, &["GET", "k"]);
    assert_eq!(k, "from-kvasir");
    let l: Vec<String> = q(&mut r, &["LRANGE", "l", "0", "-1"]);
    assert_eq!(l, vec!["a", "b", "c"]);
    let _: () = q(&mut r, &["SELECT", "2"]);
    let n: i64 = q(&mut r, &["GET", "n"]);
    assert_eq!(n, 41);
    // redis-server appends to the same incremental file.
    let _: i64 = q(&mut r, &["INCR", "n"]);
    let _: () = q(&mut r, &["SELECT", "0"]);
    let _: () = q(&mut r, &["SET", "k", "from-redis"]);
    let _: Result<(), _> = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut r);
    drop(redis);

    let server = start(&dir, &["--appendonly", "yes"]);
    let mut c = server.conn();
    let k: String = q(&mut c, &["GET", "k"]);
    assert_eq!(k, "from-redis");
    let h: String = q(&mut c, &["HGET", "h", "f"]);
    assert_eq!(h, "v");
    let _: () = q(&mut c, &["SELECT", "2"]);
    let n: i64 = q(&mut c, &["GET", "n"]);
    assert_eq!(n, 42);
    drop(c);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bgrewriteaof_replaces_the_base_and_a_restart_loads_it() {
    let dir = temp_dir();
    let server = start(&dir, &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = server.conn();
    for i in 0..200 {
        let _: i64 = q(&mut c, &["INCR", &format!("k{}", i % 20)]);
    }
    let reply: String = q(&mut c, &["BGREWRITEAOF"]);
    assert_eq!(reply, "Background append only file rewriting started");
    let _: () = q(&mut c, &["SET", "during-or-after", "1"]);
    assert!(
        common::eventually(Duration::from_secs(10), || {
            info_field(&mut c, "aof_rewrites") == "1"
                && info_field(&mut c, "aof_rewrite_in_progress") == "0"
        }),
        "the rewrite did not finish"
    );
    let _: () = q(&mut c, &["SET", "after", "1"]);
    let before = digest(&mut c);
    drop(c);
    drop(server);
    let folder = dir.join("appendonlydir");
    let manifest =
        std::fs::read_to_string(folder.join("appendonly.aof.manifest")).expect("manifest");
    assert_eq!(
        manifest,
        "file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n"
    );
    assert!(!folder.join("appendonly.aof.1.incr.aof").exists());
    assert!(!folder.join("appendonly.aof.1.base.rdb").exists());
    // The 200 INCRs are in the base now, not in the incremental file.
    let incr = std::fs::read(folder.join("appendonly.aof.2.incr.aof")).expect("incr");
    assert!(
        incr.len() < 400,
        "{} bytes in the new incremental file",
        incr.len()
    );

    let server = start(&dir, &["--appendonly", "yes"]);
    let mut c = server.conn();
    assert_eq!(digest(&mut c), before);
    let k0: i64 = q(&mut c, &["GET", "k0"]);
    assert_eq!(k0, 10);
    drop(c);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The log rewrites itself once it grew past `auto-aof-rewrite-min-size`
/// and by `auto-aof-rewrite-percentage` % of its size after the last
/// rewrite; the data survives a restart from the new base.
#[test]
fn the_log_rewrites_itself_as_it_grows() {
    let dir = temp_dir();
    let server = start(
        &dir,
        &[
            "--appendonly",
            "yes",
            "--auto-aof-rewrite-min-size",
            "4kb",
            "--auto-aof-rewrite-percentage",
            "100",
        ],
    );
    let mut c = server.conn();
    assert_eq!(info_field(&mut c, "aof_rewrites"), "0");
    let value = "x".repeat(100);
    for i in 0..200 {
        let _: () = q(&mut c, &["SET", &format!("k{}", i % 10), &value]);
    }
    assert!(
        common::eventually(Duration::from_secs(10), || {
            info_field(&mut c, "aof_rewrites") != "0"
                && info_field(&mut c, "aof_rewrite_in_progress") == "0"
        }),
        "no automatic rewrite after {} bytes",
        info_field(&mut c, "aof_current_size")
    );
    // The 200 SETs of 10 keys are 10 keys in the new base.
    let size: u64 = info_field(&mut c, "aof_current_size")
        .parse()
        .expect("size");
    assert!(size < 4096, "{size} bytes after the rewrite");
    let before = digest(&mut c);
    let (server, mut c) = kill_and_restart(&dir, server);
    assert_eq!(digest(&mut c), before);
    drop(c);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_write_cut_short_by_a_crash_is_truncated_at_load() {
    let dir = temp_dir();
    let server = start(&dir, &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "whole", "1"]);
    drop(c);
    drop(server);
    let incr = dir.join("appendonlydir").join("appendonly.aof.1.incr.aof");
    let whole = std::fs::metadata(&incr).expect("incr").len();
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&incr)
            .expect("open");
        f.write_all(b"#KV 1 1\r\n*3\r\n$3\r\nSET\r\n$3\r\ncut\r\n$10\r\nshor")
            .expect("append");
    }
    let server = start(&dir, &["--appendonly", "yes"]);
    let mut c = server.conn();
    let w: i64 = q(&mut c, &["GET", "whole"]);
    assert_eq!(w, 1);
    let cut: Option<String> = q(&mut c, &["GET", "cut"]);
    assert_eq!(cut, None);
    assert_eq!(std::fs::metadata(&incr).expect("incr").len(), whole);
    // What comes after is logged after the whole writes.
    let _: () = q(&mut c, &["SET", "next", "1"]);
    let (server, mut c) = kill_and_restart(&dir, server);
    let n: i64 = q(&mut c, &["GET", "next"]);
    assert_eq!(n, 1);
    drop(c);
    drop(server);

    // Garbage in the middle of the file stops the start with an error.
    std::fs::write(&incr, b"this is not a command\r\n").expect("write");
    let text = start_fails(&dir, &[]);
    assert!(
        text.contains("Bad file format reading the append only file"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn config_set_appendonly_starts_and_stops_the_log() {
    let dir = temp_dir();
    let server = start(&dir, &[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "before", "1"]);
    assert_eq!(info_field(&mut c, "aof_enabled"), "0");
    let refused = err(&mut c, &["CONFIG", "SET", "appendonly", "maybe"]);
    assert!(
        refused.contains("argument must be 'yes' or 'no'"),
        "{refused}"
    );
    let refused = err(&mut c, &["CONFIG", "SET", "appendfsync", "sometimes"]);
    assert!(refused.contains("always, everysec, no"), "{refused}");
    let _: () = q(&mut c, &["CONFIG", "SET", "appendonly", "yes"]);
    let value: Vec<String> = q(&mut c, &["CONFIG", "GET", "appendonly"]);
    assert_eq!(value, vec!["appendonly", "yes"]);
    let _: () = q(&mut c, &["SET", "logged", "1"]);
    // WAITAOF: this server's copy is fsynced; it has no replicas.
    let synced: Vec<i64> = q(&mut c, &["WAITAOF", "1", "0", "0"]);
    assert_eq!(synced, vec![1, 0]);
    drop(c);
    drop(server);
    // The data from before the log started is in its base.
    let server = start(&dir, &["--appendonly", "yes"]);
    let mut c = server.conn();
    let both: Vec<Option<i64>> = q(&mut c, &["MGET", "before", "logged"]);
    assert_eq!(both, vec![Some(1), Some(1)]);
    let _: () = q(&mut c, &["CONFIG", "SET", "appendonly", "no"]);
    assert_eq!(info_field(&mut c, "aof_enabled"), "0");
    let _: () = q(&mut c, &["SET", "unlogged", "1"]);
    let (server, mut c) = kill_and_restart(&dir, server);
    let unlogged: Option<i64> = q(&mut c, &["GET", "unlogged"]);
    assert_eq!(unlogged, None);
    drop(c);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// RESP as a client sends it (what redis-server writes in its files).
fn resp(args: &[&str]) -> String {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    out
}

fn start_fails(dir: &std::path::Path, extra: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kvasir"))
        .args([
            "server",
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "--appendonly",
            "yes",
            "--dir",
        ])
        .arg(dir)
        .args(extra)
        .output()
        .expect("run kvasir");
    assert!(!out.status.success(), "the start should have failed");
    // The reason is in the log (stdout), once, as redis-server logs it.
    let log = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    log
}

/// Files redis-server wrote load as it loads them: a Redis 6 single
/// `appendonly.aof` is moved into the folder as its base; writes without
/// Kvasir's time stamp replay with nothing expiring during the load (a
/// PEXPIREAT in the past does not delete the key the next command
/// appends to: both go once the load ends); an unknown command, or a cut
/// file with `aof-load-truncated no`, stops the start with Redis's words.
#[test]
fn files_redis_wrote_load_as_redis_loads_them() {
    let dir = temp_dir();
    let old = [
        resp(&["SET", "k1", "v1"]),
        resp(&["RPUSH", "list", "foo"]),
        resp(&["PEXPIREAT", "list", "1000"]),
        resp(&["RPUSH", "list", "bar"]),
    ]
    .concat();
    std::fs::write(dir.join("appendonly.aof"), &old).expect("old file");
    let server = start(&dir, &["--appendonly", "yes"]);
    let mut c = server.conn();
    let k1: String = q(&mut c, &["GET", "k1"]);
    assert_eq!(k1, "v1");
    let len: i64 = q(&mut c, &["LLEN", "list"]);
    assert_eq!(len, 0, "the list expired once loaded, with both elements");
    // GETEX without an option writes nothing to the log.
    let incr = dir.join("appendonlydir").join("appendonly.aof.1.incr.aof");
    let before = std::fs::metadata(&incr).expect("incr").len();
    let _: Option<String> = q(&mut c, &["GETEX", "k1"]);
    assert_eq!(std::fs::metadata(&incr).expect("incr").len(), before);
    drop(c);
    drop(server);
    assert!(!dir.join("appendonly.aof").exists());
    let manifest = std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest"))
        .expect("manifest");
    assert_eq!(
        manifest,
        "file appendonly.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );

    std::fs::write(&incr, resp(&["BLA", "foo"])).expect("write");
    let text = start_fails(&dir, &[]);
    assert!(
        text.contains("Unknown command 'BLA' reading the append only file"),
        "{text}"
    );
    let cut = resp(&["SET", "a", "b"]) + "*3\r\n$3\r\nSET\r\n";
    std::fs::write(&incr, cut).expect("write");
    let text = start_fails(&dir, &["--aof-load-truncated", "no"]);
    assert!(
        text.contains("Unexpected end of file reading the append only file"),
        "{text}"
    );
    std::fs::write(dir.join("appendonlydir/appendonly.aof.manifest"), "").expect("write");
    let text = start_fails(&dir, &[]);
    assert!(text.contains("Found an empty AOF manifest"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Redis 6's `appendonly.aof` with its default `aof-use-rdb-preamble yes`:
/// an RDB image, then the commands logged after the last rewrite. Both
/// redis-server 7.0.15 and Kvasir upgrade it and load the image and the
/// commands after it to the same data.
#[test]
fn a_redis_6_file_with_an_rdb_preamble_loads() {
    // The preamble: an RDB image redis-server wrote.
    let source = temp_dir();
    let (redis, port) = start_redis_in(Some(&source), &[]);
    let mut r = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|c| c.get_connection())
        .expect("connect to redis-server");
    let _: () = q(&mut r, &["SET", "from-image", "1"]);
    let _: i64 = q(&mut r, &["RPUSH", "list", "a", "b"]);
    let _: i64 = q(&mut r, &["HSET", "gone", "f", "v"]);
    let _: () = q(&mut r, &["SAVE"]);
    drop(r);
    drop(redis);
    let mut file = std::fs::read(source.join("dump.rdb")).expect("dump.rdb");
    let _ = std::fs::remove_dir_all(&source);
    file.extend_from_slice(
        [
            resp(&["SELECT", "0"]),
            resp(&["SET", "from-tail", "2"]),
            resp(&["RPUSH", "list", "c"]),
            resp(&["DEL", "gone"]),
        ]
        .concat()
        .as_bytes(),
    );

    let check = |c: &mut redis::Connection, who: &str| {
        let image: String = q(c, &["GET", "from-image"]);
        let tail: String = q(c, &["GET", "from-tail"]);
        let list: Vec<String> = q(c, &["LRANGE", "list", "0", "-1"]);
        let gone: i64 = q(c, &["EXISTS", "gone"]);
        assert_eq!(
            (image.as_str(), tail.as_str(), list, gone),
            ("1", "2", vec!["a".to_string(), "b".into(), "c".into()], 0),
            "{who}"
        );
    };
    let redis_dir = temp_dir();
    std::fs::write(redis_dir.join("appendonly.aof"), &file).expect("write");
    let (redis, port) = start_redis_in(Some(&redis_dir), &["--appendonly", "yes"]);
    let mut r = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|c| c.get_connection())
        .expect("connect to redis-server");
    check(&mut r, "redis-server");
    drop(r);
    drop(redis);
    let _ = std::fs::remove_dir_all(&redis_dir);

    let dir = temp_dir();
    std::fs::write(dir.join("appendonly.aof"), &file).expect("write");
    let server = start(&dir, &["--appendonly", "yes"]);
    let mut c = server.conn();
    check(&mut c, "kvasir");
    // And again from the upgraded folder, with a write after the upgrade.
    let _: () = q(&mut c, &["SET", "after", "3"]);
    let (server, mut c) = kill_and_restart(&dir, server);
    check(&mut c, "kvasir after a restart");
    let after: String = q(&mut c, &["GET", "after"]);
    assert_eq!(after, "3");
    drop(c);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Redis 7's upgrade writes the manifest before it moves the Redis 6 file
/// into the folder; a start after a crash between the two finishes the
/// move, as redis-server does.
#[test]
fn an_interrupted_upgrade_is_finished() {
    let dir = temp_dir();
    std::fs::write(
        dir.join("appendonly.aof"),
        [resp(&["SET", "k1", "v1"]), resp(&["SET", "k2", "v2"])].concat(),
    )
    .expect("old file");
    std::fs::create_dir_all(dir.join("appendonlydir")).expect("folder");
    std::fs::write(
        dir.join("appendonlydir/appendonly.aof.manifest"),
        "file appendonly.aof seq 1 type b\n",
    )
    .expect("manifest");
    let server = start(&dir, &["--appendonly", "yes"]);
    let mut c = server.conn();
    let got: Vec<String> = q(&mut c, &["MGET", "k1", "k2"]);
    assert_eq!(got, vec!["v1", "v2"]);
    assert!(!dir.join("appendonly.aof").exists());
    assert!(dir.join("appendonlydir/appendonly.aof").exists());
    drop(c);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `aof-timestamp-enabled yes`: a `#TS:<seconds>` line before the first
/// write of each second, as Redis writes it, so that redis-check-aof's
/// `--truncate-to-timestamp` gives a point-in-time recovery of Kvasir's
/// log too.
#[test]
fn timestamp_annotations_let_redis_check_aof_cut_at_a_second() {
    let dir = temp_dir();
    let server = start(&dir, &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "aof-timestamp-enabled", "yes"]);
    let _: () = q(&mut c, &["SET", "early", "1"]);
    let incr = dir.join("appendonlydir/appendonly.aof.1.incr.aof");
    let text = String::from_utf8(std::fs::read(&incr).expect("incr")).expect("text");
    let first: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("#TS:"))
        .and_then(|t| t.trim().parse().ok())
        .expect("a #TS line before the first write");
    // The next second's write gets a line of its own.
    while common::now_secs() <= first {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _: () = q(&mut c, &["SET", "late", "2"]);
    drop(c);
    drop(server);
    let text = String::from_utf8(std::fs::read(&incr).expect("incr")).expect("text");
    assert_eq!(text.matches("#TS:").count(), 2, "{text}");

    let out = std::process::Command::new("redis-check-aof")
        .arg("--truncate-to-timestamp")
        .arg(first.to_string())
        .arg(dir.join("appendonlydir/appendonly.aof.manifest"))
        .output()
        .expect("redis-check-aof (scripts/install-test-deps.sh)");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("Successfully truncated"), "{said}");
    let server = start(&dir, &["--appendonly", "yes"]);
    let mut c = server.conn();
    let got: Vec<Option<String>> = q(&mut c, &["MGET", "early", "late"]);
    assert_eq!(got, vec![Some("1".to_string()), None]);
    drop(c);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// BGREWRITEAOF runs in a child process, as in Redis: the server keeps
/// logging to a new incremental file meanwhile; CONFIG SET appendonly no
/// stops the child ("Killing running AOF rewrite child") and leaves no
/// temporary file; with the log off, BGREWRITEAOF writes a base alone
/// that DEBUG LOADAOF loads.
#[test]
fn the_rewrite_child_is_stopped_with_the_log_and_loadaof_reads_the_folder() {
    let dir = temp_dir();
    let server = start(&dir, &["--appendonly", "yes", "--save", ""]);
    let mut c = server.conn();
    let pid = server.child.id();
    let mut fill = redis::pipe();
    for i in 0..200 {
        fill.cmd("RPUSH").arg(format!("l{}", i % 7)).arg(i).ignore();
    }
    let _: () = fill.query(&mut c).expect("fill");
    let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "100000"]);
    let started: String = q(&mut c, &["BGREWRITEAOF"]);
    assert_eq!(started, "Background append only file rewriting started");
    assert_eq!(info_field(&mut c, "aof_rewrite_in_progress"), "1");
    assert_eq!(common::children_of(pid).len(), 1);
    let _: i64 = q(&mut c, &["RPUSH", "during", "rewrite"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "appendonly", "no"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut killed = false;
    while !killed && std::time::Instant::now() < deadline {
        if let Ok(line) = server.log.recv_timeout(Duration::from_millis(100)) {
            killed = line.contains("Killing running AOF rewrite child");
        }
    }
    assert!(killed, "no 'Killing running AOF rewrite child' in the log");
    assert!(common::eventually(Duration::from_secs(5), || {
        common::children_of(pid).is_empty()
    }));
    assert_eq!(info_field(&mut c, "aof_rewrite_in_progress"), "0");
    let folder = dir.join("appendonlydir");
    let leftovers: Vec<String> = std::fs::read_dir(&folder)
        .expect("folder")
        .filter_map(|e| e.ok()?.file_name().to_str().map(str::to_string))
        .filter(|n| n.starts_with("temp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Log off: a base alone, then DEBUG LOADAOF empties the data and
    // loads it.
    let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    let before = digest(&mut c);
    let _: String = q(&mut c, &["BGREWRITEAOF"]);
    assert!(common::eventually(Duration::from_secs(10), || {
        info_field(&mut c, "aof_rewrite_in_progress") == "0"
    }));
    let _: () = q(&mut c, &["SET", "not", "in the folder"]);
    let _: () = q(&mut c, &["DEBUG", "LOADAOF"]);
    assert_eq!(digest(&mut c), before);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// CONFIG SET appendonly yes on a running server, as Redis 7 starts the
/// log: a child writes the first base while writes go to a temporary
/// incremental file that no manifest names; WAITAOF waits for the base;
/// a failed first rewrite removes the temporary file and is tried again;
/// once the base is in place the manifest names base and incremental
/// file, and a kill -9 loses nothing that was answered.
#[test]
fn appendonly_yes_at_run_time_writes_its_first_base_in_a_child() {
    let dir = temp_dir();
    let server = start(&dir, &["--save", ""]);
    let mut c = server.conn();
    let pid = server.child.id();
    for i in 0..50 {
        let _: () = q(&mut c, &["SET", &format!("k{i}"), &i.to_string()]);
    }
    // 200 ms a key: the first base takes ten seconds.
    let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "200000"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "appendonly", "yes"]);
    assert_eq!(info_field(&mut c, "aof_rewrite_in_progress"), "1");
    assert_eq!(info_field(&mut c, "aof_enabled"), "1");
    let folder = dir.join("appendonlydir");
    assert!(folder.join("temp-appendonly.aof.incr").exists());
    assert!(!folder.join("appendonly.aof.manifest").exists());
    let _: i64 = q(&mut c, &["INCR", "during"]);
    let waited: Vec<i64> = q(&mut c, &["WAITAOF", "1", "0", "100"]);
    assert_eq!(waited, vec![0, 0], "no base yet: not durable");

    // The first try fails: its temporary file goes, and it is retried.
    let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    for child in common::children_of(pid) {
        // SAFETY: kill(2) of the server's child, as Redis's test does.
        unsafe {
            libc::kill(child as libc::pid_t, libc::SIGKILL);
        }
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut removed = false;
    while !removed && std::time::Instant::now() < deadline {
        if let Ok(line) = server.log.recv_timeout(Duration::from_millis(100)) {
            removed = line.contains("Removing the temp incr aof file");
        }
    }
    assert!(removed, "no 'Removing the temp incr aof file' in the log");
    let _: i64 = q(&mut c, &["INCR", "during"]);
    let synced: Vec<i64> = q(&mut c, &["WAITAOF", "1", "0", "0"]);
    assert_eq!(synced, vec![1, 0]);
    let manifest =
        std::fs::read_to_string(folder.join("appendonly.aof.manifest")).expect("manifest");
    assert_eq!(
        manifest,
        "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    assert!(!folder.join("temp-appendonly.aof.incr").exists());
    assert_eq!(info_field(&mut c, "aof_rewrites"), "1");
    assert_eq!(info_field(&mut c, "aof_last_bgrewrite_status"), "ok");
    let _: i64 = q(&mut c, &["INCR", "during"]);
    let before = digest(&mut c);
    let (server, mut c) = kill_and_restart(&dir, server);
    assert_eq!(digest(&mut c), before);
    let during: i64 = q(&mut c, &["GET", "during"]);
    assert_eq!(during, 3);
    // DEBUG LOADAOF leaves nothing to save (the data is the folder's).
    let _: () = q(&mut c, &["DEBUG", "LOADAOF"]);
    let dirty = info_field(&mut c, "rdb_changes_since_last_save");
    assert_eq!(dirty, "0");

    // Turned on inside a transaction: the first base is scheduled for
    // after it, as Redis logs and does.
    let _: () = q(&mut c, &["CONFIG", "SET", "appendonly", "no"]);
    let rewrites: u64 = info_field(&mut c, "aof_rewrites")
        .parse()
        .expect("rewrites");
    let (set, on): ((), ()) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("in-exec")
        .arg("1")
        .cmd("CONFIG")
        .arg("SET")
        .arg("appendonly")
        .arg("yes")
        .query(&mut c)
        .expect("EXEC");
    let _ = (set, on);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut scheduled = false;
    while !scheduled && std::time::Instant::now() < deadline {
        if let Ok(line) = server.log.recv_timeout(Duration::from_millis(100)) {
            scheduled = line.contains("AOF was enabled during a transaction");
        }
    }
    assert!(
        scheduled,
        "no 'AOF was enabled during a transaction' in the log"
    );
    assert!(common::eventually(Duration::from_secs(10), || {
        let mut c = server.conn();
        info_field(&mut c, "aof_rewrites")
            .parse::<u64>()
            .is_ok_and(|n| n > rewrites)
            && info_field(&mut c, "aof_rewrite_in_progress") == "0"
            && info_field(&mut c, "aof_rewrite_scheduled") == "0"
    }));
    let synced: Vec<i64> = q(&mut c, &["WAITAOF", "1", "0", "0"]);
    assert_eq!(synced, vec![1, 0]);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A write replays under the encoding thresholds it ran under, whatever
/// CONFIG SET changed since: an approximate trim removes whole stream
/// nodes (where they end is `stream-node-max-entries`), and a set's
/// encoding (`set-max-intset-entries`) may decide what SPOP picks. Redis
/// logs such writes as their effect (an exact MAXLEN, SREMs); Kvasir logs
/// the command and the thresholds. Both must load back what they answered (Redis's
/// "XADD with ~ MAXLEN can propagate correctly").
#[test]
fn a_replay_runs_each_write_under_the_thresholds_it_ran_under() {
    let state = |c: &mut redis::Connection| {
        let len: i64 = q(c, &["XLEN", "mystream"]);
        let first: redis::Value = q(c, &["XRANGE", "mystream", "-", "+", "COUNT", "1"]);
        let mut members: Vec<String> = q(c, &["SMEMBERS", "s"]);
        members.sort();
        (len, format!("{first:?}"), members)
    };
    let run = |c: &mut redis::Connection| {
        for i in 1..=100 {
            let id = format!("{i}-1");
            let _: String = q(c, &["XADD", "mystream", &id, "xitem", "v"]);
        }
        // Whole nodes of 10 go: 51 entries stay (nodes of 1 would leave 45).
        let _: String = q(
            c,
            &[
                "XADD", "mystream", "MAXLEN", "~", "45", "101-1", "xitem", "v",
            ],
        );
        let _: String = q(c, &["XADD", "mystream", "102-1", "xitem", "v"]);
        let members: Vec<String> = (1..=20).map(|i| i.to_string()).collect();
        let mut sadd = vec!["SADD", "s"];
        sadd.extend(members.iter().map(String::as_str));
        let _: i64 = q(c, &sadd);
        let _: Vec<String> = q(c, &["SPOP", "s", "5"]);
        let _: () = q(c, &["CONFIG", "SET", "stream-node-max-entries", "1"]);
        let _: () = q(c, &["CONFIG", "SET", "set-max-intset-entries", "1"]);
        let before = state(c);
        let _: () = q(c, &["DEBUG", "LOADAOF"]);
        let after = state(c);
        (before, after)
    };
    let dir = temp_dir();
    let redis_dir = dir.join("redis");
    std::fs::create_dir_all(&redis_dir).expect("a folder for redis-server");
    let (_redis, port) = start_redis_in(
        Some(&redis_dir),
        &[
            "--appendonly",
            "yes",
            "--stream-node-max-entries",
            "10",
            "--enable-debug-command",
            "yes",
        ],
    );
    let mut r = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|c| c.get_connection())
        .expect("connect to redis-server");
    let (want_before, want_after) = run(&mut r);
    assert_eq!(want_before, want_after, "redis-server");
    let kvasir_dir = dir.join("kvasir");
    std::fs::create_dir_all(&kvasir_dir).expect("a folder for kvasir");
    let server = start(
        &kvasir_dir,
        &["--appendonly", "yes", "--stream-node-max-entries", "10"],
    );
    let mut c = server.conn();
    let (before, after) = run(&mut c);
    assert_eq!(want_before.0, 52, "redis-server's XLEN");
    assert_eq!(before.0, want_before.0, "XLEN as redis-server's");
    assert_eq!(before.1, want_before.1, "the first entry as redis-server's");
    assert_eq!(before, after, "kvasir after DEBUG LOADAOF");
    // A restart replays under the same thresholds too.
    drop(c);
    let (server, mut c) = kill_and_restart(&kvasir_dir, server);
    assert_eq!(state(&mut c), before, "kvasir after a restart");
    drop(c);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

//! Lua scripting (EVAL, EVALSHA, SCRIPT, FUNCTION, FCALL) side by side with
//! a real `redis-server` 7.0: the same scripts give the same replies,
//! errors included; then on a 3-node cluster, where a script is one log
//! entry applied on every replica: replicas end identical even when
//! scripts draw random numbers, EVALSHA and FCALL work on every leader,
//! and undeclared keys of other slots are refused.
//!
//! Needs `redis-server` on PATH (scripts/install-test-deps.sh).

#[path = "common/cluster.rs"]
mod cluster;
mod common;

use cluster::{key_slot, Cluster};
use common::redis_server::{run, start_redis, Outcome};
use common::Kvasir;
use std::time::Duration;

fn words(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

/// Scripts whose replies must equal Redis's exactly.
const SCRIPTS: &[&[&str]] = &[
    &["EVAL", "return 1", "0"],
    &["EVAL", "return {1, 2, 3.7, 'x', {ok='fine'}, false, nil, 4}", "0"],
    &["EVAL", "return {1, {err='bad'}, 2}", "0"],
    &["EVAL", "return 3.99", "0"],
    &["EVAL", "return -3.99", "0"],
    &["EVAL", "return true", "0"],
    &["EVAL", "return false", "0"],
    &["EVAL", "return nil", "0"],
    &["EVAL", "return {err='My Error'}", "0"],
    &["EVAL", "return redis.error_reply('noprefix')", "0"],
    &["EVAL", "return redis.error_reply('E2 x')", "0"],
    &["EVAL", "return redis.status_reply('FOO')", "0"],
    &["EVAL", "return redis.sha1hex('')", "0"],
    &["EVAL", "return redis.REDIS_VERSION", "0"],
    &["EVAL", "return KEYS[1] .. ARGV[1] .. #ARGV", "1", "k", "a", "b"],
    &["EVAL", "return a", "0"],
    &["EVAL", "a = 1", "0"],
    &["EVAL", "error('boom')", "0"],
    &["EVAL", "return x +", "0"],
    &["EVAL", "return 1", "-1"],
    &["EVAL", "return 1", "3", "a"],
    &["EVAL", "return 1", "x"],
    &["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"],
    &["EVAL", "return redis.call('set', KEYS[1], ARGV[1])", "1", "s1", "v1"],
    &["EVAL", "return redis.call('get', KEYS[1])", "1", "s1"],
    &["EVAL", "return redis.call('incrby', KEYS[1], 5)", "1", "n1"],
    &["EVAL", "return redis.call('incrbyfloat', KEYS[1], 1.5)", "1", "n2"],
    &["EVAL", "local r = redis.call('get') return r", "0"],
    &["EVAL", "local r = redis.call('nosuch') return r", "0"],
    &["EVAL", "local x = 1\nreturn redis.call('nosuch')", "0"],
    &["EVAL", "return redis.call('incr', KEYS[1])", "1", "s1"],
    &["EVAL", "return redis.setresp(4)", "0"],
    &["EVAL", "local ok, e = pcall(redis.call, 'incr', 'kx', 'y') return {ok, e}", "0"],
    &["EVAL", "return redis.pcall('nosuch')", "0"],
    &["EVAL", "local ok, e = pcall(redis.call, 'nosuch') return e", "0"],
    &["EVAL", "return redis.pcall('lpush', KEYS[1], 'a')", "1", "s1"],
    // Arguments: nil (last, in the middle, past the fifth), other types,
    // numbers, none.
    &["EVAL", "return redis.pcall('get', 'a', nil)", "0"],
    &["EVAL", "return redis.pcall('del', nil, 'a')", "0"],
    &["EVAL", "local r = redis.call('del', 'a', nil) return r", "0"],
    &["EVAL", "return redis.pcall('del', 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', nil)", "0"],
    &["EVAL", "return redis.pcall('set', 'a', {})", "0"],
    &["EVAL", "return redis.pcall('set', 'a', true)", "0"],
    &["EVAL", "return redis.pcall('mset', 'a', {}, 'b', 2, 'c', 3, 'd', 4, 'e', true)", "0"],
    &["EVAL", "return redis.call('mset', 'n1', 1, 'n2', 2.5, 'n3', -3, 'n4', 4, 'n5', 0.5)", "0"],
    &["EVAL", "return redis.call('mget', 'n1', 'n2', 'n3', 'n4', 'n5')", "0"],
    &["EVAL", "return redis.pcall()", "0"],
    &["EVAL", "local ok, e = pcall(redis.call) return e", "0"],
    &["EVAL", "local r = redis.call('watch', 'x') return r", "0"],
    &["EVAL", "return redis.call('rpush', KEYS[1], 'a', 'b', 'c')", "1", "l1"],
    &["EVAL", "return redis.call('lrange', KEYS[1], 0, -1)", "1", "l1"],
    &["EVAL", "return redis.call('hset', KEYS[1], 'f', 'v', 'g', 'w')", "1", "h1"],
    &["EVAL", "return redis.call('hgetall', KEYS[1])", "1", "h1"],
    &["EVAL", "return redis.call('zadd', KEYS[1], 1.5, 'a', 2, 'b')", "1", "z1"],
    &["EVAL", "return redis.call('zrange', KEYS[1], 0, -1, 'withscores')", "1", "z1"],
    &["EVAL", "return redis.call('zscore', KEYS[1], 'a')", "1", "z1"],
    &["EVAL", "return redis.call('get', 'missing')", "0"],
    &["EVAL", "local r = redis.call('blpop', 'emptylist', 0) return r", "0"],
    &["EVAL", "return redis.call('ping')", "0"],
    &["EVAL", "return redis.call('echo', 'hi')", "0"],
    &["EVAL", "redis.setresp(3) return redis.call('hgetall', KEYS[1])", "1", "h1"],
    &["EVAL", "redis.setresp(3) return redis.call('get', 'missing') == nil", "0"],
    &["EVAL", "redis.setresp(4) return 1", "0"],
    &["EVAL", "return type(print)", "0"],
    &["EVAL", "return type(os)", "0"],
    &["EVAL", "return type(require)", "0"],
    &["EVAL", "return type(loadstring)", "0"],
    &["EVAL", "return loadstring(string.dump(function() return 1 end))", "0"],
    &["EVAL", "string.x = 1", "0"],
    &["EVAL", "return {double = 3.5}", "0"],
    &["EVAL", "return tostring(1e20)", "0"],
    &["EVAL", "return 1e20", "0"],
    &["EVAL", "return string.format('%5.2f|%d|%s', 3.14159, 42, 'x')", "0"],
    &["EVAL", "return table.concat({'a', 'b'}, '-')", "0"],
    &["EVAL", "return cjson.encode({1, 2, {a = 1}})", "0"],
    &["EVAL", "return cjson.decode('[1,2,{\"a\":\"b\"}]')[3].a", "0"],
    &["EVAL", "return cmsgpack.unpack(cmsgpack.pack({1, 2, 'x'}))", "0"],
    &["EVAL", "return bit.band(0xff, 0x0f)", "0"],
    &["EVAL", "return struct.pack('>I2', 258)", "0"],
    &["EVAL", "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", "1", "s1"],
    &["EVAL", "#!lua flags=no-writes\nlocal r = redis.call('set', KEYS[1], 'x') return r", "1", "s1"],
    &["EVAL", "#!lua flags=bogus\nreturn 1", "0"],
    &["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "s1"],
    &["EVAL_RO", "local r = redis.call('set', KEYS[1], 'x') return r", "1", "s1"],
    // Globals are read-only whether they exist or not, and a refused
    // write leaves nothing behind for later scripts.
    &["EVAL", "string = nil", "0"],
    &["EVAL", "KEYS = 5", "0"],
    &["EVAL", "redis = {}", "0"],
    &["EVAL", "_G.tostring = nil", "0"],
    &["EVAL", "return string.len('ab') .. tostring(type(redis.call))", "0"],
    // Number arguments to redis.call are formatted with %.17g in 7.0.
    &["EVAL", "redis.call('SET', KEYS[1], 0.1) return redis.call('GET', KEYS[1])", "1", "s2"],
    &["EVAL", "redis.call('SET', KEYS[1], 1e15) return redis.call('GET', KEYS[1])", "1", "s2"],
    &["EVAL", "redis.call('SET', KEYS[1], 3) return redis.call('GET', KEYS[1])", "1", "s2"],
    &["EVAL", "redis.call('SET', KEYS[1], -2.5e-7) return redis.call('GET', KEYS[1])", "1", "s2"],
    &["EVAL", "return redis.call('INCRBY', KEYS[1], 2^53)", "1", "s3"],
    // The replies redis.call hands over without mlua (integer, nil, bulk,
    // status) and those it leaves to the general conversion, through call
    // and pcall, in RESP2 and RESP3.
    &["EVAL", "local r = redis.call('SET', KEYS[1], ARGV[1]) return {r.ok, type(r), redis.call('GET', KEYS[1])}", "1", "s4", "a\0b"],
    &["EVAL", "local r = redis.pcall('SET', KEYS[1], 'x') return r", "1", "s4"],
    &["EVAL", "local r = redis.pcall('INCR', KEYS[1]) return {type(r), r.err}", "1", "s4"],
    &["EVAL", "return {redis.call('GET', 'missing') == false, redis.call('EXISTS', KEYS[1])}", "1", "s4"],
    &["EVAL", "redis.setresp(3) local r = redis.call('SET', KEYS[1], 'y') return {r.ok, redis.call('GET', 'missing') == nil, redis.call('GET', KEYS[1])}", "1", "s4"],
    &["EVAL", "redis.setresp(3) return redis.pcall('LPUSH', KEYS[1], 'v')", "1", "s4"],
    &["EVAL", "local ok, e = pcall(redis.call, 'GET', KEYS[1], 'extra') return {tostring(ok), e}", "1", "s4"],
    &["EVAL", "return redis.call('MSET', 'a1', 'b1', 'a2', 'b2', 'a3', 'b3', 'a4', 'b4', 'a5', 'b5', 'a6', 'b6', 'a7', 'b7', 'a8', 'b8', 'a9', 'b9', 'a10', 'b10', 'a11', 'b11', 'a12', 'b12', 'a13', 'b13', 'a14', 'b14', 'a15', 'b15', 'a16', 'b16', 'a17', 'b17')", "0"],
    &["SCRIPT", "LOAD", "return 'loaded'"],
    &["EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"],
    &["EVALSHA", "B534286061D4B9E4026607613B95C06C06015AE8", "0"],
    &["EVALSHA_RO", "b534286061d4b9e4026607613b95c06c06015ae8", "0"],
    &["SCRIPT", "EXISTS", "b534286061d4b9e4026607613b95c06c06015ae8", "ffff"],
    &["SCRIPT", "LOAD", "return +"],
    &["SCRIPT", "FLUSH", "BOGUS"],
    &["SCRIPT", "KILL"],
    &["SCRIPT", "FLUSH"],
    &["SCRIPT", "EXISTS", "b534286061d4b9e4026607613b95c06c06015ae8"],
    &["EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"],
    &["FUNCTION", "LOAD", "#!lua name=mylib\nredis.register_function('myincr', function(keys, args) return redis.call('incrby', keys[1], args[1]) end)\nredis.register_function{function_name='myget', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}, description='reads'}"],
    &["FUNCTION", "LOAD", "#!lua name=mylib\nredis.register_function('other', function() return 1 end)"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function('myincr', function() return 1 end)"],
    &["FUNCTION", "LOAD", "return 1"],
    &["FUNCTION", "LOAD", "#!lua name=bad-name\nredis.register_function('f', function() return 1 end)"],
    &["FUNCTION", "LOAD", "#!lua name=empty\nlocal x = 1"],
    &["FUNCTION", "LOAD", "#!js name=js\nx"],
    &["FUNCTION", "LOAD", "#!lua name=lib"],
    &["FCALL", "myincr", "1", "fn1", "7"],
    &["FCALL", "myincr", "1", "fn1", "3"],
    &["FCALL_RO", "myget", "1", "fn1"],
    &["FCALL_RO", "myincr", "1", "fn1", "1"],
    &["FCALL", "nosuch", "0"],
    &["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "nomatch*"],
    &["FUNCTION", "DELETE", "nosuch"],
    &["FUNCTION", "DELETE", "mylib"],
    &["FCALL", "myincr", "1", "fn1", "3"],
    &["FUNCTION", "LIST"],
    &["FUNCTION", "FLUSH"],
    // pcall, xpcall and coroutines run in coroutines of their own (so a
    // busy script can pause inside them) and must answer as Lua 5.1's.
    &["EVAL", "return {pcall(function() error({err='E1 tabled'}) end)}", "0"],
    &["EVAL", "return {pcall(function(a, b) return a + b, 'x' end, 2, 3)}", "0"],
    &["EVAL", "return {pcall(error, 'plain')}", "0"],
    &["EVAL", "return {pcall(nil)}", "0"],
    &["EVAL", "return {xpcall(function() error('boom') end, function(e) return 'handled: ' .. e end)}", "0"],
    &["EVAL", "return {xpcall(function() return 1, 2 end, function(e) return e end)}", "0"],
    &["EVAL", "return {xpcall(function() error('x') end, function(e) error('again') end)}", "0"],
    &["EVAL", "return {pcall(function() coroutine.yield(1) end)}", "0"],
    &["EVAL", "local co = coroutine.create(function(a) local b = coroutine.yield(a + 1) return b * 2 end) local r1 = {coroutine.resume(co, 1)} local r2 = {coroutine.resume(co, 10)} local r3 = {coroutine.resume(co)} return {r1[2], r2[2], tostring(r3[1]), r3[2], coroutine.status(co)}", "0"],
    &["EVAL", "local co = coroutine.create(function() local ok, e = pcall(function() coroutine.yield(5) end) return tostring(ok) .. ' ' .. e end) return {coroutine.resume(co)}", "0"],
    &["EVAL", "return tostring(coroutine.running())", "0"],
    &["EVAL", "local co co = coroutine.create(function() return tostring(coroutine.running() == co) .. ' ' .. coroutine.status(co) end) return {coroutine.resume(co)}", "0"],
    &["EVAL", "local f = coroutine.wrap(function() error('inside') end) f()", "0"],
    &["EVAL", "local f = coroutine.wrap(function() return 1 end) f() local r = f() return r", "0"],
    &["EVAL", "return {coroutine.resume(coroutine.create(function() return coroutine.resume(coroutine.running()) end))}", "0"],
    &["EVAL", "local function f(n) if n == 0 then return 0 end local ok, v = pcall(f, n - 1) return v + 1 end return f(100)", "0"],
    &["EVAL", "local ok, e = pcall(function() local t = setmetatable({}, {__index = function(t, k) return k .. '!' end}) return t.x end) return {tostring(ok), e}", "0"],
];

#[test]
fn scripts_answer_as_redis_does() {
    let (_guard, port) = start_redis();
    let mut real = cluster::connect(port).expect("redis-server");
    let kv = Kvasir::start(&[]);
    let mut ours = kv.conn();
    let mut mismatches = Vec::new();
    for args in SCRIPTS {
        let args = words(args);
        let (want, got): (Outcome, Outcome) = (run(&mut real, &args), run(&mut ours, &args));
        if want != got {
            mismatches.push(format!(
                "{:?}\n  redis:  {want:?}\n  kvasir: {got:?}",
                args.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} scripts differ:\n{}",
        mismatches.len(),
        SCRIPTS.len(),
        mismatches.join("\n")
    );
}

/// KEYS and ARGV (and a function's keys and args) of every size, few
/// (passed on the Lua stack) or many (passed in tables made in Rust),
/// and with empty and binary elements, reach the script as in Redis.
#[test]
fn keys_and_args_of_any_count_reach_scripts_as_in_redis() {
    let (_guard, port) = start_redis();
    let mut real = cluster::connect(port).expect("redis-server");
    let kv = Kvasir::start(&[]);
    let mut ours = kv.conn();
    let lib = "#!lua name=argslib\nredis.register_function('args', function(keys, args) \
               return {#keys, #args, keys[1], keys[#keys], args[1], args[#args]} end)";
    let script = "return {#KEYS, #ARGV, KEYS[1], KEYS[#KEYS], ARGV[1], ARGV[#ARGV], \
                  select('#', unpack(KEYS)), select('#', unpack(ARGV))}";
    let mut cases: Vec<Vec<Vec<u8>>> = vec![words(&["FUNCTION", "LOAD", lib])];
    for (nkeys, nargs) in [
        (0, 0),
        (1, 0),
        (0, 1),
        (2, 3),
        (64, 0),
        (0, 65),
        (40, 40),
        (300, 2000),
    ] {
        for cmd in ["EVAL", "FCALL"] {
            let mut args = words(&[cmd, if cmd == "EVAL" { script } else { "args" }]);
            args.push(nkeys.to_string().into_bytes());
            args.extend((0..nkeys).map(|i| format!("k{i}").into_bytes()));
            args.extend((0..nargs).map(|i| match i {
                0 => Vec::new(),
                1 => vec![0, 255, b'\n'],
                _ => format!("a{i}").into_bytes(),
            }));
            cases.push(args);
        }
    }
    for args in &cases {
        let (want, got) = (run(&mut real, args), run(&mut ours, args));
        assert_eq!(
            want,
            got,
            "{:?} with {} arguments",
            String::from_utf8_lossy(&args[0]),
            args.len()
        );
    }
}

#[test]
fn functions_survive_dump_and_restore_between_redis_and_kvasir() {
    let (_guard, port) = start_redis();
    let mut real = cluster::connect(port).expect("redis-server");
    let kv = Kvasir::start(&[]);
    let mut ours = kv.conn();
    let code = format!(
        "#!lua name=dumped\n-- {}\nredis.register_function('twice', function(keys, args) return args[1] * 2 end)",
        "long comment so that redis compresses the code ".repeat(4)
    );
    let loaded: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(&code)
        .query(&mut real)
        .expect("load in redis");
    assert_eq!(loaded, "dumped");
    let payload: Vec<u8> = redis::cmd("FUNCTION")
        .arg("DUMP")
        .query(&mut real)
        .expect("dump");
    let restored: String = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&payload)
        .query(&mut ours)
        .expect("restore a redis-server dump into kvasir");
    assert_eq!(restored, "OK");
    let twice: i64 = redis::cmd("FCALL")
        .arg("twice")
        .arg(0)
        .arg(21)
        .query(&mut ours)
        .expect("fcall");
    assert_eq!(twice, 42);
    // And back: Kvasir's dump restores into redis-server.
    let ours_payload: Vec<u8> = redis::cmd("FUNCTION")
        .arg("DUMP")
        .query(&mut ours)
        .expect("dump");
    let _: String = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query(&mut real)
        .expect("flush");
    let back: String = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&ours_payload)
        .query(&mut real)
        .expect("restore a kvasir dump into redis-server");
    assert_eq!(back, "OK");
    let mut damaged = ours_payload.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 0xff;
    let refused = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&damaged)
        .query::<String>(&mut ours);
    assert!(refused.is_err(), "a damaged payload is refused");
}

/// A key of `slot`'s neighbourhood: the first `prefix{n}` in another slot
/// than `avoid`.
fn key_not_in_slot(avoid: u16) -> String {
    (0..)
        .map(|i| format!("other{i}"))
        .find(|k| key_slot(k.as_bytes()) != avoid)
        .unwrap_or_default()
}

#[test]
fn scripts_replicate_deterministically_on_a_cluster() {
    let mut cluster = Cluster::start(&[]);
    cluster.wait_ready(Duration::from_secs(20));
    let key = "{sc}counter";
    let slot = key_slot(key.as_bytes());
    let leader = cluster.wait_leader_of_slot(slot, Duration::from_secs(10));
    let mut conn = cluster.conn(leader);
    // Random draws, SPOP and TIME inside scripts: the leader and its
    // followers must still end identical.
    let script = "math.randomseed(tonumber(ARGV[1])) \
        local n = math.random(1000000) \
        redis.call('sadd', KEYS[2], 'a', 'b', 'c', 'd', 'e', 'f') \
        local popped = redis.call('spop', KEYS[2]) \
        redis.call('hset', KEYS[3], 'r' .. ARGV[1], n, 'p' .. ARGV[1], popped, 't', redis.call('time')[1]) \
        return redis.call('incr', KEYS[1])";
    for i in 0..40 {
        let n: i64 = redis::cmd("EVAL")
            .arg(script)
            .arg(3)
            .arg(key)
            .arg("{sc}set")
            .arg("{sc}hash")
            .arg(i)
            .query(&mut conn)
            .expect("eval on the slot's leader");
        assert_eq!(n, i + 1);
    }
    // EVALSHA of a loaded script, FUNCTION LOAD and FCALL.
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("return redis.call('incrby', KEYS[1], ARGV[1])")
        .query(&mut conn)
        .expect("script load");
    let n: i64 = redis::cmd("EVALSHA")
        .arg(&sha)
        .arg(1)
        .arg(key)
        .arg(10)
        .query(&mut conn)
        .expect("evalsha");
    assert_eq!(n, 50);
    let lib: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("#!lua name=clib\nredis.register_function('cinc', function(keys) return redis.call('incr', keys[1]) end)")
        .query(&mut conn)
        .expect("function load");
    assert_eq!(lib, "clib");
    let n: i64 = redis::cmd("FCALL")
        .arg("cinc")
        .arg(1)
        .arg(key)
        .query(&mut conn)
        .expect("fcall");
    assert_eq!(n, 51);
    // Keys: declared keys of two slots are CROSSSLOT; an undeclared key of
    // another slot is refused inside the script, and nothing is written.
    let other = key_not_in_slot(slot);
    let cross = redis::cmd("EVAL")
        .arg("return 1")
        .arg(2)
        .arg(key)
        .arg(&other)
        .query::<i64>(&mut conn)
        .expect_err("two slots");
    assert!(
        cross.to_string().contains("don't hash to the same slot"),
        "{cross}"
    );
    let undeclared = redis::cmd("EVAL")
        .arg("redis.call('set', ARGV[1], 'x') return 1")
        .arg(1)
        .arg(key)
        .arg(&other)
        .query::<i64>(&mut conn)
        .expect_err("a key of another slot");
    assert!(
        undeclared
            .to_string()
            .contains("Script attempted to access a non local key in a cluster node"),
        "{undeclared}"
    );
    // Keyless scripts run on a shard this node leads.
    let one: i64 = redis::cmd("EVAL")
        .arg("return 1")
        .arg(0)
        .query(&mut conn)
        .expect("keyless");
    assert_eq!(one, 1);
    cluster.wait_digests_equal(Duration::from_secs(10));
}

/// Escapes from the sandbox are refused, and a script that never ends, a
/// table that grows without bound or unbounded recursion each fail with an
/// error while the server keeps serving.
#[test]
fn sandbox_escapes_are_refused_and_runaway_scripts_stop() {
    let kv = Kvasir::start(&[]);
    let mut conn = kv.conn();
    let err = |conn: &mut redis::Connection, script: &str| -> String {
        match redis::cmd("EVAL")
            .arg(script)
            .arg(0)
            .query::<redis::Value>(conn)
        {
            Ok(v) => format!("no error: {v:?}"),
            Err(e) => e.to_string(),
        }
    };
    for (script, expected) in [
        ("os.execute('touch /tmp/kvasir-escaped')", "nonexistent global variable 'os'"),
        ("io.open('/etc/passwd')", "nonexistent global variable 'io'"),
        ("require('os')", "nonexistent global variable 'require'"),
        ("dofile('/etc/passwd')", "nonexistent global variable 'dofile'"),
        ("setmetatable(_G, nil) x = 1", "Attempt to modify a readonly table"),
        ("rawset(_G, 'x', 1)", "Attempt to modify a readonly table"),
        ("string.rep = nil", "Attempt to modify a readonly table"),
        ("getmetatable('').__index.upper = nil", "Attempt to modify a readonly table"),
        ("rawset(redis, 'call', nil)", "Attempt to modify a readonly table"),
        ("local function f(n) return f(n + 1) + 1 end return f(1)", "stack overflow"),
        ("local t = {} local i = 0 while true do i = i + 1 t[i] = string.rep('x', 1000000) .. i end", "not enough memory"),
        // Replies of redis.call count against the limit too.
        ("redis.call('set', 'big', string.rep('x', 10000000)) local t = {} for i = 1, 100 do t[i] = redis.call('getrange', 'big', 0, -i) end", "not enough memory"),
        ("redis.call('set', 'big', string.rep('x', 10000000)) local t = {} for i = 1, 100 do t[i] = redis.pcall('getrange', 'big', 0, -i) end", "not enough memory"),
    ] {
        let got = err(&mut conn, script);
        assert!(got.contains(expected), "{script}: {got}");
    }
    // Bytecode never loads: string.dump's output is refused by loadstring.
    let loaded: redis::Value = redis::cmd("EVAL")
        .arg("return loadstring(string.dump(function() return 1 end)) == nil")
        .arg(0)
        .query(&mut conn)
        .expect("eval");
    assert_eq!(loaded, redis::Value::Int(1));
    // An endless loop where the script cannot pause (inside a C call: a
    // sort comparator, a gsub callback, a metamethod) is stopped by the
    // instruction budget, even when it tries to catch the stop; what it
    // wrote before stays. (Elsewhere a standalone script pauses instead
    // and can be killed:
    // `a_busy_script_answers_busy_and_script_kill_stops_it`.)
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("script-max-instructions")
        .arg("20000000")
        .query(&mut conn)
        .expect("config set");
    for script in [
        "redis.call('set', 'written', '1') while true do pcall(function() table.sort({2, 1}, function() while true do end end) end) end",
        "string.gsub('a', 'a', function() while true do end end)",
        "local t = setmetatable({}, {__index = function() while true do end end}) return t.x",
    ] {
        let got = err(&mut conn, script);
        assert!(got.contains("script-max-instructions"), "{script}: {got}");
    }
    let written: String = redis::cmd("GET")
        .arg("written")
        .query(&mut conn)
        .expect("get");
    assert_eq!(written, "1");
    let pong: String = redis::cmd("PING").query(&mut conn).expect("still serving");
    assert_eq!(pong, "PONG");
    assert!(!std::path::Path::new("/tmp/kvasir-escaped").exists());
}

/// One client's command sent from a thread of its own (it blocks while the
/// script runs).
fn send_in_background(port: u16, args: &[&str]) -> std::thread::JoinHandle<Outcome> {
    let args = words(args);
    std::thread::spawn(move || {
        let mut conn = cluster::connect(port).expect("connect");
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        run(&mut conn, &args)
    })
}

/// What a client sees of busy scripts, step by step: BUSY for other
/// commands once busy-reply-threshold passed, SCRIPT KILL / FUNCTION KILL
/// for the matching kind only, UNKILLABLE once the script wrote, a MULTI
/// that saw BUSY aborting at EXEC, an EXEC sent during BUSY ending its
/// transaction, and SHUTDOWN only with NOSAVE.
fn busy_script_transcript(port: u16) -> Vec<(String, Outcome)> {
    let mut log = Vec::new();
    let mut conn = cluster::connect(port).expect("connect");
    let step = |log: &mut Vec<(String, Outcome)>, conn: &mut redis::Connection, args: &[&str]| {
        let outcome = run(conn, &words(args));
        log.push((args.join(" "), outcome));
    };
    let busy = |conn: &mut redis::Connection| {
        common::eventually(
            Duration::from_secs(10),
            || matches!(run(conn, &words(&["PING"])), Err(e) if e.starts_with("BUSY")),
        )
    };
    step(
        &mut log,
        &mut conn,
        &["CONFIG", "SET", "busy-reply-threshold", "50"],
    );
    step(&mut log, &mut conn, &["SET", "k", "before"]);

    // A read-only loop: killed by SCRIPT KILL, not by FUNCTION KILL.
    let script = send_in_background(
        port,
        &["EVAL", "local i = 0 while true do i = i + 1 end", "0"],
    );
    assert!(busy(&mut conn), "no BUSY while the script runs");
    step(&mut log, &mut conn, &["PING"]);
    step(&mut log, &mut conn, &["GET", "k"]);
    let mut txn = cluster::connect(port).expect("connect");
    step(&mut log, &mut txn, &["MULTI"]);
    step(&mut log, &mut txn, &["SET", "k", "in-multi"]);
    // EXEC itself during BUSY ends the transaction (EXECABORT): the
    // connection is out of MULTI afterwards.
    let mut txn2 = cluster::connect(port).expect("connect");
    step(&mut log, &mut txn2, &["MULTI"]);
    step(&mut log, &mut txn2, &["EXEC"]);
    step(&mut log, &mut conn, &["FUNCTION", "KILL"]);
    step(&mut log, &mut conn, &["SCRIPT", "KILL"]);
    let killed = script.join().expect("script client");
    log.push(("(the script's reply)".into(), killed));
    step(&mut log, &mut txn2, &["PING", "after"]);
    step(&mut log, &mut txn, &["EXEC"]);
    step(&mut log, &mut conn, &["GET", "k"]);

    // The same inside pcall (Redis's own test of it): the kill is not
    // caught by the script's pcall.
    let script = send_in_background(
        port,
        &[
            "EVAL",
            "local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end",
            "0",
        ],
    );
    assert!(busy(&mut conn), "no BUSY inside pcall");
    step(&mut log, &mut conn, &["SCRIPT", "KILL"]);
    let killed = script.join().expect("script client");
    log.push(("(the script's reply)".into(), killed));

    // A function: FUNCTION KILL, and FUNCTION STATS shows it.
    step(
        &mut log,
        &mut conn,
        &["FUNCTION", "LOAD", "#!lua name=busy\nredis.register_function('spin', function(keys, args)\n  while true do end\nend)"],
    );
    let script = send_in_background(port, &["FCALL", "spin", "0"]);
    assert!(busy(&mut conn), "no BUSY while the function runs");
    step(&mut log, &mut conn, &["PING"]);
    step(&mut log, &mut conn, &["SCRIPT", "KILL"]);
    let stats = run(&mut conn, &words(&["FUNCTION", "STATS"]));
    let stats = format!("{stats:?}");
    assert!(
        stats.contains("spin") && stats.contains("duration_ms"),
        "FUNCTION STATS shows no running script: {stats}"
    );
    step(&mut log, &mut conn, &["FUNCTION", "KILL"]);
    let killed = script.join().expect("function client");
    log.push(("(the function's reply)".into(), killed));

    // A script that wrote cannot be killed; only SHUTDOWN NOSAVE stops it.
    let _writer = send_in_background(
        port,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 'during') while true do end",
            "1",
            "k",
        ],
    );
    assert!(busy(&mut conn), "no BUSY while the writing script runs");
    step(&mut log, &mut conn, &["SCRIPT", "KILL"]);
    step(&mut log, &mut conn, &["SHUTDOWN"]);
    let _ = run(&mut conn, &words(&["SHUTDOWN", "NOSAVE"]));
    log
}

/// A script running past busy-reply-threshold behaves as in Redis: other
/// clients get -BUSY, SCRIPT KILL stops it, one that wrote is UNKILLABLE,
/// SHUTDOWN NOSAVE ends the server. The transcripts of redis-server and
/// Kvasir must be equal.
#[test]
fn a_busy_script_answers_busy_and_script_kill_stops_it() {
    let (mut redis_guard, redis_port) = start_redis();
    let want = busy_script_transcript(redis_port);
    let mut kv = Kvasir::start(&[]);
    let got = busy_script_transcript(kv.port);
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w, g, "redis-server (left) and Kvasir (right) differ");
    }
    assert_eq!(want.len(), got.len());
    // Both servers stopped on SHUTDOWN NOSAVE while the script ran.
    assert!(
        kv.wait_exit(Duration::from_secs(10)).is_some(),
        "kvasir still runs"
    );
    assert!(
        common::eventually(Duration::from_secs(10), || !matches!(
            redis_guard.child().try_wait(),
            Ok(None)
        )),
        "redis-server still runs"
    );
}

/// A script that ran past busy-reply-threshold is accounted with its whole
/// run, not its first slice: the slow log and commandstats show the time
/// until it was killed, and the kill as a failed call.
#[test]
fn a_busy_script_is_accounted_with_its_whole_run() {
    let kv = Kvasir::start(&[]);
    let mut conn = kv.conn();
    for (name, value) in [
        ("busy-reply-threshold", "50"),
        ("slowlog-log-slower-than", "0"),
    ] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query(&mut conn)
            .expect("config set");
    }
    let script = send_in_background(kv.port, &["EVAL", "while true do end", "0"]);
    assert!(
        common::eventually(Duration::from_secs(10), || {
            matches!(run(&mut conn, &words(&["PING"])), Err(e) if e.starts_with("BUSY"))
        }),
        "no BUSY while the script runs"
    );
    // The script runs at least this much longer.
    std::thread::sleep(Duration::from_millis(300));
    let _: () = redis::cmd("SCRIPT")
        .arg("KILL")
        .query(&mut conn)
        .expect("script kill");
    let killed = script.join().expect("script client");
    assert!(
        matches!(&killed, Err(e) if e.contains("killed by user")),
        "{killed:?}"
    );
    let log: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(100)
        .query(&mut conn)
        .expect("slowlog");
    let eval_micros = log.iter().find_map(|entry| {
        let redis::Value::Array(fields) = entry else {
            return None;
        };
        let is_eval = matches!(fields.get(3), Some(redis::Value::Array(a))
            if matches!(a.first(), Some(redis::Value::BulkString(b)) if b.eq_ignore_ascii_case(b"eval")));
        match (is_eval, fields.get(2)) {
            (true, Some(redis::Value::Int(us))) => Some(*us),
            _ => None,
        }
    });
    let eval_micros = eval_micros.expect("the EVAL is in the slow log");
    assert!(eval_micros >= 300_000, "slow log has {eval_micros} µs");
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut conn)
        .expect("info");
    let line = stats
        .lines()
        .find(|l| l.starts_with("cmdstat_eval:"))
        .unwrap_or_else(|| panic!("no cmdstat_eval in {stats}"));
    let usec: u64 = line
        .split(',')
        .find_map(|f| f.strip_prefix("usec="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(usec >= 300_000, "{line}");
    assert!(line.contains("failed_calls=1"), "{line}");
}

/// A script inside MULTI/EXEC never pauses, even past busy-reply-threshold
/// and in a block run command by command (one holding PING): the block
/// stays atomic and answers in full.
#[test]
fn a_script_inside_exec_runs_through() {
    let kv = Kvasir::start(&[]);
    let mut conn = kv.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("busy-reply-threshold")
        .arg("0")
        .query(&mut conn)
        .expect("config set");
    let counted: (String, i64) = redis::pipe()
        .atomic()
        .cmd("PING")
        .cmd("EVAL")
        .arg("local i = 0 while i < 2000000 do i = i + 1 end return i")
        .arg(0)
        .query(&mut conn)
        .expect("exec");
    assert_eq!(counted, ("PONG".to_string(), 2_000_000));
    // Outside MULTI the same script pauses at once and still answers.
    let alone: i64 = redis::cmd("EVAL")
        .arg("local i = 0 while i < 2000000 do i = i + 1 end return i")
        .arg(0)
        .query(&mut conn)
        .expect("eval");
    assert_eq!(alone, 2_000_000);
}

/// PUBLISH and SPUBLISH called by a script reach subscribers at once and
/// count them, as in Redis (standalone); side by side with redis-server.
#[test]
fn scripts_publish_to_subscribers_as_redis_does() {
    let session = |port: u16| {
        let mut sub = common::RawConn::to_port(port);
        let mut out = vec![
            sub.cmd_str(&["SUBSCRIBE", "news"]),
            sub.cmd_str(&["PSUBSCRIBE", "n*"]),
            sub.cmd_str(&["SSUBSCRIBE", "orders"]),
        ];
        let mut c = common::RawConn::to_port(port);
        for args in [
            &["EVAL", "return redis.call('publish', 'news', 'hi')", "0"][..],
            &["EVAL", "return redis.call('publish', 'nobody', 'x')", "0"],
            &[
                "EVAL",
                "return redis.call('publish', 'elsewhere', 'x')",
                "0",
            ],
            &[
                "EVAL",
                "return redis.call('spublish', KEYS[1], 'o1')",
                "1",
                "orders",
            ],
            &[
                "EVAL",
                "redis.call('set', 'k', 'v'); return redis.call('publish', 'news', 'after')",
                "0",
            ],
        ] {
            out.push(c.cmd_str(args));
        }
        while let Some(msg) = sub.read_reply_within(Duration::from_millis(500)) {
            out.push(String::from_utf8_lossy(&msg).into_owned());
        }
        out
    };
    let (_redis, redis_port) = start_redis();
    let server = Kvasir::start(&[]);
    let theirs = session(redis_port);
    let ours = session(server.port);
    assert_eq!(ours, theirs);
}

/// In cluster mode a script's PUBLISH reaches subscribers on every node
/// exactly once (the shard's leader sends it after the entry applied) and
/// the script sees 0 receivers, the same on every replica.
#[test]
fn cluster_scripts_publish_once_to_every_node() {
    let mut cluster = Cluster::start(&[]);
    let key = "{pub}k";
    let leader = cluster.wait_leader_of_slot(key_slot(key.as_bytes()), Duration::from_secs(10));
    let mut subscribers: Vec<common::RawConn> = (1..=3)
        .map(|id| {
            let mut c = common::RawConn::to_port(cluster.port(id));
            assert!(c.cmd_str(&["SUBSCRIBE", "jobs"]).contains("subscribe"));
            c
        })
        .collect();
    let mut c = common::RawConn::to_port(cluster.port(leader));
    let reply = c.cmd_str(&[
        "EVAL",
        "redis.call('set', KEYS[1], ARGV[1]); return redis.call('publish', 'jobs', ARGV[1])",
        "1",
        key,
        "job-1",
    ]);
    assert_eq!(reply, ":0\r\n");
    for (i, sub) in subscribers.iter_mut().enumerate() {
        let msg = sub
            .read_reply_within(Duration::from_secs(5))
            .map(|m| String::from_utf8_lossy(&m).into_owned());
        assert_eq!(
            msg.as_deref(),
            Some("*3\r\n$7\r\nmessage\r\n$4\r\njobs\r\n$5\r\njob-1\r\n"),
            "node {}",
            i + 1
        );
        assert_eq!(
            sub.read_reply_within(Duration::from_millis(300)),
            None,
            "node {} got it twice",
            i + 1
        );
    }
}

//! Behaviours that Redis 7.0's own test suite (`tests/unit` of the
//! redis-server sources) checks and Kvasir once got wrong, each run side by
//! side against redis-server 7.0 with the same commands and compared:
//! secrets kept out of SLOWLOG, EXEC's commands logged instead of EXEC,
//! blocking commands inside scripts, a blocked XREADGROUP whose stream is
//! replaced, CLIENT PAUSE WRITE letting `no-writes` scripts run, CONFIG SET
//! maxmemory evicting at once, `client-output-buffer-limit` closing a
//! subscriber that does not read, function names ignoring case, DEBUG
//! DIGEST-VALUE of a copy, BITFIELD GET under a read-only key pattern, a
//! redundant ACL subcommand rule, the latency percentiles setting, and
//! FUNCTION LOAD's library API and errors.

mod common;

use common::redis_server::{run, start_redis_in, Outcome};
use common::Kvasir;
use redis::Value;
use std::time::{Duration, Instant};

/// Both servers, started with the same extra flags.
struct Pair {
    _kvasir: Kvasir,
    kvasir_port: u16,
    _redis: common::ChildGuard,
    redis_port: u16,
}

impl Pair {
    fn start(extra: &[&str]) -> Pair {
        let kvasir = Kvasir::start(extra);
        let kvasir_port = kvasir.port;
        let (redis, redis_port) = start_redis_in(None, extra);
        Pair {
            _kvasir: kvasir,
            kvasir_port,
            _redis: redis,
            redis_port,
        }
    }

    fn ports(&self) -> [(&'static str, u16); 2] {
        [("kvasir", self.kvasir_port), ("redis", self.redis_port)]
    }
}

fn connect(port: u16) -> redis::Connection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let conn = client.get_connection().expect("connection");
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    conn
}

fn go(conn: &mut redis::Connection, args: &[&str]) -> Outcome {
    run(conn, args)
}

/// Runs `script` on both servers and asserts they answered alike.
fn same_on_both(pair: &Pair, script: impl Fn(u16) -> Vec<Outcome>) {
    let kvasir = script(pair.kvasir_port);
    let redis = script(pair.redis_port);
    assert_eq!(
        kvasir, redis,
        "Kvasir (left) and redis-server (right) differ"
    );
}

/// An INFO section's text (or the error it answered).
fn info(c: &mut redis::Connection, section: &str) -> String {
    match go(c, &["INFO", section]) {
        Ok(v) => strings(&v).join(""),
        Err(e) => e,
    }
}

/// `cmd calls=..,rejected_calls=..,failed_calls=..` of INFO commandstats
/// (the counts, not the times).
fn call_counts(commandstats: &str, cmd: &str) -> String {
    let line = commandstats
        .lines()
        .find(|l| l.starts_with(&format!("cmdstat_{cmd}:")))
        .unwrap_or("");
    let fields: Vec<&str> = line
        .trim()
        .split([':', ','])
        .filter(|f| {
            f.starts_with("calls=")
                || f.starts_with("rejected_calls=")
                || f.starts_with("failed_calls=")
        })
        .collect();
    format!("{cmd} {}", fields.join(","))
}

/// Sends `args` on a raw connection and collects every reply and push
/// that arrives until the connection is quiet for 150 ms.
fn exchange(r: &mut common::RawConn, args: &[&str]) -> String {
    let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    r.send(&common::encode_cmd(&raw));
    let mut got = Vec::new();
    while let Some(reply) = r.read_reply_within(Duration::from_millis(150)) {
        got.push(String::from_utf8_lossy(&reply).into_owned());
    }
    format!("{args:?} -> {}", got.join(" "))
}

/// Runs a raw-protocol `transcript` on both servers and asserts they
/// answered alike, byte for byte.
fn same_transcript_on_both(pair: &Pair, transcript: impl Fn(u16) -> Vec<String>) {
    assert_eq!(
        transcript(pair.kvasir_port),
        transcript(pair.redis_port),
        "Kvasir (left) and redis-server (right) differ"
    );
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().flat_map(strings).collect(),
        Value::BulkString(b) => vec![String::from_utf8_lossy(b).into_owned()],
        Value::SimpleString(s) => vec![s.clone()],
        Value::Int(i) => vec![i.to_string()],
        other => vec![format!("{other:?}")],
    }
}

#[test]
fn slowlog_hides_secrets_and_logs_the_commands_of_exec() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        go(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]).expect("config");
        go(&mut c, &["SLOWLOG", "RESET"]).expect("reset");
        go(&mut c, &["ACL", "SETUSER", "slow user", "+get"]).expect_err("bad name");
        go(&mut c, &["ACL", "SETUSER", "slowuser", ">secret", "+get"]).expect("setuser");
        go(&mut c, &["CONFIG", "SET", "requirepass", ""]).expect("requirepass");
        // The key is missing: NOKEY, logged with its credentials redacted.
        let _ = go(
            &mut c,
            &[
                "MIGRATE",
                "127.0.0.1",
                "1",
                "k",
                "0",
                "100",
                "AUTH2",
                "u",
                "pw",
            ],
        );
        go(&mut c, &["MULTI"]).expect("multi");
        go(&mut c, &["SET", "a", "1"]).expect("queued");
        go(&mut c, &["INCR", "a"]).expect("queued");
        go(&mut c, &["EXEC"]).expect("exec");
        go(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "-1"]).expect("config");
        let log = go(&mut c, &["SLOWLOG", "GET", "-1"]).expect("slowlog");
        let Value::Array(entries) = log else {
            panic!("slowlog: {log:?}")
        };
        // Each entry's arguments, oldest first.
        entries
            .iter()
            .rev()
            .map(|e| match e {
                Value::Array(fields) => Ok(Value::Array(
                    strings(&fields[3])
                        .into_iter()
                        .map(|s| Value::BulkString(s.into_bytes()))
                        .collect(),
                )),
                other => panic!("entry {other:?}"),
            })
            .collect()
    });
}

#[test]
fn scripts_run_blocking_commands_without_blocking() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let eval = |c: &mut redis::Connection, body: &str| go(c, &["EVAL", body, "1", "s"]);
        vec![
            go(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]),
            eval(&mut c, "return redis.pcall('xread','STREAMS','s','$')"),
            eval(
                &mut c,
                "return redis.pcall('xread','BLOCK',0,'STREAMS','s','$')",
            ),
            eval(
                &mut c,
                "return redis.pcall('xreadgroup','group','g','c','STREAMS','s','>')",
            ),
            eval(
                &mut c,
                "return redis.pcall('xreadgroup','group','g','c','BLOCK',0,'STREAMS','s','>')",
            ),
            go(
                &mut c,
                &["EVAL", "return redis.pcall('blmpop',0,1,'l','left')", "0"],
            ),
            go(
                &mut c,
                &["EVAL", "return redis.pcall('bzmpop',0,1,'z','min')", "0"],
            ),
            go(&mut c, &["EVAL", "return redis.pcall('blpop','l',0)", "0"]),
            go(&mut c, &["RPUSH", "l", "a"]),
            go(
                &mut c,
                &["EVAL", "return redis.pcall('blmpop',0,1,'l','left')", "0"],
            ),
        ]
    });
}

#[test]
fn a_blocked_xreadgroup_is_told_when_its_stream_is_replaced() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut out = vec![
            go(&mut c, &["XADD", "s", "1-0", "f", "v"]),
            go(&mut c, &["XGROUP", "CREATE", "s", "g", "$"]),
        ];
        let reader = std::thread::spawn(move || {
            let mut r = connect(port);
            go(
                &mut r,
                &[
                    "XREADGROUP",
                    "GROUP",
                    "g",
                    "alice",
                    "BLOCK",
                    "0",
                    "STREAMS",
                    "s",
                    ">",
                ],
            )
        });
        let blocked = common::eventually(Duration::from_secs(5), || {
            let info: String = redis::cmd("INFO")
                .arg("clients")
                .query(&mut c)
                .unwrap_or_default();
            info.contains("blocked_clients:1")
        });
        assert!(blocked, "the reader did not block on port {port}");
        out.push(go(&mut c, &["SET", "s", "a string now"]));
        out.push(reader.join().expect("reader"));
        out
    });
}

#[test]
fn client_pause_write_lets_scripts_that_declare_no_writes_run() {
    let pair = Pair::start(&[]);
    for (name, port) in pair.ports() {
        let mut c = connect(port);
        go(
            &mut c,
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=lib\nredis.register_function{function_name='ro', callback=function() return 'ro' end, flags={'no-writes'}}\nredis.register_function('rw', function() return 'rw' end)",
            ],
        )
        .expect("function load");
        let body = "#!lua flags=no-writes\nreturn 'declared'";
        let sha = match go(&mut c, &["SCRIPT", "LOAD", body]) {
            Ok(Value::BulkString(b)) => String::from_utf8_lossy(&b).into_owned(),
            other => panic!("{name}: script load {other:?}"),
        };
        go(&mut c, &["CLIENT", "PAUSE", "100000", "WRITE"]).expect("pause");
        let mut other = connect(port);
        other
            .set_read_timeout(Some(Duration::from_millis(400)))
            .expect("timeout");
        // Declared read-only: answered during the pause.
        assert_eq!(
            go(&mut other, &["EVAL", body, "0"]),
            Ok(Value::BulkString(b"declared".to_vec())),
            "{name}"
        );
        assert_eq!(
            go(&mut other, &["EVALSHA", &sha, "0"]),
            Ok(Value::BulkString(b"declared".to_vec())),
            "{name}"
        );
        assert_eq!(
            go(&mut other, &["FCALL", "ro", "0"]),
            Ok(Value::BulkString(b"ro".to_vec())),
            "{name}"
        );
        // SCRIPT LOAD goes through too (Redis flags it neither write nor
        // may-replicate), FUNCTION LOAD does not.
        assert!(
            go(&mut other, &["SCRIPT", "LOAD", "return 5"]).is_ok(),
            "{name}"
        );
        assert!(
            go(
                &mut other,
                &[
                    "FUNCTION",
                    "LOAD",
                    "#!lua name=held\nredis.register_function('h', function() return 1 end)"
                ]
            )
            .is_err(),
            "{name}: FUNCTION LOAD ran during the pause"
        );
        // A transaction of declared read-only scripts runs too (unit/pause
        // "Test read-only scripts in mutli-exec are not blocked by pause
        // RO"; its EXEC was held).
        let mut other = connect(port);
        other
            .set_read_timeout(Some(Duration::from_millis(400)))
            .expect("timeout");
        go(&mut other, &["MULTI"]).expect("multi");
        go(&mut other, &["EVAL", body, "0"]).expect("queued");
        go(&mut other, &["FCALL", "ro", "0"]).expect("queued");
        assert_eq!(
            go(&mut other, &["EXEC"]),
            Ok(Value::Array(vec![
                Value::BulkString(b"declared".to_vec()),
                Value::BulkString(b"ro".to_vec())
            ])),
            "{name}: EXEC of no-writes scripts during a WRITE pause"
        );
        let mut other = connect(port);
        other
            .set_read_timeout(Some(Duration::from_millis(400)))
            .expect("timeout");
        // An old-style script may write: held until the pause ends.
        let started = Instant::now();
        let held = go(&mut other, &["EVAL", "return 'old style'", "0"]);
        assert!(
            held.is_err(),
            "{name}: an old-style script ran during the pause: {held:?}"
        );
        assert!(started.elapsed() >= Duration::from_millis(350), "{name}");
        go(&mut c, &["CLIENT", "UNPAUSE"]).expect("unpause");
        let mut after = connect(port);
        assert_eq!(
            go(&mut after, &["FCALL", "rw", "0"]),
            Ok(Value::BulkString(b"rw".to_vec())),
            "{name}"
        );
    }
}

#[test]
fn config_set_maxmemory_evicts_at_once() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut out = vec![
            go(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ee"]),
            go(
                &mut c,
                &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
            ),
            go(&mut c, &["SET", "foo", "bar"]),
        ];
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
        let mut sub_conn = client.get_connection().expect("subscriber");
        sub_conn
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut sub = sub_conn.as_pubsub();
        sub.psubscribe("*").expect("psubscribe");
        out.push(go(&mut c, &["CONFIG", "SET", "maxmemory", "1"]));
        // No command after it: the eviction is CONFIG SET's own.
        let msg = sub.get_message().expect("the evicted event");
        out.push(Ok(Value::BulkString(
            format!(
                "{} {}",
                msg.get_channel_name(),
                String::from_utf8_lossy(msg.get_payload_bytes())
            )
            .into_bytes(),
        )));
        drop(sub);
        out.push(go(&mut c, &["CONFIG", "SET", "maxmemory", "0"]));
        out.push(go(&mut c, &["DBSIZE"]));
        out
    });
}

#[test]
fn output_buffer_limit_closes_a_subscriber_that_does_not_read() {
    use std::io::Write;
    let pair = Pair::start(&[]);
    for (name, port) in pair.ports() {
        let mut c = connect(port);
        // Redis's error texts, and CONFIG GET's form after a partial set.
        for bad in [
            "wrong number",
            "master 10mb 10mb 60",
            "normal 10mbs 10mb 60",
            "pubsub 10mb 10mb 60s",
        ] {
            let e = go(
                &mut c,
                &["CONFIG", "SET", "client-output-buffer-limit", bad],
            );
            assert!(e.is_err(), "{name}: {bad} accepted");
        }
        go(
            &mut c,
            &[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "pubsub 100000 0 0",
            ],
        )
        .expect("set");
        let got = go(&mut c, &["CONFIG", "GET", "client-output-buffer-limit"]).expect("get");
        assert_eq!(
            strings(&got),
            [
                "client-output-buffer-limit",
                "normal 0 0 0 slave 268435456 67108864 60 pubsub 100000 0 0"
            ],
            "{name}"
        );
        // A subscriber that never reads.
        let mut lazy = std::net::TcpStream::connect(("127.0.0.1", port)).expect("subscriber");
        lazy.write_all(b"*2\r\n$9\r\nSUBSCRIBE\r\n$3\r\nfoo\r\n")
            .expect("subscribe");
        assert!(common::eventually(Duration::from_secs(5), || {
            strings(&go(&mut c, &["PUBSUB", "NUMSUB", "foo"]).unwrap_or(Value::Nil)) == ["foo", "1"]
        }));
        let mut max_omem = 0u64;
        let mut closed = false;
        for _ in 0..200_000 {
            go(&mut c, &["PUBLISH", "foo", "bar"]).expect("publish");
            let list: String = redis::cmd("CLIENT")
                .arg("LIST")
                .query(&mut c)
                .expect("client list");
            let Some(line) = list.lines().find(|l| l.contains("cmd=subscribe")) else {
                closed = true;
                break;
            };
            let omem: u64 = line
                .split(' ')
                .find_map(|f| f.strip_prefix("omem="))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            max_omem = max_omem.max(omem);
            assert!(
                omem < 200_000,
                "{name}: omem {omem} past the limit, still open"
            );
        }
        assert!(closed, "{name}: the subscriber was never closed");
        assert!(max_omem >= 70_000, "{name}: omem only reached {max_omem}");
    }
}

/// What a client that sent `request` (inline commands) reads until the
/// server closes the connection or 3 s pass: the bytes, and whether it
/// was closed.
fn read_until_closed(port: u16, request: &str) -> (Vec<u8>, bool) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    stream.write_all(request.as_bytes()).expect("write");
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        let mut buf = [0u8; 65536];
        match stream.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (got, true),
            Err(_) => {}
        }
    }
    (got, false)
}

#[test]
fn output_buffer_limit_closes_a_client_whose_replies_pass_it() {
    let pair = Pair::start(&[]);
    for (name, port) in pair.ports() {
        let mut c = connect(port);
        let item = "x".repeat(1000);
        for _ in 0..150 {
            go(&mut c, &["RPUSH", "biglist", &item]).expect("rpush");
        }
        go(&mut c, &["SET", "bigkey", &"y".repeat(10_000)]).expect("set");
        // No limit for normal clients by default: the whole reply comes.
        let (whole, closed) = read_until_closed(port, "LRANGE biglist 0 -1\r\nQUIT\r\n");
        assert!(closed, "{name}: QUIT did not close");
        assert!(whole.len() > 150_000, "{name}: {} bytes", whole.len());

        go(
            &mut c,
            &[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "normal 100000 0 0",
            ],
        )
        .expect("limit");
        // One reply past the hard limit: closed before any of it is sent.
        let (got, closed) = read_until_closed(port, "LRANGE biglist 0 -1\r\n");
        assert!(
            closed && got.is_empty(),
            "{name}: {} bytes, closed {closed}",
            got.len()
        );
        // Small replies under the limit still flow.
        let (got, closed) = read_until_closed(port, "GET bigkey\r\nLRANGE biglist 0 9\r\nQUIT\r\n");
        assert!(closed && got.len() > 20_000, "{name}: {} bytes", got.len());
        // A pipeline whose replies add up past it: nothing is sent.
        let pipeline = "GET bigkey\r\n".repeat(15);
        let (got, closed) = read_until_closed(port, &pipeline);
        assert!(
            closed && got.is_empty(),
            "{name}: pipeline {} bytes",
            got.len()
        );
        // A transaction runs to its end even though its reply closes the
        // client.
        let (got, closed) = read_until_closed(
            port,
            "MULTI\r\nSET k1 v1\r\nLRANGE biglist 0 -1\r\nSET k2 v2\r\nEXEC\r\n",
        );
        assert!(closed, "{name}: EXEC's client not closed");
        assert!(
            !got.windows(4).any(|w| w == b"*4\r\n"),
            "{name}: EXEC's reply sent"
        );
        for (key, value) in [("k1", b"v1"), ("k2", b"v2")] {
            assert!(
                matches!(go(&mut c, &["GET", key]), Ok(Value::BulkString(ref v)) if v == value),
                "{name}: the transaction did not finish"
            );
        }
        // Over a soft limit for a moment, then under it: a later large
        // reply starts the soft limit's clock again (2 s here).
        go(
            &mut c,
            &[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "normal 0 100000 2",
            ],
        )
        .expect("soft limit");
        let mut reader = connect(port);
        let first = go(&mut reader, &["LRANGE", "biglist", "0", "-1"]);
        assert!(first.is_ok(), "{name}: {first:?}");
        std::thread::sleep(Duration::from_millis(2500));
        let again = go(&mut reader, &["LRANGE", "biglist", "0", "-1"]);
        assert!(
            again.is_ok(),
            "{name}: closed by a clock that started earlier: {again:?}"
        );
        drop(reader);
        // The limit closes what it closed, and no more: this client is
        // open (the reader above goes once the server sees it closed).
        let mut list = String::new();
        let alone = common::eventually(Duration::from_secs(5), || {
            list = redis::cmd("CLIENT")
                .arg("LIST")
                .query(&mut c)
                .expect("client list");
            list.lines().count() == 1
        });
        assert!(alone, "{name}: {list}");
    }
}

#[test]
fn hex_floats_are_read_as_strtod_reads_them() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        [
            &["INCRBYFLOAT", "f", "0x10"][..],
            &["INCRBYFLOAT", "f", "-0x1p-2"],
            &["INCRBYFLOAT", "f", "0X.8"],
            &["INCRBYFLOAT", "f", "0xg"],
            &["HINCRBYFLOAT", "h", "f", "0x1.8p1"],
            &["ZADD", "z", "0x10", "a", "0x1p-3", "b"],
            &["ZADD", "z", "0x1p5000", "c"],
            &["ZINCRBY", "z", "0x2", "a"],
            &["ZCOUNT", "z", "(0x0", "0x12"],
            &["ZRANGEBYSCORE", "z", "0x.1", "+inf", "WITHSCORES"],
            &["ZREMRANGEBYSCORE", "z", "0x12", "0x12"],
            &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        ]
        .iter()
        .map(|args| go(&mut c, args))
        .collect()
    });
}

#[test]
fn help_subcommands_answer_redis_text() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        [
            "OBJECT", "MEMORY", "XINFO", "XGROUP", "SCRIPT", "FUNCTION", "CONFIG", "PUBSUB",
            "COMMAND", "SLOWLOG", "ACL", "MODULE", "LATENCY",
        ]
        .iter()
        .map(|container| go(&mut c, &[container, "HELP"]))
        .collect()
    });
    // CLIENT HELP: Redis 7.0's text, then the 7.2 subcommands Kvasir has.
    let lines = |port: u16| strings(&go(&mut connect(port), &["CLIENT", "HELP"]).expect("help"));
    let (ours, theirs) = (lines(pair.kvasir_port), lines(pair.redis_port));
    let extra = [
        "SETINFO <option> <value>",
        "    Set client meta attr. Options are:",
        "    * LIB-NAME: the client lib name.",
        "    * LIB-VER: the client lib version.",
        "NO-TOUCH (ON|OFF)",
        "    Will not touch LRU/LFU stats when this mode is on.",
    ];
    let without: Vec<&String> = ours
        .iter()
        .filter(|l| !extra.contains(&l.as_str()))
        .collect();
    assert_eq!(without, theirs.iter().collect::<Vec<_>>());
    assert_eq!(ours.len(), theirs.len() + extra.len());
}

#[test]
fn function_names_ignore_case() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        vec![
            go(
                &mut c,
                &["FUNCTION", "LOAD", "#!lua name=t\nredis.register_function('test', function() return 'hello' end)"],
            ),
            go(&mut c, &["FCALL", "TEST", "0"]),
            go(&mut c, &["FCALL_RO", "Test", "0"]),
            go(
                &mut c,
                &["FUNCTION", "LOAD", "#!lua name=t2\nredis.register_function('TEST', function() return 'again' end)"],
            ),
            go(
                &mut c,
                &["FUNCTION", "LOAD", "#!lua name=t3\nredis.register_function('a', function() end)\nredis.register_function('A', function() end)"],
            ),
        ]
    });
}

/// FUNCTION LOAD runs a library's code with Redis 7.0's library API only
/// (`redis.register_function`, `log`, the version; any other global is an
/// error) and answers register_function's misuse, a bad shebang and a long
/// load with Redis's texts; FCALL, FUNCTION FLUSH and RESTORE check their
/// arguments in Redis's order (unit/functions).
#[test]
fn function_load_errors_and_library_api_as_redis() {
    let pair = Pair::start(&[]);
    let load = |c: &mut redis::Connection, body: &str| {
        go(
            c,
            &[
                "FUNCTION",
                "LOAD",
                "REPLACE",
                &format!("#!lua name=lib\n{body}"),
            ],
        )
    };
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut out = vec![];
        for body in [
            "redis.register_function(nil, function() return 1 end)",
            "redis.register_function{function_name=1, callback=2}",
            "redis.register_function{function_name=function() end, callback=function() end}",
            "redis.register_function('f1')",
            "redis.register_function()",
            "redis.register_function('f1', function() return 1 end, {}, 'd', 'x')",
            "redis.register_function('', function() return 1 end)",
            "redis.register_function('f1', function() end)\nredis.register_function('f1', function() end)",
            "redis.register_function{function_name='f1', callback=function() end, flags={'bad'}}",
            "redis.register_function{function_name='f1', callback=function() end, foo=1}",
            "local a = 1\nwhile 1 do a = a + 1 end",
            "redis.log(redis.LOG_NOTICE, 'x')\nredis.register_function{function_name='v', \
             callback=function() return string.format('%s', redis.REDIS_VERSION) end}",
        ] {
            out.push(load(&mut c, body));
        }
        out.push(go(&mut c, &["FCALL", "v", "0"]));
        out.push(load(
            &mut c,
            "local lib = redis\n\
             lib.register_function('f5', function() lib.register_function('x', function() end) end)\n\
             lib.register_function('f6', function() lib.redis = 1 end)",
        ));
        for f in ["f5", "f6"] {
            out.push(go(&mut c, &["FCALL", f, "0"]));
        }
        out.push(go(&mut c, &["FCALL", "nosuch", "x"]));
        out.push(go(&mut c, &["FCALL", "f5", "x"]));
        out.push(go(&mut c, &["FCALL_RO", "f5", "x"]));
        out.push(go(&mut c, &["FCALL_RO", "f5", "0"]));
        for shebang in ["#! name=t", "#!lua name=\"quoted\"", "#!LUA NAME=upper"] {
            out.push(go(
                &mut c,
                &[
                    "FUNCTION",
                    "LOAD",
                    &format!("{shebang}\nredis.register_function('q', function() end)"),
                ],
            ));
            out.push(go(&mut c, &["FUNCTION", "FLUSH"]));
        }
        out.push(go(&mut c, &["FUNCTION", "FLUSH", "SYNC", "extra"]));
        out.push(go(&mut c, &["FUNCTION", "RESTORE", "a", "b", "c"]));
        out
    });
    // Globals other than the library API: Redis adds "ERR " before the
    // Lua position, Kvasir does not; both name the variable.
    for (name, port) in pair.ports() {
        let mut c = connect(port);
        for (body, missing) in [
            ("return math.random()", "math"),
            ("return redis.call('ping')", "call"),
            ("return redis.setresp(3)", "setresp"),
            ("mt = getmetatable(_G)", "getmetatable"),
            ("redis.math.random()", "math"),
        ] {
            let Err(e) = load(&mut c, body) else {
                panic!("{name}: {body} loaded");
            };
            assert!(
                e.starts_with("ERR Error registering functions: ")
                    && e.contains(&format!(
                        "Script attempted to access nonexistent global variable '{missing}'"
                    ))
                    && !e.contains("traceback"),
                "{name}: {body}: {e}"
            );
        }
    }
}

/// The errors of commands run by EXEC and by scripts count in INFO
/// errorstats and as failed calls of those commands; a script's error
/// reply that carries a command's error on is not counted twice, one of
/// its own is (unit/info "errorstats: failed call within MULTI/EXEC",
/// "... within LUA", unit/scripting "Consistent eval error reporting").
#[test]
fn errors_inside_exec_and_scripts_count_in_errorstats() {
    let pair = Pair::start(&[]);
    let cases: &[(&[&[&str]], &[&str])] = &[
        (
            &[&[
                "EVAL",
                "redis.pcall('XGROUP', 'CREATECONSUMER', 's1', 'g', 'c') return",
                "0",
            ]],
            &["xgroup|createconsumer", "eval"],
        ),
        (
            &[&["EVAL", "return redis.call('select', 99)", "0"]],
            &["select", "eval"],
        ),
        (
            &[&["EVAL", "local t = redis.pcall('select', 99) return 1", "0"]],
            &["select", "eval"],
        ),
        (
            &[&["EVAL", "return redis.pcall('select', 99)", "0"]],
            &["select", "eval"],
        ),
        (
            &[&["EVAL", "return redis.error_reply('My Error')", "0"]],
            &["eval"],
        ),
        (&[&["EVAL", "error('boom')", "0"]], &["eval"]),
        (
            &[
                &["MULTI"],
                &["SET", "a", "b"],
                &["AUTH", "a"],
                &["EXEC"],
                &["EXEC"],
            ],
            &["set", "auth", "exec"],
        ),
        (
            &[&["MULTI"], &["SET", "a", "b"], &["INCR", "a"], &["EXEC"]],
            &["set", "incr", "exec"],
        ),
    ];
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut out = vec![];
        for (commands, counted) in cases {
            go(&mut c, &["CONFIG", "RESETSTAT"]).expect("resetstat");
            for command in *commands {
                out.push(go(&mut c, command));
            }
            let errors = info(&mut c, "errorstats");
            let mut lines: Vec<String> = errors
                .lines()
                .filter(|l| l.starts_with("errorstat_"))
                .map(str::to_string)
                .collect();
            let stats = info(&mut c, "stats");
            lines.extend(
                stats
                    .lines()
                    .filter(|l| l.starts_with("total_error_replies"))
                    .map(str::to_string),
            );
            let commandstats = info(&mut c, "commandstats");
            for cmd in *counted {
                lines.push(call_counts(&commandstats, cmd));
            }
            out.push(Ok(Value::BulkString(lines.join(" ").into_bytes())));
        }
        out
    });
}

/// A blocked command goes in the slow log when it is served, not when it
/// blocks (unit/slowlog "Rewritten commands are logged as their original
/// command": a BLPOP served by an EXEC that reset the log is its newest
/// entry).
#[test]
fn a_blocked_command_is_logged_when_served() {
    let pair = Pair::start(&["--slowlog-log-slower-than", "0"]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut popper = common::RawConn::to_port(port);
        popper.send(&common::encode_cmd(&[b"BLPOP", b"l", b"0"]));
        let blocked = common::eventually(Duration::from_secs(5), || {
            info(&mut c, "clients").contains("blocked_clients:1")
        });
        assert!(blocked, "BLPOP did not block on port {port}");
        let mut out = vec![go(&mut c, &["MULTI"])];
        out.push(go(&mut c, &["LPUSH", "l", "foo"]));
        out.push(go(&mut c, &["SLOWLOG", "RESET"]));
        out.push(go(&mut c, &["EXEC"]));
        let popped = popper.read_reply();
        out.push(Ok(Value::BulkString(popped)));
        let log = go(&mut c, &["SLOWLOG", "GET"]).expect("slowlog");
        let Value::Array(entries) = log else {
            panic!("SLOWLOG GET: {log:?}");
        };
        // Each entry's arguments, newest first (ids, times and clients
        // differ).
        for entry in entries {
            if let Value::Array(fields) = entry {
                out.push(Ok(fields[3].clone()));
            }
        }
        out
    });
}

/// The memory of a large request is given back once its key is deleted:
/// the slow log kept its arguments as slices of the request's buffer (so
/// the whole 2 MB buffer), and the connection kept the grown buffer
/// (unit/lazyfree "UNLINK can reclaim memory in background": used memory
/// must fall below twice what it was before).
#[test]
fn a_large_request_leaves_no_memory_behind() {
    let pair = Pair::start(&[]);
    for (name, port) in pair.ports() {
        let mut c = connect(port);
        let used = |c: &mut redis::Connection| -> u64 {
            let text = info(c, "memory");
            text.lines()
                .find_map(|l| l.strip_prefix("used_memory:"))
                .and_then(|v| v.trim().parse().ok())
                .expect("used_memory")
        };
        let before = used(&mut c);
        let mut sadd = redis::cmd("SADD");
        sadd.arg("myset");
        for i in 0..100_000 {
            sadd.arg(i);
        }
        let added: i64 = sadd.query(&mut c).expect("sadd");
        assert_eq!(added, 100_000);
        let peak = used(&mut c);
        assert!(peak > before + 1_000_000, "{name}: {before} -> {peak}");
        let unlinked: i64 = redis::cmd("UNLINK")
            .arg("myset")
            .query(&mut c)
            .expect("unlink");
        assert_eq!(unlinked, 1);
        let mut after = peak;
        let freed = common::eventually(Duration::from_secs(5), || {
            after = used(&mut c);
            after < peak && after < before * 2
        });
        assert!(
            freed,
            "{name}: used memory {before} before, {peak} at the peak, {after} after UNLINK"
        );
    }
}

/// rdb_changes_since_last_save (what save points count) grows with the
/// writes of EXEC's and scripts' commands and not with writes that change
/// nothing (a DEL of a missing key, a SET NX that finds the key), as
/// Redis's dirty counter; Kvasir counts commands where Redis counts
/// elements, so each step here changes one element per command.
#[test]
fn changes_since_last_save_count_what_changed() {
    let pair = Pair::start(&["--save", ""]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let changes = |c: &mut redis::Connection| -> Outcome {
            let text = info(c, "persistence");
            let n = text
                .lines()
                .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
                .unwrap_or("")
                .trim()
                .to_string();
            Ok(Value::BulkString(n.into_bytes()))
        };
        let mut out = vec![changes(&mut c)];
        for step in [
            &[
                &["MULTI"][..],
                &["SET", "a", "1"],
                &["SET", "b", "2"],
                &["EXEC"],
            ][..],
            &[&[
                "EVAL",
                "redis.call('set','c','3') redis.call('set','d','4')",
                "0",
            ]],
            &[&["DEL", "nosuch"]],
            &[&["SET", "a", "again", "NX"]],
            &[&["SET", "a", "new"]],
            &[&["SADD", "s", "m"], &["SADD", "s", "m"]],
            // SETBIT and BITFIELD count only when a bit changes or the
            // string is created or grown (unit/bitops).
            &[
                &["SETBIT", "bits", "0", "0"],
                &["BITFIELD", "f", "SET", "i5", "0", "0"],
            ],
            &[
                &["SETBIT", "bits", "0", "0"],
                &["BITFIELD", "f", "SET", "i5", "0", "0"],
            ],
            &[
                &["SETBIT", "bits", "0", "1"],
                &["SETBIT", "bits", "0", "1"],
                &["BITFIELD", "f", "SET", "i5", "0", "1"],
                &["BITFIELD", "f", "SET", "i5", "0", "1"],
            ],
            &[
                &["BITFIELD", "f", "INCRBY", "u2", "100", "1"],
                &["BITFIELD", "f", "GET", "u2", "0"],
            ],
            &[
                &[
                    "BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u2", "100", "9",
                ],
                &["BITFIELD", "f", "INCRBY", "u2", "100", "0"],
            ],
            &[&["SETBIT", "bits", "90", "0"]],
        ] {
            for command in step {
                go(&mut c, command).expect("command");
            }
            out.push(changes(&mut c));
        }
        out
    });
}

/// A SETBIT or BITFIELD that changes no bit touches no WATCH and fires no
/// keyspace event, as in Redis (it is not a change).
#[test]
fn an_unchanged_bit_is_no_write() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut out = vec![
            go(&mut c, &["SETBIT", "b", "3", "1"]),
            go(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KA"]),
        ];
        let mut sub = connect(port);
        redis::cmd("SUBSCRIBE")
            .arg("__keyspace@0__:b")
            .exec(&mut sub)
            .expect("subscribe");
        let mut pubsub = sub.as_pubsub();
        pubsub
            .set_read_timeout(Some(Duration::from_millis(1000)))
            .expect("timeout");
        let _ = pubsub.get_message(); // the subscription's confirmation
        for (same, changed) in [
            (
                &["SETBIT", "b", "3", "1"][..],
                &["SETBIT", "b", "4", "1"][..],
            ),
            (
                &["BITFIELD", "b", "SET", "u1", "3", "1", "GET", "u4", "0"],
                &["BITFIELD", "b", "SET", "u1", "5", "1"],
            ),
        ] {
            for command in [same, changed] {
                go(&mut c, &["WATCH", "b"]).expect("watch");
                out.push(go(&mut c, command));
                go(&mut c, &["MULTI"]).expect("multi");
                go(&mut c, &["GET", "b"]).expect("queued");
                // An EXEC that is not aborted answers [value].
                out.push(go(&mut c, &["EXEC"]));
                let event = pubsub.get_message().ok().map(|m| m.get_payload::<String>());
                out.push(Ok(Value::BulkString(format!("{event:?}").into_bytes())));
            }
        }
        out
    });
}

/// DEBUG RELOAD NOFLUSH fails on a key or function library the store
/// already has, MERGE lets the file's win, and a plain RELOAD replaces
/// the libraries too (unit/functions "test debug reload different
/// options", "... with nosave and noflush").
#[test]
fn debug_reload_noflush_and_merge_as_redis() {
    // Each server saves its dump.rdb in a folder of its own.
    let flags = ["--enable-debug-command", "yes", "--save", ""];
    let (kvasir_dir, redis_dir) = (common::temp_dir(), common::temp_dir());
    let kvasir = Kvasir::start_in(&kvasir_dir, &flags);
    let (redis, redis_port) = start_redis_in(Some(&redis_dir), &flags);
    let pair = Pair {
        kvasir_port: kvasir.port,
        _kvasir: kvasir,
        _redis: redis,
        redis_port,
    };
    let library = |name: &str| {
        format!(
            "#!lua name={name}\nredis.register_function('{name}', function() return 'hello' end)"
        )
    };
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut out = vec![];
        for command in [
            &["FUNCTION", "LOAD", &library("test")][..],
            &["SET", "x", "1"],
            &["DEBUG", "RELOAD"],
            &["DEBUG", "RELOAD", "NOFLUSH"],
            &["DEBUG", "RELOAD", "NOFLUSH", "MERGE"],
            &["FUNCTION", "LIST"],
            &["GET", "x"],
            &["FUNCTION", "DELETE", "test"],
            &["FUNCTION", "LOAD", &library("test1")],
            &["DEBUG", "RELOAD"],
            &["FUNCTION", "LOAD", &library("test2")],
            &["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"],
            &["FCALL", "test1", "0"],
            &["FCALL", "test2", "0"],
            &["DEBUG", "RELOAD", "MERGE"],
            &["FCALL", "test2", "0"],
            &["DEBUG", "RELOAD", "NOW"],
        ] {
            out.push(go(&mut c, command));
        }
        out
    });
    drop(pair);
    for dir in [kvasir_dir, redis_dir] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A read-only script (EVAL_RO, `no-writes`) may not call commands that
/// may replicate either (PUBLISH, PFCOUNT), as Redis refuses them
/// (unit/pause "Test may-replicate commands are rejected in RO scripts").
#[test]
fn read_only_scripts_refuse_commands_that_may_replicate() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut out = vec![];
        for body in [
            "return redis.call('publish','ch','msg')",
            "return redis.call('pfcount','h')",
            "return redis.call('get','k')",
        ] {
            out.push(go(&mut c, &["EVAL_RO", body, "0"]));
            out.push(go(
                &mut c,
                &["EVAL", &format!("#!lua flags=no-writes\n{body}"), "0"],
            ));
            out.push(go(&mut c, &["EVAL", body, "0"]));
        }
        out
    });
}

#[test]
fn digest_value_of_a_copy_equals_its_source() {
    let pair = Pair::start(&["--enable-debug-command", "yes"]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut out = Vec::new();
        for (key, fill) in [
            ("l", vec!["RPUSH", "l", "a", "b", "c"]),
            ("s", vec!["SADD", "s", "1", "2", "3"]),
            ("h", vec!["HSET", "h", "f", "v", "g", "w"]),
            ("z", vec!["ZADD", "z", "1", "a", "2", "b"]),
            ("x", vec!["XADD", "x", "1-0", "f", "v"]),
        ] {
            go(&mut c, &fill).expect("fill");
            go(&mut c, &["PEXPIRE", key, "100000000"]).expect("expire");
            let copy = format!("{key}-copy");
            go(&mut c, &["COPY", key, &copy]).expect("copy");
            let digests =
                go(&mut c, &["DEBUG", "DIGEST-VALUE", key, &copy, "missing"]).expect("digest");
            let d = strings(&digests);
            out.push(Ok(Value::Array(vec![
                Value::Boolean(d[0] == d[1]),
                Value::Boolean(d[2].bytes().all(|b| b == b'0')),
            ])));
        }
        out
    });
}

#[test]
fn bitfield_get_needs_only_read_access() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        go(
            &mut c,
            &[
                "ACL",
                "SETUSER",
                "reader",
                "on",
                "nopass",
                "+@all",
                "%R~read*",
                "%W~write*",
            ],
        )
        .expect("setuser");
        go(&mut c, &["SET", "readstr", "x"]).expect("set");
        go(&mut c, &["AUTH", "reader", "any"]).expect("auth");
        vec![
            go(&mut c, &["BITFIELD", "readstr", "GET", "u4", "0"]),
            go(
                &mut c,
                &["BITFIELD", "readstr", "OVERFLOW", "SAT", "GET", "u4", "0"],
            ),
            go(&mut c, &["BITFIELD", "readstr", "SET", "u4", "0", "1"]),
            go(&mut c, &["BITFIELD", "writestr", "GET", "u4", "0"]),
            go(&mut c, &["BITFIELD", "writestr", "SET", "u4", "0", "1"]),
        ]
    });
}

#[test]
fn a_subcommand_rule_already_allowed_is_not_described() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let commands = |c: &mut redis::Connection| -> Outcome {
            let user = go(c, &["ACL", "GETUSER", "bob"])?;
            let fields = strings(&user);
            let at = fields
                .iter()
                .position(|f| f == "commands")
                .expect("commands field");
            Ok(Value::BulkString(fields[at + 1].clone().into_bytes()))
        };
        let mut out = vec![go(&mut c, &["ACL", "SETUSER", "bob", "+memory|doctor"])];
        out.push(commands(&mut c));
        out.push(go(&mut c, &["ACL", "SETUSER", "bob", "+memory"]));
        out.push(commands(&mut c));
        out.push(go(
            &mut c,
            &["ACL", "SETUSER", "bob", "+@all", "+client|id"],
        ));
        out.push(commands(&mut c));
        out
    });
}

#[test]
fn latency_percentiles_are_checked_and_kept_in_shortest_form() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let name = "latency-tracking-info-percentiles";
        let mut out = vec![
            go(&mut c, &["CONFIG", "SET", name, "0.0 50.0 99.90 100"]),
            go(&mut c, &["CONFIG", "GET", name]),
            go(&mut c, &["CONFIG", "SET", name, "101"]),
            go(&mut c, &["CONFIG", "SET", name, "a"]),
            go(&mut c, &["CONFIG", "GET", name]),
        ];
        go(&mut c, &["CONFIG", "RESETSTAT"]).expect("resetstat");
        go(&mut c, &["GET", "k"]).expect("get");
        let info: String = redis::cmd("INFO")
            .arg("latencystats")
            .query(&mut c)
            .expect("info");
        let line = info
            .lines()
            .find(|l| l.starts_with("latency_percentiles_usec_get:"))
            .unwrap_or("")
            .to_string();
        // The percentiles' names, without their values.
        let names: Vec<&str> = line
            .split(':')
            .nth(1)
            .unwrap_or("")
            .split(',')
            .map(|p| p.split('=').next().unwrap_or(""))
            .collect();
        out.push(Ok(Value::BulkString(names.join(",").into_bytes())));
        out
    });
}

#[test]
fn info_server_has_redis_fields_and_a_random_run_id() {
    let kvasir = Kvasir::start(&[]);
    let other = Kvasir::start(&[]);
    let run_id = |k: &Kvasir| -> String {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut k.conn())
            .expect("info");
        for field in [
            "redis_git_sha1:",
            "redis_git_dirty:",
            "redis_build_id:",
            "lru_clock:",
            "process_supervised:",
            "config_file:",
            "io_threads_active:",
        ] {
            assert!(info.contains(field), "{field} missing from {info}");
        }
        info.lines()
            .find_map(|l| l.strip_prefix("run_id:"))
            .unwrap_or("")
            .to_string()
    };
    let (a, b) = (run_id(&kvasir), run_id(&other));
    assert_eq!(a.len(), 40, "{a}");
    assert!(a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
    assert_ne!(a, b, "two starts gave one run id");
}

/// Fields of INFO EVERYTHING Kvasir does not report: counters of what it
/// does not track (yet), each a gap a monitoring tool could meet.
const INFO_FIELDS_NOT_TRACKED: &[&str] = &[
    "current_cow_peak",
    "current_cow_size",
    "current_cow_size_age",
    "current_eviction_exceeded_time",
    "dump_payload_sanitizations",
    "expire_cycle_cpu_milliseconds",
    "expired_stale_perc",
    "expired_time_cap_reached_count",
    "io_threaded_reads_processed",
    "io_threaded_writes_processed",
    "rdb_last_cow_size",
    "reply_buffer_expands",
    "reply_buffer_shrinks",
    "total_eviction_exceeded_time",
    "total_reads_processed",
    "total_writes_processed",
    "used_memory_functions",
    "used_memory_scripts",
    "used_memory_scripts_human",
    "used_memory_vm_functions",
];

/// Every field redis-server's INFO EVERYTHING has is in Kvasir's (the
/// per-command, per-error and per-database lines aside), but for those
/// listed above: monitoring tools and test suites read them (the Tcl
/// suite's maxmemory unit reads `evicted_clients`, its introspection unit
/// `mem_clients_normal`, exporters the allocator and replication fields).
#[test]
fn info_everything_has_the_fields_redis_has() {
    let pair = Pair::start(&[]);
    let fields = |port: u16| -> std::collections::BTreeSet<String> {
        let mut c = connect(port);
        go(&mut c, &["EVAL", "return 1", "0"]).expect("eval");
        info(&mut c, "everything")
            .lines()
            .filter(|l| !l.starts_with('#') && l.contains(':'))
            .map(|l| l.split(':').next().unwrap_or("").to_string())
            .filter(|f| {
                let per_item = ["cmdstat_", "errorstat_", "latency_percentiles_usec_"]
                    .iter()
                    .any(|p| f.starts_with(p));
                let per_db = f.starts_with("db") && f[2..].bytes().all(|b| b.is_ascii_digit());
                !per_item && !per_db
            })
            .collect()
    };
    let kvasir = fields(pair.kvasir_port);
    let redis = fields(pair.redis_port);
    let missing: Vec<&String> = redis
        .iter()
        .filter(|f| !kvasir.contains(*f) && !INFO_FIELDS_NOT_TRACKED.contains(&f.as_str()))
        .collect();
    assert!(missing.is_empty(), "INFO fields Kvasir lacks: {missing:?}");
    let mut c = connect(pair.kvasir_port);
    let memory = info(&mut c, "memory");
    assert!(memory.contains("number_of_cached_scripts:1"), "{memory}");
    let replication = info(&mut c, "replication");
    let replid = replication
        .lines()
        .find_map(|l| l.strip_prefix("master_replid:"))
        .unwrap_or("");
    assert_eq!(replid.len(), 40, "{replication}");
}

/// A distributed lock over client-side caching (rueidis's rueidislock,
/// which hung on Kvasir): holders take the lock with a script that runs
/// `SET NX PX` and then `GET`, release it with one that runs `GET` then
/// `DEL`, and waiters, tracking with NOLOOP, wait for the invalidation of
/// the lock key. Redis tracks a script's keys at each read it makes and
/// invalidates at each write, and a failed `SET NX` changes nothing; on
/// Kvasir a script's keys were tracked before its writes were heard of
/// (a waiter's own failed `SET NX` then silently untracked it) and a
/// failed `SET NX` invalidated readers.
#[test]
fn a_lock_waiter_tracking_with_noloop_hears_of_the_release() {
    let pair = Pair::start(&[]);
    let acquire = r#"local r = redis.call("SET",KEYS[1],ARGV[1],"NX","PX",ARGV[2]);redis.call("GET",KEYS[1]);return r"#;
    let release = r#"if redis.call("GET",KEYS[1]) == ARGV[1] then return redis.call("DEL",KEYS[1]) end;return 0"#;
    same_transcript_on_both(&pair, |port| {
        let mut out = Vec::new();
        for mode in [&["NOLOOP"][..], &[]] {
            let lock = format!("lock:{}", mode.len());
            let mut a = common::RawConn::to_port(port);
            let mut b = common::RawConn::to_port(port);
            let pending = |c: &mut common::RawConn| {
                let mut got = String::new();
                while let Some(push) = c.read_reply_within(Duration::from_millis(150)) {
                    got.push_str(&String::from_utf8_lossy(&push));
                }
                got
            };
            for c in [&mut a, &mut b] {
                c.cmd_str(&["HELLO", "3"]);
                let mut tracking = vec!["CLIENT", "TRACKING", "ON", "OPTOUT"];
                tracking.extend_from_slice(mode);
                out.push(c.cmd_str(&tracking));
            }
            out.push(a.cmd_str(&["EVAL", acquire, "1", &lock, "a", "100000"]));
            out.push(format!("a: {}", pending(&mut a)));
            out.push(b.cmd_str(&["EVAL", acquire, "1", &lock, "b", "100000"]));
            out.push(format!("b: {}", pending(&mut b)));
            out.push(a.cmd_str(&["EVAL", release, "1", &lock, "a"]));
            out.push(format!("a: {}", pending(&mut a)));
            out.push(format!("b: {}", pending(&mut b)));
            out.push(b.cmd_str(&["EVAL", acquire, "1", &lock, "b", "100000"]));
            out.push(format!("a: {}", pending(&mut a)));
            out.push(format!("b: {}", pending(&mut b)));
            // A SET NX that finds the key set changes nothing: B, who
            // holds and tracks the lock, hears nothing of it.
            out.push(a.cmd_str(&["SET", &lock, "a", "NX"]));
            out.push(format!("b: {}", pending(&mut b)));
        }
        out
    });
}

#[test]
fn scripts_pass_thousands_of_arguments_and_sha1hex_checks_its_arity() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let eval = |c: &mut redis::Connection, body: &str| go(c, &["EVAL", body, "0"]);
        vec![
            eval(
                &mut c,
                "local a = {} for i=1,7999 do a[i] = i end return redis.call('rpush', 'l', unpack(a))",
            ),
            go(&mut c, &["LRANGE", "l", "7997", "-1"]),
            // A bad argument among many is refused as among few.
            eval(
                &mut c,
                "local a = {} for i=1,100 do a[i] = 'x' end a[50] = {} return redis.pcall('rpush', 'l', unpack(a))",
            ),
            eval(&mut c, "return redis.sha1hex('')"),
            eval(&mut c, "return redis.sha1hex(12)"),
            eval(&mut c, "return redis.sha1hex()").map_err(|e| e.split(" script:").next().unwrap_or("").to_string()),
        ]
    });
}

#[test]
fn a_key_already_expired_when_watched_does_not_abort_exec() {
    let pair = Pair::start(&["--enable-debug-command", "yes"]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let exec_ping = |c: &mut redis::Connection| {
            go(c, &["MULTI"]).expect("multi");
            go(c, &["PING"]).expect("queued");
            go(c, &["EXEC"])
        };
        let stale_x = |c: &mut redis::Connection| {
            go(c, &["SET", "x", "foo", "PX", "1"]).expect("set");
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut out = vec![go(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"])];
        // Watched while already expired, read: no change.
        stale_x(&mut c);
        go(&mut c, &["WATCH", "x"]).expect("watch");
        out.push(go(&mut c, &["EXISTS", "x"]));
        out.push(exec_ping(&mut c));
        // Watched while already expired, deleted: no change.
        stale_x(&mut c);
        go(&mut c, &["WATCH", "x"]).expect("watch");
        out.push(go(&mut c, &["DEL", "x"]));
        out.push(exec_ping(&mut c));
        // Watched while alive, expired since: aborts.
        go(&mut c, &["SET", "x", "foo", "PX", "50"]).expect("set");
        go(&mut c, &["WATCH", "x"]).expect("watch");
        std::thread::sleep(Duration::from_millis(100));
        out.push(exec_ping(&mut c));
        // Watched while already expired, then written: aborts.
        stale_x(&mut c);
        go(&mut c, &["WATCH", "x"]).expect("watch");
        go(&mut c, &["SET", "x", "bar"]).expect("set");
        out.push(exec_ping(&mut c));
        // Watched while already expired, then removed by active expiry.
        go(&mut c, &["FLUSHALL"]).expect("flushall");
        stale_x(&mut c);
        go(&mut c, &["WATCH", "x"]).expect("watch");
        out.push(go(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]));
        assert!(common::eventually(Duration::from_secs(5), || {
            go(&mut c, &["DBSIZE"]) == Ok(Value::Int(0))
        }));
        out.push(exec_ping(&mut c));
        out
    });
}

#[test]
fn acl_key_checks_follow_redis_key_specs() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        go(
            &mut c,
            &[
                "ACL",
                "SETUSER",
                "kt",
                "on",
                "nopass",
                "+@all",
                "%R~read*",
                "%W~write*",
                "%RW~rw*",
            ],
        )
        .expect("setuser");
        let mut out = Vec::new();
        // Commands that look only at a key's existence, type or size may
        // use a key the user can read or write.
        for command in [
            vec!["EXISTS"],
            vec!["TYPE"],
            vec!["TOUCH"],
            vec!["STRLEN"],
            vec!["HLEN"],
            vec!["LLEN"],
            vec!["SCARD"],
            vec!["ZCARD"],
            vec!["XLEN"],
            vec!["HEXISTS", "+", "f"],
            vec!["HSTRLEN", "+", "f"],
            vec!["SISMEMBER", "+", "m"],
            vec!["OBJECT", "ENCODING"],
            vec!["MEMORY", "USAGE"],
            vec!["GET"],
            vec!["TTL"],
            vec!["SET", "+", "v"],
        ] {
            for key in ["read", "write", "rw", "nothing"] {
                let mut args = vec!["ACL", "DRYRUN", "kt"];
                if command.len() > 1 && command[1] == "+" {
                    args.push(command[0]);
                    args.push(key);
                    args.extend(&command[2..]);
                } else {
                    args.extend(&command);
                    args.push(key);
                }
                out.push(go(&mut c, &args));
            }
        }
        // More keys announced than given: no key is checked.
        out.push(go(
            &mut c,
            &["ACL", "DRYRUN", "kt", "EVAL", "", "3", "rw", "read"],
        ));
        out.push(go(
            &mut c,
            &["ACL", "DRYRUN", "kt", "EVAL", "", "1", "read"],
        ));
        // SORT BY/GET need read access to every key: allkeys or %R~*.
        go(&mut c, &["LPUSH", "mylist", "1"]).expect("lpush");
        go(&mut c, &["SET", "v1", "1"]).expect("set");
        for rules in [["~mylist", "~v*"], ["~mylist", "%W~*"], ["~mylist", "%R~*"]] {
            go(
                &mut c,
                &[
                    "ACL", "SETUSER", "sorter", "reset", "on", "nopass", "+sort", rules[0],
                    rules[1],
                ],
            )
            .expect("setuser");
            let mut s = connect(port);
            go(&mut s, &["AUTH", "sorter", "x"]).expect("auth");
            out.push(go(&mut s, &["SORT", "mylist", "BY", "v*"]));
            out.push(go(&mut s, &["SORT", "mylist", "GET", "v*"]));
        }
        out
    });
}

#[test]
fn config_set_refuses_a_parameter_given_twice() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        vec![
            go(
                &mut c,
                &[
                    "CONFIG",
                    "SET",
                    "maxmemory",
                    "10000001",
                    "maxmemory",
                    "10000002",
                ],
            ),
            go(
                &mut c,
                &[
                    "CONFIG",
                    "SET",
                    "hash-max-ziplist-entries",
                    "10",
                    "hash-max-listpack-entries",
                    "20",
                ],
            ),
            go(&mut c, &["CONFIG", "GET", "maxmemory"]),
            go(
                &mut c,
                &["CONFIG", "SET", "maxmemory", "10000001", "hz", "20"],
            ),
            go(&mut c, &["CONFIG", "GET", "maxmemory"]),
        ]
    });
}

#[test]
fn scripts_that_may_write_are_refused_over_maxmemory_by_their_flags() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        go(
            &mut c,
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=f\nredis.register_function('plain', function() return 1 end)\nredis.register_function{function_name='ro', callback=function() return 2 end, flags={'no-writes'}}\nredis.register_function{function_name='oomok', callback=function() redis.call('set', 'y', '1') return 3 end, flags={'allow-oom'}}",
            ],
        )
        .expect("function load");
        go(&mut c, &["CONFIG", "SET", "maxmemory", "1"]).expect("maxmemory");
        let out = vec![
            go(&mut c, &["FCALL", "plain", "0"]),
            go(&mut c, &["FCALL", "ro", "0"]),
            go(&mut c, &["FCALL", "oomok", "0"]),
            go(&mut c, &["EVAL", "#!lua\nreturn 1", "0"]),
            go(&mut c, &["EVAL", "#!lua flags=no-writes\nreturn 2", "0"]),
            // allow-oom: any command runs, writes included.
            go(
                &mut c,
                &[
                    "EVAL",
                    "#!lua flags=allow-oom\nredis.call('set', 'z', '1') return 3",
                    "0",
                ],
            ),
            go(&mut c, &["MULTI"]),
            go(&mut c, &["FCALL", "plain", "0"]),
            go(&mut c, &["EXEC"]),
            // An old-style script is admitted, but its first command that
            // may grow the data is refused; reads go on.
            go(&mut c, &["EVAL", "return redis.pcall('set', 'x', 1)", "0"]),
            go(&mut c, &["EVAL", "return redis.call('get', 'x')", "0"]),
            go(&mut c, &["EVAL", "redis.call('set', 'x', 1)", "0"])
                .map_err(|e| e.split(" script:").next().unwrap_or("").to_string()),
            go(&mut c, &["MULTI"]),
            go(&mut c, &["EVAL", "return redis.pcall('set', 'x', 1)", "0"]),
            go(&mut c, &["EXEC"]),
            go(&mut c, &["EXISTS", "x"]),
            go(&mut c, &["EXISTS", "y", "z"]),
        ];
        go(&mut c, &["CONFIG", "SET", "maxmemory", "0"]).expect("maxmemory");
        out
    });
}

#[test]
fn flushall_tells_a_blocked_xreadgroup_its_stream_is_gone() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut out = Vec::new();
        for flush in [["FLUSHALL", "SYNC"], ["FLUSHDB", "SYNC"]] {
            out.push(go(&mut c, &["XADD", "s", "1-0", "f", "v"]));
            out.push(go(&mut c, &["XGROUP", "CREATE", "s", "g", "$"]));
            let reader = std::thread::spawn(move || {
                let mut r = connect(port);
                go(
                    &mut r,
                    &[
                        "XREADGROUP",
                        "GROUP",
                        "g",
                        "a",
                        "BLOCK",
                        "0",
                        "STREAMS",
                        "s",
                        ">",
                    ],
                )
            });
            assert!(common::eventually(Duration::from_secs(5), || {
                let info: String = redis::cmd("INFO")
                    .arg("clients")
                    .query(&mut c)
                    .unwrap_or_default();
                info.contains("blocked_clients:1")
            }));
            out.push(go(&mut c, &flush));
            out.push(reader.join().expect("reader"));
        }
        out
    });
}

#[test]
fn tracking_covers_a_script_s_keys_when_it_reads() {
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
        let mut sub_conn = client.get_connection().expect("subscriber");
        let sub_id = match go(&mut sub_conn, &["CLIENT", "ID"]) {
            Ok(Value::Int(id)) => id.to_string(),
            other => panic!("client id: {other:?}"),
        };
        let mut sub = sub_conn.as_pubsub();
        sub.subscribe("__redis__:invalidate").expect("subscribe");
        sub.set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        let mut tracked = connect(port);
        let mut writer = connect(port);
        go(
            &mut tracked,
            &["CLIENT", "TRACKING", "on", "REDIRECT", &sub_id],
        )
        .expect("tracking");
        let mut out = Vec::new();
        // A script that only writes: its keys are not tracked; one that
        // reads: they are. EVAL_RO likewise.
        for (command, body) in [
            ("EVAL", "redis.call('set', 'k3', 'v')"),
            ("EVAL", "redis.call('get', 'k3')"),
            ("EVAL_RO", "redis.call('ping')"),
            ("EVAL_RO", "redis.call('get', 'k1')"),
        ] {
            go(&mut tracked, &[command, body, "2", "k1", "k2"]).expect("script");
            go(&mut writer, &["MSET", "k2", "x", "k1", "y"]).expect("mset");
            let mut invalidated: Vec<String> = Vec::new();
            while let Ok(msg) = sub.get_message() {
                invalidated.extend(msg.get_payload::<Vec<String>>().unwrap_or_default());
            }
            invalidated.sort();
            out.push(Ok(Value::Array(
                invalidated
                    .into_iter()
                    .map(|k| Value::BulkString(k.into_bytes()))
                    .collect(),
            )));
        }
        out
    });
}

/// Sends `commands` (inline) on a raw connection and returns the bytes
/// answered up to and including the reply to a final `ECHO <marker>`.
fn raw_exchange(stream: &mut std::net::TcpStream, commands: &[&str], marker: &str) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut out = String::new();
    for c in commands {
        out.push_str(c);
        out.push_str("\r\n");
    }
    out.push_str(&format!("ECHO {marker}\r\n"));
    stream.write_all(out.as_bytes()).expect("write");
    let end = format!("${}\r\n{marker}\r\n", marker.len()).into_bytes();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !got.ends_with(&end) {
        assert!(Instant::now() < deadline, "no full answer: {got:?}");
        let mut buf = [0u8; 4096];
        let n = stream.read(&mut buf).expect("read");
        assert!(n > 0, "connection closed after {got:?}");
        got.extend_from_slice(&buf[..n]);
    }
    got
}

#[test]
fn debug_protocol_and_debug_error_answer_what_client_test_suites_expect() {
    let pair = Pair::start(&["--enable-debug-command", "yes"]);
    let types = [
        "string",
        "integer",
        "double",
        "bignum",
        "null",
        "array",
        "set",
        "map",
        "attrib",
        "push",
        "verbatim",
        "true",
        "false",
        "nosuchtype",
    ];
    let mut commands: Vec<String> = types
        .iter()
        .map(|t| format!("DEBUG PROTOCOL {t}"))
        .collect();
    commands.push("DEBUG ERROR \"LOADING fake message\"".into());
    commands.push("DEBUG ERROR \"READONLY You can't write against a read only replica.\"".into());
    commands.push("DEBUG ERROR".into());
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let mut answers = Vec::new();
    for (name, port) in pair.ports() {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let resp2 = raw_exchange(&mut stream, &commands, "END2");
        // HELLO's own reply names the server: left out of the comparison.
        raw_exchange(&mut stream, &["HELLO 3"], "START");
        let resp3 = raw_exchange(&mut stream, &commands, "END3");
        answers.push((name, resp2, resp3));
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let (_, k2, k3) = &answers[0];
    let (_, r2, r3) = &answers[1];
    assert_eq!(
        text(k2),
        text(r2),
        "RESP2: Kvasir (left), redis-server (right)"
    );
    assert_eq!(
        text(k3),
        text(r3),
        "RESP3: Kvasir (left), redis-server (right)"
    );
    // What the clients rely on, spelled out.
    let k3 = text(k3);
    assert!(
        k3.contains("(1234567999999999999999999999999999999\r\n"),
        "{k3}"
    );
    assert!(k3.contains("|1\r\n$14\r\nkey-popularity\r\n"), "{k3}");
    assert!(
        k3.contains(">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n"),
        "{k3}"
    );
    assert!(k3.contains("-LOADING fake message\r\n"), "{k3}");
}

#[test]
fn command_getkeysandflags_reports_redis_key_spec_flags() {
    let pair = Pair::start(&[]);
    // One invocation per shape of key specs: read, existence, overwrite,
    // insert, delete, remove, variable flags (SET with and without GET,
    // BITFIELD), several specs (LMOVE, RENAME, ZUNIONSTORE, SORT ...
    // STORE, GEORADIUS ... STORE, PFMERGE, MIGRATE), keys found by
    // numkeys or STREAMS, subcommands, channels that are not keys.
    let invocations: &[&[&str]] = &[
        &["GET", "k"],
        &["EXISTS", "a", "b"],
        &["SET", "k", "v"],
        &["SET", "k", "v", "GET"],
        &["SETNX", "k", "v"],
        &["MSET", "a", "1", "b", "2"],
        &["DEL", "a", "b"],
        &["LPUSH", "l", "x"],
        &["LPOP", "l"],
        &["LMOVE", "a", "b", "LEFT", "RIGHT"],
        &["RENAME", "a", "b"],
        &["RENAMENX", "a", "b"],
        &["COPY", "a", "b"],
        &["ZUNIONSTORE", "d", "2", "a", "b"],
        &["SINTERSTORE", "d", "a", "b"],
        &["SORT", "k", "BY", "w*", "STORE", "d"],
        &["GEORADIUS", "g", "1", "1", "1", "m", "STORE", "d"],
        &["PFMERGE", "d", "a", "b"],
        &["PFCOUNT", "a"],
        &["BITFIELD", "b", "GET", "u8", "0"],
        &["BITFIELD", "b", "SET", "u8", "0", "1"],
        &["LMPOP", "2", "a", "b", "LEFT"],
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"],
        &["XGROUP", "CREATE", "s", "g", "$"],
        &["XGROUP", "DESTROY", "s", "g"],
        &["XAUTOCLAIM", "s", "g", "c", "0", "0"],
        &["EVAL", "return 1", "1", "k"],
        &["MIGRATE", "h", "1", "", "0", "5", "KEYS", "a", "b"],
        &["RESTORE-ASKING", "k", "0", "x"],
        &["SPUBLISH", "ch", "m"],
        &["GET"],
        &["PING", "x"],
    ];
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        invocations
            .iter()
            .map(|inv| {
                let mut args = vec!["COMMAND", "GETKEYSANDFLAGS"];
                args.extend(inv.iter());
                go(&mut c, &args)
            })
            .collect()
    });
    // ACL follows the same flags: XREADGROUP reads (%R~), the XGROUP and
    // XCLAIM family only write (%W~), as Redis 7.0 derives it.
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        go(
            &mut c,
            &[
                "ACL", "SETUSER", "ks", "on", "nopass", "+@all", "%R~r*", "%W~w*",
            ],
        )
        .expect("setuser");
        let mut out = Vec::new();
        for key in ["r", "w"] {
            for cmd in [
                vec!["XREADGROUP", "GROUP", "g", "c", "STREAMS", key, ">"],
                vec!["XACK", key, "g", "0-1"],
                vec!["XCLAIM", key, "g", "c", "0", "0-1"],
                vec!["XGROUP", "CREATE", key, "g", "$"],
                vec!["GEOADD", key, "1", "1", "m"],
            ] {
                let mut args = vec!["ACL", "DRYRUN", "ks"];
                args.extend(cmd);
                out.push(go(&mut c, &args));
            }
        }
        out
    });
}

#[test]
fn a_read_deletes_the_expired_keys_it_finds() {
    // Redis's lazy expiry (unit/expire "Redis should lazy expire keys"):
    // with the active cycle off, a read of an expired key removes it, with
    // its `expired` event.
    let pair = Pair::start(&["--enable-debug-command", "yes"]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut out = vec![
            go(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
            go(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ex"]),
        ];
        let mut sub = connect(port);
        let mut ps = sub.as_pubsub();
        ps.subscribe("__keyevent@0__:expired").expect("subscribe");
        for k in ["key1{t}", "key2{t}", "key3{t}"] {
            out.push(go(&mut c, &["PSETEX", k, "100", "a"]));
        }
        out.push(go(&mut c, &["SET", "live{t}", "b"]));
        out.push(go(&mut c, &["DBSIZE"]));
        std::thread::sleep(Duration::from_millis(400));
        // Still counted: nothing has looked at them.
        out.push(go(&mut c, &["DBSIZE"]));
        out.push(go(&mut c, &["MGET", "key1{t}", "key2{t}", "live{t}"]));
        out.push(go(&mut c, &["DBSIZE"]));
        out.push(go(&mut c, &["EXISTS", "key3{t}"]));
        out.push(go(&mut c, &["DBSIZE"]));
        let mut expired = Vec::new();
        for _ in 0..3 {
            let msg = ps.get_message().expect("expired event");
            let key: String = msg.get_payload().expect("payload");
            expired.push(redis::Value::BulkString(key.into_bytes()));
        }
        out.push(Ok(redis::Value::Array(expired)));
        out.push(go(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]));
        out
    });
}

#[test]
fn commandstats_count_the_commands_scripts_run() {
    // Redis counts every command a script runs under that command in INFO
    // commandstats (calls, failed calls), and in total_commands_processed.
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        go(&mut c, &["CONFIG", "RESETSTAT"]).expect("resetstat");
        let mut out = vec![
            go(
                &mut c,
                &[
                    "EVAL",
                    "redis.call('set', KEYS[1], '1') redis.call('get', KEYS[1]) \
                     redis.call('incr', KEYS[1]) return redis.pcall('lpush', KEYS[1], 'x')",
                    "1",
                    "k",
                ],
            ),
            go(
                &mut c,
                &["FUNCTION", "LOAD", "#!lua name=cs\nredis.register_function('g', function(keys) return redis.call('get', keys[1]) end)"],
            ),
            go(&mut c, &["FCALL", "g", "1", "k"]),
        ];
        let commandstats = info(&mut c, "commandstats");
        for cmd in ["set", "get", "incr", "lpush", "eval", "fcall"] {
            out.push(Ok(redis::Value::SimpleString(call_counts(
                &commandstats,
                cmd,
            ))));
        }
        out
    });
}

#[test]
fn a_blocked_command_that_ends_in_an_error_counts_as_failed() {
    // unit/type/stream-cgroups "XGROUP DESTROY should unblock XREADGROUP
    // with -NOGROUP": the error a blocked command finally gets counts in
    // errorstats and as a failed call (Redis's updateStatsOnUnblock); the
    // call was counted when it blocked. Also CLIENT UNBLOCK ... ERROR.
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut out = vec![
            go(&mut c, &["CONFIG", "RESETSTAT"]),
            go(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]),
        ];
        let wait_blocked = |c: &mut redis::Connection| {
            let blocked = common::eventually(Duration::from_secs(5), || {
                let info: String = redis::cmd("INFO")
                    .arg("clients")
                    .query(c)
                    .unwrap_or_default();
                info.contains("blocked_clients:1")
            });
            assert!(blocked, "no client blocked on port {port}");
        };
        let reader = std::thread::spawn(move || {
            let mut r = connect(port);
            go(
                &mut r,
                &[
                    "XREADGROUP",
                    "GROUP",
                    "g",
                    "alice",
                    "BLOCK",
                    "0",
                    "STREAMS",
                    "s",
                    ">",
                ],
            )
        });
        wait_blocked(&mut c);
        out.push(go(&mut c, &["XGROUP", "DESTROY", "s", "g"]));
        out.push(reader.join().expect("reader"));
        let (id_tx, id_rx) = std::sync::mpsc::channel();
        let popper = std::thread::spawn(move || {
            let mut r = connect(port);
            let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut r).expect("id");
            id_tx.send(id).expect("send id");
            go(&mut r, &["BLPOP", "l", "0"])
        });
        let id = id_rx.recv().expect("id").to_string();
        wait_blocked(&mut c);
        out.push(go(&mut c, &["CLIENT", "UNBLOCK", &id, "ERROR"]));
        out.push(popper.join().expect("popper"));
        // Only these errors: redis-rs's CLIENT SETINFO fails on 7.0.15.
        let errorstats = info(&mut c, "errorstats");
        let mut stats: Vec<String> = errorstats
            .lines()
            .filter(|l| {
                l.starts_with("errorstat_NOGROUP:") || l.starts_with("errorstat_UNBLOCKED:")
            })
            .map(|l| l.trim().to_string())
            .collect();
        let commandstats = info(&mut c, "commandstats");
        stats.push(call_counts(&commandstats, "xreadgroup"));
        stats.push(call_counts(&commandstats, "blpop"));
        out.extend(stats.into_iter().map(|l| Ok(redis::Value::SimpleString(l))));
        out
    });
}

#[test]
fn a_script_signals_the_keys_its_commands_write() {
    // Redis signals the keys a script's commands modify, not the keys the
    // script declares: a write to an undeclared key aborts the EXEC of its
    // watchers (Kvasir let it through), a script that only reads its
    // declared keys aborts nothing and invalidates no tracked key
    // (unit/tracking "Tracking only occurs for scripts when a command
    // calls a read-only command": Kvasir invalidated the declared keys
    // right after tracking them, so the next real write went unheard).
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut other = connect(port);
        let mut out = Vec::new();
        let scripts: [(&str, &[&str]); 3] = [
            ("redis.call('set', 'undeclared', 'x')", &[]),
            ("return redis.call('get', KEYS[1])", &["declared"]),
            ("redis.call('set', 'undeclared', 'y') error('boom')", &[]),
        ];
        for (script, keys) in scripts {
            for watched in ["undeclared", "declared"] {
                out.push(go(&mut c, &["WATCH", watched]));
                out.push(go(&mut c, &["MULTI"]));
                out.push(go(&mut c, &["SET", "t", "1"]));
                let numkeys = keys.len().to_string();
                let mut eval = vec!["EVAL", script, &numkeys];
                eval.extend_from_slice(keys);
                out.push(go(&mut other, &eval));
                out.push(go(&mut c, &["EXEC"]));
            }
        }
        out
    });
    let transcript = |port: u16| -> Vec<String> {
        let mut r = common::RawConn::to_port(port);
        let mut writer = common::RawConn::to_port(port);
        r.cmd_str(&["HELLO", "3"]);
        let mut out = vec![r.cmd_str(&["CLIENT", "TRACKING", "on"])];
        writer.cmd_str(&["MSET", "key2{t}", "1", "key1{t}", "1"]);
        // A script that reads nothing tracks nothing.
        out.push(r.cmd_str(&[
            "EVAL",
            "redis.call('set', 'key3{t}', 'bar')",
            "2",
            "key1{t}",
            "key2{t}",
        ]));
        writer.cmd_str(&["MSET", "key2{t}", "2", "key1{t}", "2"]);
        out.push(r.cmd_str(&["PING"]));
        // One that reads tracks every declared key, invalidated when
        // another client writes them.
        out.push(r.cmd_str(&[
            "EVAL",
            "redis.call('get', 'key3{t}')",
            "2",
            "key1{t}",
            "key2{t}",
        ]));
        writer.cmd_str(&["MSET", "key2{t}", "3", "key1{t}", "3"]);
        out.push(exchange(&mut r, &["PING"]));
        out
    };
    same_transcript_on_both(&pair, transcript);
}

#[test]
fn a_transaction_tracks_its_reads_in_order_with_its_writes() {
    // unit/tracking's "not interleaved with multiple keys response" and
    // "... with transaction response": in EXEC each command tracks or
    // invalidates in turn, so a key written then read in the block stays
    // tracked (Kvasir tracked the block's reads first and then invalidated
    // them with its earlier writes), one read then written is
    // invalidated; the invalidation follows the reply.
    let pair = Pair::start(&["--enable-debug-command", "yes"]);
    let transcript = |port: u16| -> Vec<String> {
        let mut r = common::RawConn::to_port(port);
        let mut out = Vec::new();
        r.cmd_str(&["HELLO", "3"]);
        for cmd in [
            &["CLIENT", "TRACKING", "on"][..],
            &["DEBUG", "SET-ACTIVE-EXPIRE", "0"],
            &["MULTI"],
            &["MSET", "x{t}", "1", "y{t}", "2"],
            &["PEXPIRE", "y{t}", "100"],
            &["GET", "y{t}"],
            &["EXEC"],
        ] {
            out.push(exchange(&mut r, cmd));
        }
        std::thread::sleep(Duration::from_millis(150));
        for cmd in [
            &["MGET", "x{t}", "y{t}"][..],
            &["MSET", "a{t}", "1", "b{t}", "2"],
            &["GET", "a{t}"],
            &["MULTI"],
            &["INCR", "a{t}"],
            &["GET", "b{t}"],
            &["EXEC"],
            &["MULTI"],
            &["GET", "c"],
            &["SET", "c", "1"],
            &["GET", "d"],
            &["EXEC"],
            &["SET", "d", "2"],
            &["DEBUG", "SET-ACTIVE-EXPIRE", "1"],
        ] {
            out.push(exchange(&mut r, cmd));
        }
        out
    };
    same_transcript_on_both(&pair, transcript);
}

#[test]
fn smove_dirties_its_destination_only_when_the_member_is_new() {
    // unit/type/set "SMOVE only notify dstset when the addition is
    // successful": the source is modified, the destination only if the
    // member was not there (Redis's smoveCommand); also from a script.
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut other = connect(port);
        let mut out = Vec::new();
        for via_script in [false, true] {
            for dst_has_it in [true, false] {
                for watched in ["dst", "src"] {
                    out.push(go(&mut c, &["DEL", "src", "dst"]));
                    out.push(go(&mut c, &["SADD", "src", "a", "b"]));
                    let there = if dst_has_it { "a" } else { "z" };
                    out.push(go(&mut c, &["SADD", "dst", there]));
                    out.push(go(&mut c, &["WATCH", watched]));
                    out.push(go(&mut c, &["MULTI"]));
                    out.push(go(&mut c, &["SET", "t", "1"]));
                    out.push(if via_script {
                        go(
                            &mut other,
                            &[
                                "EVAL",
                                "return redis.call('SMOVE', KEYS[1], KEYS[2], 'a')",
                                "2",
                                "src",
                                "dst",
                            ],
                        )
                    } else {
                        go(&mut other, &["SMOVE", "src", "dst", "a"])
                    });
                    out.push(go(&mut c, &["EXEC"]));
                }
            }
        }
        out
    });
}

#[test]
fn keys_evicted_for_a_command_are_invalidated_before_its_reply() {
    // unit/tracking "Tracking invalidation message of eviction keys should
    // be before response": Redis evicts before it runs a command, so the
    // invalidation of a tracked key evicted for it comes first. And it
    // evicts at once only when maxmemory changes, not when the policy
    // does (Kvasir evicted at CONFIG SET maxmemory-policy).
    let pair = Pair::start(&[]);
    let transcript = |port: u16| -> Vec<String> {
        let mut r = common::RawConn::to_port(port);
        let mut out = Vec::new();
        r.cmd_str(&["HELLO", "3"]);
        for cmd in [
            &["CLIENT", "TRACKING", "on"][..],
            &["SETEX", "vk", "10000", "x"],
            &["GET", "vk"],
            &["CONFIG", "SET", "maxmemory", "1"],
            &["CONFIG", "SET", "maxmemory-policy", "volatile-random"],
            &["GET", "other"],
            &["EXISTS", "vk"],
            &["CONFIG", "SET", "maxmemory", "0"],
        ] {
            out.push(exchange(&mut r, cmd));
        }
        out
    };
    same_transcript_on_both(&pair, transcript);
}

#[test]
fn the_expire_cycle_is_a_latency_event() {
    // unit/latency-monitor "LATENCY of expire events are correctly
    // collected": a cycle that expires a big set takes over the threshold
    // and shows in LATENCY LATEST as `expire-cycle`.
    let pair = Pair::start(&[]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut out = vec![
            go(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "1"]),
            go(
                &mut c,
                &[
                    "EVAL",
                    "for i = 1, tonumber(ARGV[1]) do redis.call('SADD', KEYS[1], i) end",
                    "1",
                    "big",
                    "200000",
                ],
            ),
            go(&mut c, &["PEXPIRE", "big", "50"]),
        ];
        // DBSIZE, not EXISTS: a read would expire the key itself (a
        // `command` sample), not the cycle.
        let gone = common::eventually(Duration::from_secs(10), || {
            redis::cmd("DBSIZE").query::<i64>(&mut c).ok() == Some(0)
        });
        assert!(gone, "big did not expire on port {port}");
        let latest = match go(&mut c, &["LATENCY", "LATEST"]) {
            Ok(v) => strings(&v).join(" "),
            Err(e) => e,
        };
        out.push(Ok(redis::Value::Boolean(latest.contains("expire-cycle"))));
        out
    });
}

#[test]
fn client_list_shows_the_query_buffer_of_the_running_command() {
    // unit/introspection "CLIENT LIST" / "CLIENT INFO": while a command
    // runs its bytes are in the client's query buffer (qbuf=26 for
    // CLIENT LIST); an idle client's is empty.
    let pair = Pair::start(&[]);
    let fields = |port: u16| -> Vec<String> {
        let mut r = common::RawConn::to_port(port);
        let mut idle = common::RawConn::to_port(port);
        let idle_id = idle.cmd_str(&["CLIENT", "ID"]);
        let idle_id = idle_id.trim_start_matches(':').trim_end().to_string();
        let qbuf = |line: &str| {
            line.split(' ')
                .find(|f| f.starts_with("qbuf="))
                .unwrap_or("no qbuf")
                .to_string()
        };
        let own_id = r.cmd_str(&["CLIENT", "ID"]);
        let own_id = own_id.trim_start_matches(':').trim_end().to_string();
        vec![
            qbuf(&r.cmd_str(&["CLIENT", "INFO"])),
            qbuf(&r.cmd_str(&["CLIENT", "LIST", "ID", &own_id])),
            qbuf(&r.cmd_str(&["CLIENT", "LIST", "ID", &idle_id])),
        ]
    };
    same_transcript_on_both(&pair, fields);
}

#[test]
fn swapdb_dirties_only_watchers_of_keys_it_changes() {
    // Redis's touchAllWatchedKeysInDb (unit/multi's SWAPDB tests): a
    // watched key in neither database, or a stale (expired) key that
    // stays stale or disappears, is no change; a real key swapped in or
    // out is.
    let pair = Pair::start(&["--enable-debug-command", "yes"]);
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut out = vec![go(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"])];
        let round = |c: &mut redis::Connection, setup: &[&[&str]], watch_db: &str| {
            go(c, &["FLUSHALL"]).expect("flushall");
            for cmd in setup {
                go(c, cmd).expect("setup");
            }
            std::thread::sleep(Duration::from_millis(5));
            let mut r = vec![
                go(c, &["SELECT", watch_db]),
                go(c, &["WATCH", "x"]),
                go(c, &["SWAPDB", "0", "1"]),
                go(c, &["MULTI"]),
                go(c, &["PING"]),
                go(c, &["EXEC"]),
            ];
            r.push(go(c, &["SELECT", "0"]));
            r
        };
        // Nothing anywhere.
        out.extend(round(&mut c, &[], "1"));
        // A live key swapped out of the watched database.
        out.extend(round(&mut c, &[&["SELECT", "1"], &["SET", "x", "v"]], "1"));
        // A live key swapped into the watched database.
        out.extend(round(&mut c, &[&["SELECT", "0"], &["SET", "x", "v"]], "1"));
        // An expired key replaced by nothing.
        out.extend(round(
            &mut c,
            &[&["SELECT", "1"], &["SET", "x", "v", "PX", "1"]],
            "1",
        ));
        // Nothing replaced by an expired key.
        out.extend(round(
            &mut c,
            &[&["SELECT", "0"], &["SET", "x", "v", "PX", "1"]],
            "1",
        ));
        // An expired key replaced by another expired key.
        out.extend(round(
            &mut c,
            &[
                &["SELECT", "0"],
                &["SET", "x", "v", "PX", "1"],
                &["SELECT", "1"],
                &["SET", "x", "w", "PX", "1"],
            ],
            "1",
        ));
        // SWAPDB of a database with itself.
        go(&mut c, &["FLUSHALL"]).expect("flushall");
        go(&mut c, &["SET", "x", "v"]).expect("set");
        out.push(go(&mut c, &["WATCH", "x"]));
        out.push(go(&mut c, &["SWAPDB", "0", "0"]));
        out.push(go(&mut c, &["MULTI"]));
        out.push(go(&mut c, &["PING"]));
        out.push(go(&mut c, &["EXEC"]));
        out.push(go(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]));
        out
    });
}

/// Every command's tips (COMMAND INFO's eighth field), by full name,
/// subcommands included.
fn command_tips(entries: &Value, out: &mut std::collections::BTreeMap<String, Vec<String>>) {
    let Value::Array(entries) = entries else {
        return;
    };
    for entry in entries {
        let Value::Array(fields) = entry else {
            continue;
        };
        if fields.len() < 10 {
            continue;
        }
        out.insert(strings(&fields[0]).join(""), strings(&fields[7]));
        command_tips(&fields[9], out);
    }
}

#[test]
fn command_info_carries_redis_command_tips() {
    // Cluster clients (go-redis, node-redis) route keyless and multi-key
    // commands by these tips: DBSIZE to every master, summed; MGET split
    // by slot.
    let pair = Pair::start(&[]);
    let tips_on = |port: u16| {
        let mut c = connect(port);
        let all = go(&mut c, &["COMMAND"]).expect("COMMAND");
        let mut tips = std::collections::BTreeMap::new();
        command_tips(&all, &mut tips);
        tips
    };
    let kvasir = tips_on(pair.kvasir_port);
    let redis = tips_on(pair.redis_port);
    let shared: Vec<&String> = kvasir.keys().filter(|n| redis.contains_key(*n)).collect();
    assert!(
        shared.len() > 300,
        "only {} commands in common",
        shared.len()
    );
    let with_tips = shared.iter().filter(|n| !redis[**n].is_empty()).count();
    assert!(with_tips > 80, "only {with_tips} commands with tips");
    let differ: Vec<String> = shared
        .iter()
        .filter(|n| kvasir[**n] != redis[**n])
        .map(|n| format!("{n}: kvasir {:?}, redis {:?}", kvasir[*n], redis[*n]))
        .collect();
    assert!(differ.is_empty(), "tips differ: {differ:#?}");
    // In RESP3 tips, key specs and subcommands are sets, as in Redis.
    same_transcript_on_both(&pair, |port| {
        let mut r = common::RawConn::to_port(port);
        exchange(&mut r, &["HELLO", "3"]);
        vec![exchange(
            &mut r,
            &[
                "COMMAND", "INFO", "get", "touch", "mget", "dbsize", "flushall",
            ],
        )]
    });
}

/// COMMAND sees the command table `rename-command` left, as redis-server's:
/// a renamed command is found by its new name and shown by its own, a
/// disabled one is gone (one fewer in COUNT), the old name is unknown to
/// INFO, DOCS and GETKEYS.
#[test]
fn command_introspection_follows_rename_command() {
    let renames = [
        "--rename-command",
        "flushall",
        "",
        "--rename-command",
        "get",
        "mget2",
        "--rename-command",
        "config",
        "cfg",
    ];
    let pair = Pair::start(&renames);
    let plain = Pair::start(&[]);
    let count = |port: u16| match go(&mut connect(port), &["COMMAND", "COUNT"]) {
        Ok(Value::Int(n)) => n,
        other => panic!("COMMAND COUNT: {other:?}"),
    };
    for ((name, renamed), (_, port)) in pair.ports().into_iter().zip(plain.ports()) {
        assert_eq!(count(renamed), count(port) - 1, "{name}");
    }
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        let mut out = vec![];
        for name in ["mget2", "get", "cfg|get", "config|get", "flushall", "cfg"] {
            // The name and arity COMMAND INFO shows, or nil.
            out.push(go(&mut c, &["COMMAND", "INFO", name]).map(|v| match v {
                Value::Array(items) => match items.first() {
                    Some(Value::Array(info)) => Value::Array(info[..2].to_vec()),
                    other => other.cloned().unwrap_or(Value::Nil),
                },
                other => other,
            }));
        }
        // DOCS names what it found.
        out.push(
            go(
                &mut c,
                &[
                    "COMMAND",
                    "DOCS",
                    "cfg|get",
                    "config|get",
                    "flushall",
                    "mget2",
                ],
            )
            .map(|v| match v {
                Value::Array(items) => Value::Array(items.into_iter().step_by(2).collect()),
                Value::Map(pairs) => Value::Array(pairs.into_iter().map(|(k, _)| k).collect()),
                other => other,
            }),
        );
        out.push(go(&mut c, &["COMMAND", "GETKEYS", "mget2", "k"]));
        out.push(go(&mut c, &["COMMAND", "GETKEYS", "get", "k"]));
        out.push(go(&mut c, &["COMMAND", "GETKEYS", "cfg", "get", "x"]));
        // LIST shows the commands' own names, without the disabled one.
        let listed = match go(&mut c, &["COMMAND", "LIST"]) {
            Ok(v) => strings(&v),
            Err(e) => vec![e],
        };
        for name in ["flushall", "get", "mget2", "config", "cfg"] {
            out.push(Ok(Value::Int(listed.iter().any(|n| n == name) as i64)));
        }
        out.push(go(&mut c, &["MGET2", "nosuch"]));
        // ACL rules name commands by their own names; DRYRUN runs one by
        // the name clients use.
        out.push(go(
            &mut c,
            &["ACL", "SETUSER", "u", "on", "nopass", "+mget2"],
        ));
        out.push(go(
            &mut c,
            &["ACL", "SETUSER", "u", "on", "nopass", "+get", "~k*"],
        ));
        out.push(go(&mut c, &["ACL", "DRYRUN", "u", "mget2", "k1"]));
        out.push(go(&mut c, &["ACL", "DRYRUN", "u", "mget2", "x"]));
        out.push(go(&mut c, &["ACL", "DRYRUN", "u", "get", "k1"]));
        out.push(go(&mut c, &["ACL", "DRYRUN", "u", "cfg", "get", "x"]));
        out
    });
}

/// LATENCY GRAPH draws the same ASCII graph as redis-server 7.0 for the
/// same slow commands (the milliseconds and ages masked: they are timings),
/// and answers an unknown event or a wrong argument count as it does.
#[test]
fn latency_graph_draws_redis_graph() {
    let pair = Pair::start(&["--enable-debug-command", "yes"]);
    let mut kv = connect(pair.kvasir_port);
    let mut redis = connect(pair.redis_port);
    let digits = |text: String| -> String {
        text.chars()
            .map(|c| if c.is_ascii_digit() { '9' } else { c })
            .collect()
    };
    for c in [&mut kv, &mut redis] {
        let _: () = common::q(c, &["CONFIG", "SET", "latency-monitor-threshold", "1"]);
        let _: () = common::q(c, &["DEBUG", "SLEEP", "0.02"]);
    }
    // A second sample a second later, four times as slow: the first is the
    // graph's lowest level, the second its highest.
    std::thread::sleep(Duration::from_millis(1100));
    for c in [&mut kv, &mut redis] {
        let _: () = common::q(c, &["DEBUG", "SLEEP", "0.08"]);
    }
    let graphs: Vec<String> = [&mut kv, &mut redis]
        .into_iter()
        .map(|c| common::q::<String>(c, &["LATENCY", "GRAPH", "command"]))
        .collect();
    assert!(
        graphs[0].starts_with("command - high ") && graphs[0].contains("\n_|\n"),
        "{}",
        graphs[0]
    );
    assert_eq!(digits(graphs[0].clone()), digits(graphs[1].clone()));
    for args in [
        &["LATENCY", "GRAPH", "fast-command"][..],
        &["LATENCY", "GRAPH"],
        &["LATENCY", "GRAPH", "a", "b"],
    ] {
        assert_eq!(go(&mut kv, args), go(&mut redis, args), "{args:?}");
    }
}

/// COMMAND DOCS's entries (RESP2: name/value pairs) by full name, each
/// without its summary (Kvasir's are Redis 7.2's wording) and with its
/// subcommands as entries of their own (a container's set of them differs:
/// CLIENT SETINFO, Redis Cluster's slot commands).
fn docs_by_name(entries: &[Value], out: &mut std::collections::BTreeMap<String, Value>) {
    for entry in entries.chunks(2) {
        let Value::Array(items) = &entry[1] else {
            panic!("not an array: {:?}", entry[1]);
        };
        let mut fields = Vec::new();
        for pair in items.chunks(2) {
            match strings(&pair[0]).concat().as_str() {
                "summary" => {}
                "subcommands" => {
                    let Value::Array(subs) = &pair[1] else {
                        panic!("subcommands: {:?}", pair[1]);
                    };
                    docs_by_name(subs, out);
                }
                _ => fields.extend(pair.iter().cloned()),
            }
        }
        out.insert(strings(&entry[0]).concat(), Value::Array(fields));
    }
}

/// COMMAND DOCS gives Redis 7.0's reference of every command both servers
/// have (version, group, complexity, deprecation, history, arguments with
/// their tokens, flags and key spec indexes), so redis-cli shows the same
/// syntax in its HELP and its hints as against redis-server.
#[test]
fn command_docs_give_redis_reference_and_redis_cli_its_syntax() {
    let pair = Pair::start(&[]);
    let docs = |port: u16| {
        let all = go(&mut connect(port), &["COMMAND", "DOCS"]).expect("COMMAND DOCS");
        let Value::Array(items) = all else {
            panic!("not an array: {all:?}");
        };
        let mut out = std::collections::BTreeMap::new();
        docs_by_name(&items, &mut out);
        out
    };
    let kvasir = docs(pair.kvasir_port);
    let redis = docs(pair.redis_port);
    let shared: Vec<&String> = kvasir.keys().filter(|n| redis.contains_key(*n)).collect();
    assert!(shared.len() > 300, "only {} in common", shared.len());
    let differ: Vec<String> = shared
        .iter()
        .filter(|n| kvasir[**n] != redis[**n])
        .map(|n| format!("{n}:\n kvasir {:?}\n redis  {:?}", kvasir[*n], redis[*n]))
        .collect();
    assert!(differ.is_empty(), "{} differ: {differ:#?}", differ.len());
    // redis-cli's HELP: the syntax line (the second) is the same.
    for command in ["set", "client kill", "georadius", "xreadgroup", "migrate"] {
        let help: Vec<String> = pair
            .ports()
            .iter()
            .map(|(_, port)| {
                let out = std::process::Command::new("redis-cli")
                    .args(["-p", &port.to_string(), "help"])
                    .args(command.split(' '))
                    .output()
                    .expect("redis-cli");
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.lines().nth(1).unwrap_or_default().to_string()
            })
            .collect();
        assert!(help[0].len() > command.len() + 12, "{command}: {help:?}");
        assert_eq!(help[0], help[1], "{command}");
    }
}

/// COMMAND INFO's entries (RESP2) by full name, subcommands as entries of
/// their own: arity, flags and ACL categories (as sorted sets), first key,
/// last key and step, key specs. Tips are compared elsewhere.
fn command_info_by_name(entries: &[Value], out: &mut std::collections::BTreeMap<String, String>) {
    for entry in entries {
        let Value::Array(fields) = entry else {
            continue;
        };
        let sorted = |v: &Value| {
            let mut names = strings(v);
            if let Value::Array(items) = v {
                names = items
                    .iter()
                    .map(|i| match i {
                        Value::SimpleString(s) => s.clone(),
                        other => strings(other).concat(),
                    })
                    .collect();
            }
            names.sort();
            names.join(" ")
        };
        let name = strings(&fields[0]).concat();
        out.insert(
            name,
            format!(
                "arity {:?} flags [{}] keys {:?} {:?} {:?} acl [{}] key specs {:?}",
                fields[1],
                sorted(&fields[2]),
                fields[3],
                fields[4],
                fields[5],
                sorted(&fields[6]),
                fields[8]
            ),
        );
        if let Some(Value::Array(subs)) = fields.get(9) {
            command_info_by_name(subs, out);
        }
    }
}

/// COMMAND INFO gives every command and subcommand both servers have
/// redis-server 7.0's arity, flags, key positions, ACL categories and key
/// specs (cluster clients route by them, ACL CAT lists by them), but for
/// the differences Kvasir keeps on purpose, listed here.
#[test]
fn command_info_flags_and_key_positions_are_redis() {
    let pair = Pair::start(&[]);
    let infos = |port: u16| {
        let all = go(&mut connect(port), &["COMMAND"]).expect("COMMAND");
        let Value::Array(items) = all else {
            panic!("not an array: {all:?}");
        };
        let mut out = std::collections::BTreeMap::new();
        command_info_by_name(&items, &mut out);
        out
    };
    let kvasir = infos(pair.kvasir_port);
    let redis = infos(pair.redis_port);
    // EVAL, EVALSHA, FCALL and SCRIPT LOAD/FLUSH write: a cluster node
    // replicates them through its log. SLOWLOG is not callable from
    // Kvasir's scripts. ZRANK/ZREVRANK take Redis 7.2's WITHSCORE. REPLCONF
    // is not a replication command here.
    let kept = [
        "eval",
        "evalsha",
        "fcall",
        "script|load",
        "script|flush",
        "slowlog|get",
        "slowlog|len",
        "slowlog|reset",
        "zrank",
        "zrevrank",
        "replconf",
    ];
    let shared: Vec<&String> = kvasir
        .keys()
        .filter(|n| redis.contains_key(*n) && !kept.contains(&n.as_str()))
        .collect();
    assert!(shared.len() > 300, "only {} in common", shared.len());
    let differ: Vec<String> = shared
        .iter()
        .filter(|n| kvasir[**n] != redis[**n])
        .map(|n| format!("{n}:\n kvasir {}\n redis  {}", kvasir[*n], redis[*n]))
        .collect();
    assert!(differ.is_empty(), "{} differ: {differ:#?}", differ.len());
}

/// The globals and library tables are read-only as in Redis 7.0, whatever
/// the way in: assignment, rawset, setmetatable, and the metatables
/// getmetatable shows. Before, rawset on a library table (`redis`,
/// `string`) succeeded and the change reached every later script of the
/// shard: `rawset(redis, 'call', f)` replaced redis.call for every client.
/// Errors, texts and positions compared with redis-server; redis.set_repl
/// checks its flags as Redis.
#[test]
fn script_sandbox_tables_are_read_only_as_redis() {
    let pair = Pair::start(&[]);
    let scripts = [
        "rawset(redis, 'call', function() return 'replaced' end)",
        "rawset(string, 'format', function() return 'replaced' end)",
        "rawset(_G, 'x', 1)",
        "local s = string; s.x = 1",
        "setmetatable(_G, {})",
        "setmetatable(cjson, {})",
        "local g = getmetatable(_G) g.__index = {}",
        "local g = getmetatable(_G) return type(g.__index)",
        "rawset(getmetatable(_G), '__index', nil)",
        "return type(getmetatable(''))",
        "getmetatable('').__index = {}",
        "return getmetatable('').__index.rep('a', 2)",
        "return getmetatable(redis)",
        "local ok, e = pcall(rawset, cjson, 'a', 1) return e",
        "local t = setmetatable({}, {__metatable = 1}) setmetatable(t, {})",
        "return getmetatable(setmetatable({}, {__metatable = 'x'}))",
        "local t = setmetatable({}, {__index = function() return 5 end}) return t.x",
        "return rawset({}, 'a', 1).a",
        "rawset({}, nil, 1)",
        "setmetatable(1, {})",
        "setmetatable({}, 1)",
        "rawset({})",
        "redis.set_repl(12345)",
        "redis.set_repl()",
        "redis.set_repl(redis.REPL_ALL) return 1",
        // Later scripts see the libraries unchanged.
        "return redis.call('PING')",
        "return string.format('%d', 5)",
        "return string.x",
    ];
    // Errors name the script by its SHA1, the same on both.
    same_on_both(&pair, |port| {
        let mut c = connect(port);
        scripts
            .iter()
            .map(|s| go(&mut c, &["EVAL", s, "0"]))
            .collect()
    });
}

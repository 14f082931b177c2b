//! Server and introspection commands end to end: INFO sections and field
//! names, CONFIG GET/SET, TIME, LASTSAVE, DBSIZE, SLOWLOG, COMMAND
//! COUNT/INFO/DOCS/GETKEYS/LIST, maxclients and the `--config` TOML file,
//! with the RESP2 and RESP3 reply shapes Redis 7.0 uses.

mod common;

use common::{err, now_secs, q, Kvasir};
use redis::{Connection, FromRedisValue, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// INFO text as `field -> value`.
fn info_fields(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim_end().to_string()))
        .collect()
}

fn section_headers(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# "))
        .map(|s| s.trim_end().to_string())
        .collect()
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::Okay => "OK".into(),
        other => panic!("not a string: {other:?}"),
    }
}

#[test]
fn info_default_sections_and_fields() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let info: String = q(&mut c, &["INFO"]);
    let headers = section_headers(&info);
    for s in [
        "Server",
        "Clients",
        "Memory",
        "Persistence",
        "Stats",
        "Replication",
        "CPU",
        "Keyspace",
    ] {
        assert!(
            headers.iter().any(|h| h == s),
            "INFO lacks # {s}: {headers:?}"
        );
    }
    assert!(
        !headers.iter().any(|h| h == "Commandstats"),
        "commandstats is not a default section"
    );
    assert!(info.contains("\r\n"), "INFO lines end with CRLF");
    let f = info_fields(&info);
    for name in [
        "redis_version",
        "redis_mode",
        "process_id",
        "tcp_port",
        "uptime_in_seconds",
        "connected_clients",
        "maxclients",
        "used_memory",
        "used_memory_human",
        "used_memory_rss",
        "used_memory_peak",
        "maxmemory",
        "total_connections_received",
        "total_commands_processed",
        "expired_keys",
        "keyspace_hits",
        "keyspace_misses",
        "role",
    ] {
        assert!(f.contains_key(name), "INFO lacks {name}");
    }
    assert!(
        f["redis_version"].starts_with("7."),
        "{}",
        f["redis_version"]
    );
    assert_eq!(f["tcp_port"], server.port.to_string());
    assert_eq!(f["role"], "master");
    assert!(f["used_memory"].parse::<u64>().unwrap() > 0);
    assert_eq!(f["process_id"], server.child.id().to_string());
    // Fields monitoring tools read (asynq's Inspector.RedisInfo among
    // them): the peak share, what the server took at start, the machine.
    let perc = f["used_memory_peak_perc"].trim_end_matches('%');
    assert!(
        perc.parse::<f64>().is_ok_and(|p| p > 0.0 && p <= 100.0),
        "{perc}"
    );
    assert!(f["used_memory_startup"].parse::<u64>().unwrap() > 0);
    assert!(f["total_system_memory"].parse::<u64>().unwrap() > 0);
}

#[test]
fn info_single_and_multiple_sections() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let info: String = q(&mut c, &["INFO", "server"]);
    assert_eq!(section_headers(&info), vec!["Server"]);
    let info: String = q(&mut c, &["INFO", "MEMORY"]);
    assert_eq!(section_headers(&info), vec!["Memory"]);
    assert!(info_fields(&info).contains_key("used_memory"));
    let info: String = q(&mut c, &["INFO", "clients", "stats"]);
    assert_eq!(section_headers(&info), vec!["Clients", "Stats"]);
    let all: String = q(&mut c, &["INFO", "all"]);
    assert!(section_headers(&all).iter().any(|h| h == "Commandstats"));
    let everything: String = q(&mut c, &["INFO", "everything"]);
    assert!(section_headers(&everything)
        .iter()
        .any(|h| h == "Commandstats"));
    let none: String = q(&mut c, &["INFO", "nosuchsection"]);
    assert!(section_headers(&none).is_empty(), "{none}");
}

#[test]
fn info_keyspace_counts_keys_and_expires() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let info: String = q(&mut c, &["INFO", "keyspace"]);
    assert_eq!(section_headers(&info), vec!["Keyspace"]);
    assert!(!info.contains("db0:"), "empty db listed: {info}");
    let _: () = q(&mut c, &["SET", "a", "1"]);
    let _: () = q(&mut c, &["SET", "b", "2", "EX", "100"]);
    let _: () = q(&mut c, &["SELECT", "3"]);
    let _: () = q(&mut c, &["SET", "c", "3"]);
    let info: String = q(&mut c, &["INFO", "keyspace"]);
    assert!(info.contains("db0:keys=2,expires=1,avg_ttl="), "{info}");
    assert!(info.contains("db3:keys=1,expires=0,avg_ttl="), "{info}");
    assert!(!info.contains("db1:"), "{info}");
}

/// Commands run by EXEC are calls of their own in commandstats, as in
/// Redis (a queue that WATCH aborted runs nothing and counts nothing).
#[test]
fn commands_inside_exec_are_counted() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["CONFIG", "RESETSTAT"]);
    let _: () = q(&mut c, &["MULTI"]);
    let _: Value = q(&mut c, &["SET", "k", "v"]);
    let _: Value = q(&mut c, &["INCR", "n"]);
    let _: Value = q(&mut c, &["INCR", "n"]);
    let _: Value = q(&mut c, &["EXEC"]);
    let _: () = q(&mut c, &["WATCH", "w"]);
    let mut other = server.conn();
    let _: () = q(&mut other, &["SET", "w", "changed"]);
    let _: () = q(&mut c, &["MULTI"]);
    let _: Value = q(&mut c, &["LPUSH", "l", "x"]);
    let aborted: Value = q(&mut c, &["EXEC"]);
    assert_eq!(aborted, Value::Nil);
    let info: String = q(&mut c, &["INFO", "commandstats"]);
    assert!(info.contains("cmdstat_set:calls=2,"), "{info}");
    assert!(info.contains("cmdstat_incr:calls=2,"), "{info}");
    assert!(!info.contains("cmdstat_lpush:"), "{info}");
}

#[test]
fn info_commandstats_and_errorstats_count_calls() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "k", "v"]);
    let _: String = q(&mut c, &["GET", "k"]);
    let _: Option<String> = q(&mut c, &["GET", "nope"]);
    let _ = err(&mut c, &["INCR", "k"]);
    let _ = err(&mut c, &["GET"]);
    let info: String = q(&mut c, &["INFO", "commandstats"]);
    assert_eq!(section_headers(&info), vec!["Commandstats"]);
    let get = info
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_get:"))
        .unwrap_or_else(|| panic!("no cmdstat_get: {info}"));
    assert!(get.starts_with("calls=2,usec="), "{get}");
    assert!(get.contains(",usec_per_call="), "{get}");
    let incr = info
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_incr:"))
        .expect("cmdstat_incr");
    assert!(incr.contains("failed_calls=1"), "{incr}");
    let _: Value = q(&mut c, &["CONFIG", "GET", "hz"]);
    let info: String = q(&mut c, &["INFO", "commandstats"]);
    assert!(
        info.contains("cmdstat_config|get:calls=1,"),
        "subcommands are listed as container|sub: {info}"
    );
    let stats: String = q(&mut c, &["INFO", "errorstats"]);
    let f = info_fields(&stats);
    let errs: u64 = f
        .get("errorstat_ERR")
        .and_then(|v| v.strip_prefix("count="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no errorstat_ERR: {stats}"));
    assert!(errs >= 2, "{stats}");
    let st: String = q(&mut c, &["INFO", "stats"]);
    let f = info_fields(&st);
    assert_eq!(f["keyspace_hits"], "1", "{st}");
    assert_eq!(f["keyspace_misses"], "1", "{st}");
}

#[test]
fn info_clients_counts_connections() {
    let server = Kvasir::start(&["--maxclients", "50"]);
    let mut c = server.conn();
    let extra: Vec<Connection> = (0..3).map(|_| server.conn()).collect();
    let f = info_fields(&q::<String>(&mut c, &["INFO", "clients"]));
    assert_eq!(f["connected_clients"], "4");
    assert_eq!(f["maxclients"], "50");
    drop(extra);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let f = info_fields(&q::<String>(&mut c, &["INFO", "clients"]));
        if f["connected_clients"] == "1" {
            break;
        }
        assert!(Instant::now() < deadline, "closed clients still counted");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn info_is_verbatim_text_in_resp3() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    let two = r.cmd_str(&["INFO", "server"]);
    assert!(two.starts_with('$'), "RESP2 INFO is a bulk string: {two:?}");
    assert!(r.cmd_str(&["HELLO", "3"]).starts_with('%'));
    let three = r.cmd_str(&["INFO", "server"]);
    assert!(three.starts_with('='), "RESP3 INFO is verbatim: {three:?}");
    assert!(three.contains("\r\ntxt:# Server\r\n"), "{three:?}");
    let mut c3 = server.client_resp3().get_connection().unwrap();
    let v: Value = q(&mut c3, &["INFO", "memory"]);
    assert!(
        matches!(&v, Value::VerbatimString { text, .. } if text.contains("used_memory:")),
        "{v:?}"
    );
}

#[test]
fn config_get_returns_pairs_in_resp2_and_a_map_in_resp3() {
    let server = Kvasir::start(&["--maxclients", "123"]);
    let mut c = server.conn();
    let v: Value = q(&mut c, &["CONFIG", "GET", "maxclients"]);
    assert_eq!(
        v,
        Value::Array(vec![
            Value::BulkString(b"maxclients".to_vec()),
            Value::BulkString(b"123".to_vec())
        ])
    );
    let mut c3 = server.client_resp3().get_connection().unwrap();
    let v: Value = q(&mut c3, &["CONFIG", "GET", "maxclients"]);
    assert_eq!(
        v,
        Value::Map(vec![(
            Value::BulkString(b"maxclients".to_vec()),
            Value::BulkString(b"123".to_vec())
        )])
    );
    let mut r = server.raw_conn();
    assert_eq!(
        r.cmd_str(&["CONFIG", "GET", "maxclients"]),
        "*2\r\n$10\r\nmaxclients\r\n$3\r\n123\r\n"
    );
    assert!(r.cmd_str(&["HELLO", "3"]).starts_with('%'));
    assert_eq!(
        r.cmd_str(&["CONFIG", "GET", "maxclients"]),
        "%1\r\n$10\r\nmaxclients\r\n$3\r\n123\r\n"
    );
    assert_eq!(r.cmd_str(&["CONFIG", "GET", "nosuchparam"]), "%0\r\n");
}

#[test]
fn config_get_glob_and_several_patterns() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "slowlog-*"]);
    assert_eq!(m.len(), 2, "{m:?}");
    assert_eq!(m["slowlog-log-slower-than"], "10000");
    assert_eq!(m["slowlog-max-len"], "128");
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "*max*"]);
    for k in [
        "maxclients",
        "maxmemory",
        "maxmemory-policy",
        "proto-max-bulk-len",
    ] {
        assert!(m.contains_key(k), "*max* lacks {k}: {m:?}");
    }
    assert!(m.keys().all(|k| k.contains("max")), "{m:?}");
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "databases", "hz", "timeout"]);
    assert_eq!(m.len(), 3, "{m:?}");
    assert_eq!(m["databases"], "16");
    assert_eq!(m["hz"], "10");
    assert_eq!(m["timeout"], "0");
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "nosuch*"]);
    assert!(m.is_empty());
    assert_eq!(
        err(&mut c, &["CONFIG", "GET"]),
        "ERR wrong number of arguments for 'config|get' command"
    );
}

#[test]
fn config_set_changes_mutable_parameters() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(
        q::<Value>(&mut c, &["CONFIG", "SET", "slowlog-max-len", "7"]),
        Value::Okay
    );
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "slowlog-max-len"]);
    assert_eq!(m["slowlog-max-len"], "7");
    // Several pairs at once (Redis 7.0).
    assert_eq!(
        q::<Value>(&mut c, &["CONFIG", "SET", "timeout", "300", "hz", "20"]),
        Value::Okay
    );
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "timeout", "hz"]);
    assert_eq!(m["timeout"], "300");
    assert_eq!(m["hz"], "20");
    // Names are case-insensitive.
    assert_eq!(
        q::<Value>(&mut c, &["CONFIG", "SET", "MAXCLIENTS", "77"]),
        Value::Okay
    );
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "maxclients"]);
    assert_eq!(m["maxclients"], "77");
}

#[test]
fn config_set_errors_for_immutable_unknown_and_invalid() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "databases", "4"]),
        "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config"
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "io-threads", "2"]),
        "ERR CONFIG SET failed (possibly related to argument 'io-threads') - can't set immutable config"
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "nosuch", "1"]),
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "timeout", "abc"]),
        "ERR CONFIG SET failed (possibly related to argument 'timeout') - argument couldn't be parsed into an integer"
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "maxclients"]),
        "ERR wrong number of arguments for 'config|set' command"
    );
    // An odd number of name/value arguments is a syntax error.
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "timeout", "5", "hz"]),
        "ERR syntax error"
    );
    // A refused multi-pair SET changes nothing.
    let e = err(
        &mut c,
        &["CONFIG", "SET", "slowlog-max-len", "9", "databases", "2"],
    );
    assert!(e.contains("can't set immutable config"), "{e}");
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "slowlog-max-len"]);
    assert_eq!(m["slowlog-max-len"], "128");
    assert_eq!(
        err(&mut c, &["CONFIG", "FOO"]),
        "ERR unknown subcommand 'FOO'. Try CONFIG HELP."
    );
}

#[test]
fn config_set_accepts_memory_units() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(
        q::<Value>(&mut c, &["CONFIG", "SET", "maxmemory", "1mb"]),
        Value::Okay
    );
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "maxmemory"]);
    assert_eq!(m["maxmemory"], "1048576");
    assert_eq!(
        q::<Value>(&mut c, &["CONFIG", "SET", "maxmemory", "2gb"]),
        Value::Okay
    );
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "maxmemory"]);
    assert_eq!(m["maxmemory"], "2147483648");
}

#[test]
fn time_returns_seconds_and_microseconds() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let before = now_secs();
    let t: Vec<String> = q(&mut c, &["TIME"]);
    let after = now_secs();
    assert_eq!(t.len(), 2);
    let secs: u64 = t[0].parse().unwrap();
    let micros: u64 = t[1].parse().unwrap();
    assert!(
        secs >= before && secs <= after,
        "{secs} not in {before}..{after}"
    );
    assert!(micros < 1_000_000);
    let v: Value = q(&mut c, &["TIME"]);
    assert!(
        matches!(&v, Value::Array(items) if items.iter().all(|i| matches!(i, Value::BulkString(_)))),
        "TIME is an array of two bulk strings: {v:?}"
    );
}

#[test]
fn lastsave_is_a_past_unix_time() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let t: u64 = q(&mut c, &["LASTSAVE"]);
    let now = now_secs();
    assert!(t <= now && t + 600 > now, "LASTSAVE {t}, now {now}");
}

#[test]
fn slowlog_records_get_len_and_reset() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    let _: () = q(&mut c, &["SLOWLOG", "RESET"]);
    let _: () = q(&mut c, &["CLIENT", "SETNAME", "slowpoke"]);
    let _: () = q(&mut c, &["SET", "foo", "bar"]);
    let len: i64 = q(&mut c, &["SLOWLOG", "LEN"]);
    assert_eq!(len, 3, "SLOWLOG RESET, CLIENT SETNAME and SET are logged");

    let entries: Vec<Value> = q(&mut c, &["SLOWLOG", "GET"]);
    assert!(entries.len() >= 3, "{entries:?}");
    let Value::Array(first) = &entries[0] else {
        panic!("entry is not an array: {:?}", entries[0])
    };
    assert_eq!(first.len(), 6, "{first:?}");
    // id, timestamp, duration, arguments, client address, client name.
    let id = i64::from_redis_value(first[0].clone()).unwrap();
    let ts = u64::from_redis_value(first[1].clone()).unwrap();
    let dur = i64::from_redis_value(first[2].clone()).unwrap();
    let args = Vec::<String>::from_redis_value(first[3].clone()).unwrap();
    assert!(dur >= 0);
    assert!(ts.abs_diff(now_secs()) < 60, "{ts}");
    // The newest entry is the SLOWLOG LEN before this GET.
    assert_eq!(args, vec!["SLOWLOG", "LEN"]);
    let Value::Array(second) = &entries[1] else {
        panic!()
    };
    let second_id = i64::from_redis_value(second[0].clone()).unwrap();
    assert_eq!(second_id, id - 1, "ids count down, newest first");
    let args = Vec::<String>::from_redis_value(second[3].clone()).unwrap();
    assert_eq!(args, vec!["SET", "foo", "bar"]);
    let addr = text(&second[4]);
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    assert_eq!(text(&second[5]), "slowpoke");

    let one: Vec<Value> = q(&mut c, &["SLOWLOG", "GET", "1"]);
    assert_eq!(one.len(), 1);
    let all: Vec<Value> = q(&mut c, &["SLOWLOG", "GET", "-1"]);
    assert!(all.len() >= 5, "{}", all.len());
    assert_eq!(
        err(&mut c, &["SLOWLOG", "GET", "-2"]),
        "ERR count should be greater than or equal to -1"
    );

    assert_eq!(q::<Value>(&mut c, &["SLOWLOG", "RESET"]), Value::Okay);
    // Only the RESET itself is in the log now.
    assert_eq!(q::<i64>(&mut c, &["SLOWLOG", "LEN"]), 1);
}

#[test]
fn slowlog_respects_threshold_and_max_len() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    // Only commands slower than the threshold are logged (1 s here, so
    // that a busy test machine cannot make a PING look slow).
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "slowlog-log-slower-than", "1000000"],
    );
    for _ in 0..20 {
        let _: String = q(&mut c, &["PING"]);
    }
    assert_eq!(q::<i64>(&mut c, &["SLOWLOG", "LEN"]), 0);
    let _: () = q(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "slowlog-max-len", "10"]);
    for _ in 0..50 {
        let _: String = q(&mut c, &["PING"]);
    }
    assert_eq!(q::<i64>(&mut c, &["SLOWLOG", "LEN"]), 10);
    // A negative threshold turns the log off.
    let _: () = q(&mut c, &["SLOWLOG", "RESET"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    let len_after_config: i64 = q(&mut c, &["SLOWLOG", "LEN"]);
    for _ in 0..20 {
        let _: String = q(&mut c, &["PING"]);
    }
    assert_eq!(q::<i64>(&mut c, &["SLOWLOG", "LEN"]), len_after_config);
}

#[test]
fn slowlog_truncates_long_argument_lists() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    let mut del = redis::cmd("DEL");
    for i in 0..40 {
        del.arg(format!("k{i}"));
    }
    let _: i64 = del.query(&mut c).unwrap();
    let long = "x".repeat(200);
    let _: () = q(&mut c, &["SET", "k", &long]);
    let entries: Vec<Vec<Value>> = q(&mut c, &["SLOWLOG", "GET", "2"]);
    let set_args = Vec::<String>::from_redis_value(entries[0][3].clone()).unwrap();
    assert_eq!(
        set_args[2],
        format!("{}... (72 more bytes)", "x".repeat(128))
    );
    let del_args = Vec::<String>::from_redis_value(entries[1][3].clone()).unwrap();
    assert_eq!(del_args.len(), 32);
    assert_eq!(del_args[31], "... (10 more arguments)");
    assert_eq!(del_args[30], "k29");
}

#[test]
fn command_count_list_and_info() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let count: i64 = q(&mut c, &["COMMAND", "COUNT"]);
    assert!(count > 50, "COMMAND COUNT {count}");
    // COMMAND LIST names subcommands too (`config|get`); COUNT does not.
    let names: Vec<String> = q(&mut c, &["COMMAND", "LIST"]);
    for n in [
        "get",
        "set",
        "del",
        "scan",
        "client",
        "config",
        "info",
        "ping",
        "config|get",
        "client|list",
        "object|encoding",
    ] {
        assert!(names.iter().any(|x| x == n), "COMMAND LIST lacks {n}");
    }
    let top = names.iter().filter(|n| !n.contains('|')).count();
    assert_eq!(top as i64, count);
    let all: Vec<Value> = q(&mut c, &["COMMAND"]);
    assert_eq!(all.len() as i64, count);

    let info: Vec<Value> = q(&mut c, &["COMMAND", "INFO", "get", "MSET", "nosuch"]);
    assert_eq!(info.len(), 3);
    let Value::Array(get) = &info[0] else {
        panic!("{:?}", info[0])
    };
    assert_eq!(text(&get[0]), "get");
    assert_eq!(get[1], Value::Int(2));
    let flags = Vec::<String>::from_redis_value(get[2].clone()).unwrap();
    assert!(
        flags.contains(&"readonly".into()) && flags.contains(&"fast".into()),
        "{flags:?}"
    );
    assert_eq!(
        (&get[3], &get[4], &get[5]),
        (&Value::Int(1), &Value::Int(1), &Value::Int(1))
    );
    let acl = Vec::<String>::from_redis_value(get[6].clone()).unwrap();
    assert!(
        acl.contains(&"@read".into()) && acl.contains(&"@string".into()),
        "{acl:?}"
    );
    let Value::Array(mset) = &info[1] else {
        panic!()
    };
    assert_eq!(text(&mset[0]), "mset");
    assert_eq!(mset[1], Value::Int(-3));
    assert_eq!(
        (&mset[3], &mset[4], &mset[5]),
        (&Value::Int(1), &Value::Int(-1), &Value::Int(2))
    );
    assert_eq!(info[2], Value::Nil);

    // Subcommands by their full name.
    let info: Vec<Value> = q(&mut c, &["COMMAND", "INFO", "config|get"]);
    let Value::Array(cg) = &info[0] else {
        panic!("{info:?}")
    };
    assert_eq!(text(&cg[0]), "config|get");
}

#[test]
fn command_info_unknown_name_is_a_null_bulk_in_resp2() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    // Redis's addReplyCommandInfo sends addReplyNull: $-1 in RESP2.
    assert_eq!(r.cmd_str(&["COMMAND", "INFO", "nosuch"]), "*1\r\n$-1\r\n");
    assert!(r.cmd_str(&["HELLO", "3"]).starts_with('%'));
    assert_eq!(r.cmd_str(&["COMMAND", "INFO", "nosuch"]), "*1\r\n_\r\n");
}

#[test]
fn command_docs_in_resp2_and_resp3() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let v: Value = q(&mut c, &["COMMAND", "DOCS", "get"]);
    let Value::Array(items) = &v else {
        panic!("RESP2 COMMAND DOCS is a flat array: {v:?}")
    };
    assert_eq!(items.len(), 2);
    assert_eq!(text(&items[0]), "get");
    let Value::Array(doc) = &items[1] else {
        panic!("{v:?}")
    };
    let doc: HashMap<String, Value> = doc.chunks(2).map(|p| (text(&p[0]), p[1].clone())).collect();
    assert!(text(&doc["summary"]).len() > 5);
    assert_eq!(text(&doc["since"]), "1.0.0");
    assert_eq!(text(&doc["group"]), "string");

    let mut c3 = server.client_resp3().get_connection().unwrap();
    let v: Value = q(&mut c3, &["COMMAND", "DOCS", "set", "nosuch"]);
    let Value::Map(pairs) = &v else {
        panic!("RESP3 COMMAND DOCS is a map: {v:?}")
    };
    assert_eq!(pairs.len(), 1, "unknown names are skipped");
    assert_eq!(text(&pairs[0].0), "set");
    assert!(matches!(pairs[0].1, Value::Map(_)), "{v:?}");
}

#[test]
fn command_getkeys_extracts_key_arguments() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let keys: Vec<String> = q(&mut c, &["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"]);
    assert_eq!(keys, vec!["a", "b"]);
    let keys: Vec<String> = q(&mut c, &["COMMAND", "GETKEYS", "get", "k"]);
    assert_eq!(keys, vec!["k"]);
    let keys: Vec<String> = q(&mut c, &["COMMAND", "GETKEYS", "DEL", "x", "y", "z"]);
    assert_eq!(keys, vec!["x", "y", "z"]);
    let keys: Vec<String> = q(&mut c, &["COMMAND", "GETKEYS", "RENAME", "src", "dst"]);
    assert_eq!(keys, vec!["src", "dst"]);
    let keys: Vec<String> = q(
        &mut c,
        &["COMMAND", "GETKEYS", "SET", "key", "v", "EX", "10"],
    );
    assert_eq!(keys, vec!["key"]);
    // GETKEYS needs a command and at least one argument.
    assert_eq!(
        err(&mut c, &["COMMAND", "GETKEYS", "GET"]),
        "ERR wrong number of arguments for 'command|getkeys' command"
    );
    assert_eq!(
        err(&mut c, &["COMMAND", "GETKEYS", "GET", "a", "b"]),
        "ERR Invalid number of arguments specified for command"
    );
    assert_eq!(
        err(&mut c, &["COMMAND", "GETKEYS", "nosuch", "a"]),
        "ERR Invalid command specified"
    );
    assert_eq!(
        err(&mut c, &["COMMAND", "GETKEYS", "PING", "x"]),
        "ERR The command has no key arguments"
    );
}

#[test]
fn maxclients_refuses_extra_connections() {
    let server = Kvasir::start(&["--maxclients", "2"]);
    let mut first = server.raw_conn();
    let mut second = server.raw_conn();
    assert_eq!(first.cmd_str(&["PING"]), "+PONG\r\n");
    assert_eq!(second.cmd_str(&["PING"]), "+PONG\r\n");
    let mut third = server.raw_conn();
    let (bytes, closed) = third.read_until_close(Duration::from_secs(5));
    assert_eq!(
        String::from_utf8_lossy(&bytes),
        "-ERR max number of clients reached\r\n"
    );
    assert!(closed, "refused connection left open");
    // The two admitted connections still work.
    assert_eq!(first.cmd_str(&["PING"]), "+PONG\r\n");
    let info = second.cmd_str(&["INFO", "stats"]);
    assert!(info.contains("rejected_connections:1\r\n"), "{info}");
    // Once one leaves, a newcomer gets in.
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut r = server.raw_conn();
        r.send(&common::encode_cmd(&[b"PING"]));
        if r.read_reply_within(Duration::from_secs(2)).as_deref() == Some(b"+PONG\r\n") {
            break;
        }
        assert!(Instant::now() < deadline, "slot was never freed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn config_file_sets_requirepass_and_databases() {
    let dir = std::env::temp_dir().join(format!(
        "kvasir-config-test-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("kvasir.toml");
    std::fs::write(
        &file,
        "requirepass = \"x\"\ndatabases = 4\nslowlog-max-len = 42\n",
    )
    .unwrap();
    let server = Kvasir::start(&["--config", file.to_str().unwrap()]);
    let mut r = server.raw_conn();
    assert_eq!(
        r.cmd_str(&["GET", "k"]),
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(r.cmd_str(&["AUTH", "x"]), "+OK\r\n");
    assert_eq!(r.cmd_str(&["SELECT", "3"]), "+OK\r\n");
    assert_eq!(
        r.cmd_str(&["SELECT", "4"]),
        "-ERR DB index is out of range\r\n"
    );
    assert_eq!(
        r.cmd_str(&["CONFIG", "GET", "databases"]),
        "*2\r\n$9\r\ndatabases\r\n$1\r\n4\r\n"
    );
    assert_eq!(
        r.cmd_str(&["CONFIG", "GET", "slowlog-max-len"]),
        "*2\r\n$15\r\nslowlog-max-len\r\n$2\r\n42\r\n"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn command_line_flags_override_the_config_file() {
    let dir = std::env::temp_dir().join(format!(
        "kvasir-config-override-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("kvasir.toml");
    std::fs::write(&file, "requirepass = \"x\"\ndatabases = 4\n").unwrap();
    let server = Kvasir::start(&[
        "--config",
        file.to_str().unwrap(),
        "--requirepass",
        "y",
        "--databases",
        "8",
    ]);
    let mut r = server.raw_conn();
    assert!(r.cmd_str(&["AUTH", "x"]).starts_with("-WRONGPASS"));
    assert_eq!(r.cmd_str(&["AUTH", "y"]), "+OK\r\n");
    assert_eq!(r.cmd_str(&["SELECT", "7"]), "+OK\r\n");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_config_file_is_refused_at_start() {
    let dir = std::env::temp_dir().join(format!(
        "kvasir-config-bad-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("kvasir.toml");
    std::fs::write(&file, "no-such-setting = 1\n").unwrap();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_kvasir"))
        .args(["server", "--port", "0", "--config"])
        .arg(&file)
        .arg("--dir")
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "unknown settings must be refused");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dbsize_and_memory_usage_from_a_second_client() {
    let server = Kvasir::start(&[]);
    let mut a = server.conn();
    let mut b = server.conn();
    let _: () = q(&mut a, &["MSET", "x", "1", "y", "2"]);
    assert_eq!(q::<i64>(&mut b, &["DBSIZE"]), 2);
    let usage: i64 = q(&mut b, &["MEMORY", "USAGE", "x"]);
    assert!(usage > 0);
    assert_eq!(
        err(&mut b, &["MEMORY", "USAGE", "x", "SAMPLES"]),
        "ERR syntax error"
    );
}

#[test]
fn config_set_maxclients_applies_at_run_time() {
    let server = Kvasir::start(&[]);
    let mut admin = server.raw_conn();
    let mut other = server.raw_conn();
    assert_eq!(other.cmd_str(&["PING"]), "+PONG\r\n");
    assert_eq!(
        admin.cmd_str(&["CONFIG", "SET", "maxclients", "2"]),
        "+OK\r\n"
    );
    let mut third = server.raw_conn();
    let (bytes, closed) = third.read_until_close(Duration::from_secs(5));
    assert_eq!(
        String::from_utf8_lossy(&bytes),
        "-ERR max number of clients reached\r\n"
    );
    assert!(closed);
    assert_eq!(admin.cmd_str(&["PING"]), "+PONG\r\n");
    assert_eq!(other.cmd_str(&["PING"]), "+PONG\r\n");
}

#[test]
fn config_resetstat_clears_command_and_error_stats() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: Option<String> = q(&mut c, &["GET", "k"]);
    let _ = err(&mut c, &["GET"]);
    assert_eq!(q::<Value>(&mut c, &["CONFIG", "RESETSTAT"]), Value::Okay);
    let info: String = q(&mut c, &["INFO", "commandstats"]);
    assert!(!info.contains("cmdstat_get:"), "{info}");
    let info: String = q(&mut c, &["INFO", "errorstats"]);
    assert!(!info.contains("errorstat_ERR"), "{info}");
    let f = info_fields(&q::<String>(&mut c, &["INFO", "stats"]));
    let processed: u64 = f["total_commands_processed"].parse().unwrap();
    assert!(processed <= 3, "total_commands_processed:{processed}");
    assert_eq!(f["keyspace_misses"], "0");
}

#[test]
fn info_used_memory_follows_the_data() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let used = |c: &mut Connection| -> u64 {
        info_fields(&q::<String>(c, &["INFO", "memory"]))["used_memory"]
            .parse()
            .unwrap()
    };
    let before = used(&mut c);
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(vec![7u8; 10 * 1024 * 1024])
        .query(&mut c)
        .unwrap();
    let with = used(&mut c);
    assert!(
        with >= before + 10 * 1024 * 1024,
        "used_memory {before} -> {with} after a 10 MB SET"
    );
    let _: i64 = q(&mut c, &["DEL", "big"]);
    let without = used(&mut c);
    assert!(
        without + 5 * 1024 * 1024 < with,
        "used_memory {with} -> {without} after DEL"
    );
    let f = info_fields(&q::<String>(&mut c, &["INFO", "memory"]));
    let peak: u64 = f["used_memory_peak"].parse().unwrap();
    assert!(peak >= with, "peak {peak} < {with}");
}

#[test]
fn config_set_encoding_thresholds_change_when_collections_convert() {
    let server = Kvasir::start(&[]);
    let mut c = server.raw_conn();
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "hash-max-listpack-entries"]),
        "*2\r\n$25\r\nhash-max-listpack-entries\r\n$3\r\n128\r\n"
    );
    c.cmd_str(&["HSET", "small", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(
        c.cmd_str(&["OBJECT", "ENCODING", "small"]),
        "$8\r\nlistpack\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "hash-max-listpack-entries", "2"]),
        "+OK\r\n"
    );
    c.cmd_str(&["HSET", "big", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(
        c.cmd_str(&["OBJECT", "ENCODING", "big"]),
        "$9\r\nhashtable\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "zset-max-ziplist-entries", "1"]),
        "+OK\r\n"
    );
    c.cmd_str(&["ZADD", "z", "1", "a", "2", "b"]);
    assert_eq!(
        c.cmd_str(&["OBJECT", "ENCODING", "z"]),
        "$8\r\nskiplist\r\n"
    );
}

#[test]
fn info_instantaneous_ops_per_sec_follows_the_load() {
    let server = Kvasir::start(&[]);
    let mut load = server.raw_conn();
    let mut batch = Vec::new();
    for _ in 0..2000 {
        batch.extend(common::encode_cmd(&[b"PING"]));
    }
    let mut info = server.conn();
    let rate = |c: &mut redis::Connection| -> u64 {
        let text: String = redis::cmd("INFO").arg("stats").query(c).expect("info");
        text.lines()
            .find_map(|l| l.strip_prefix("instantaneous_ops_per_sec:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("instantaneous_ops_per_sec field")
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut seen = 0;
    while std::time::Instant::now() < deadline && seen == 0 {
        load.send(&batch);
        for _ in 0..2000 {
            load.read_reply();
        }
        seen = rate(&mut info);
    }
    assert!(seen > 0, "instantaneous_ops_per_sec stayed 0 under load");
    // Idle again: the 1.6 s window drains (only INFO itself is counted).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut idle = seen;
    while std::time::Instant::now() < deadline && idle > 10 {
        std::thread::sleep(std::time::Duration::from_millis(200));
        idle = rate(&mut info);
    }
    assert!(idle <= 10, "rate did not fall when idle: {idle}");
    let text: String = redis::cmd("INFO")
        .arg("stats")
        .query(&mut info)
        .expect("info");
    assert!(text.contains("instantaneous_input_kbps:"), "{text}");
    assert!(text.contains("instantaneous_output_kbps:"), "{text}");
}

/// Every parameter redis-server 7.0 reports in CONFIG GET * is known here
/// too (accepted by CONFIG SET, reported by CONFIG GET, with the old names
/// Redis still answers to), so code that saves and restores a setting by
/// name (Redis's own test suite does) keeps working.
#[test]
fn config_knows_every_redis_7_0_parameter_and_the_old_names() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let (_redis, redis_port) = common::redis_server::start_redis();
    let mut r = redis::Client::open(format!("redis://127.0.0.1:{redis_port}"))
        .and_then(|cl| cl.get_connection())
        .expect("redis-server");
    let theirs: HashMap<String, String> = q(&mut r, &["CONFIG", "GET", "*"]);
    let ours: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "*"]);
    let missing: Vec<&String> = theirs.keys().filter(|k| !ours.contains_key(*k)).collect();
    assert!(missing.is_empty(), "unknown to Kvasir: {missing:?}");

    // An old name answers with its own name and the current value.
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "hash-max-ziplist-value"]);
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(m["hash-max-ziplist-value"], "64");
    assert_eq!(
        q::<Value>(&mut c, &["CONFIG", "SET", "hash-max-ziplist-value", "16"]),
        Value::Okay
    );
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "hash-max-listpack-value"]);
    assert_eq!(m["hash-max-listpack-value"], "16");
    q::<Value>(&mut c, &["HSET", "h", "f", "a-value-longer-than-16"]);
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "h"]),
        "hashtable",
        "the alias changed the real threshold"
    );

    // Stored-only parameters: accepted, reported, checked by kind.
    for (name, value) in [
        ("lua-time-limit", "100"),
        ("lfu-log-factor", "20"),
        ("activedefrag", "yes"),
        ("slave-read-only", "no"),
    ] {
        assert_eq!(
            q::<Value>(&mut c, &["CONFIG", "SET", name, value]),
            Value::Okay,
            "{name}"
        );
        let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", name]);
        assert_eq!(m.get(name).map(String::as_str), Some(value), "{name}");
    }
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "replica-read-only"]);
    assert_eq!(m["replica-read-only"], "no");
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "activedefrag", "maybe"]),
        "ERR CONFIG SET failed (possibly related to argument 'activedefrag') - argument must be 'yes' or 'no'"
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "daemonize", "yes"]),
        "ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config"
    );
}

/// WAIT answers as redis-server 7.0.15 without replicas does: 0, after the
/// timeout when a replica is asked for, at once inside MULTI, with its
/// errors.
#[test]
fn wait_without_replicas_like_redis() {
    let server = Kvasir::start(&[]);
    let (_redis, redis_port) = common::redis_server::start_redis();
    let script: &[&[&str]] = &[
        &["SET", "k", "v"],
        &["WAIT", "0", "0"],
        &["WAIT", "-1", "0"],
        &["WAIT", "1", "100"],
        &["WAIT", "a", "0"],
        &["WAIT", "1", "-1"],
        &["WAIT", "1", "abc"],
        &["WAIT", "1", "1.5"],
        &["MULTI"],
        &["WAIT", "1", "0"],
        &["EXEC"],
    ];
    let mut kv = server.raw_conn();
    let mut rs = common::RawConn::to_port(redis_port);
    for cmd in script {
        let started = Instant::now();
        assert_eq!(kv.cmd_str(cmd), rs.cmd_str(cmd), "{cmd:?}");
        if cmd[..] == ["WAIT", "1", "100"] {
            assert!(
                started.elapsed() >= Duration::from_millis(180),
                "both waited"
            );
        }
    }
}

/// WAITAOF (Redis 7.2) on a standalone server with `appendonly no` (as a
/// Redis with no append-only file and no replicas): [0, 0], after the
/// timeout when a replica is asked for, at once inside MULTI; numlocal is
/// refused; Redis 7.2's argument errors.
#[test]
fn waitaof_on_a_standalone_server_like_redis_without_aof() {
    let server = Kvasir::start(&[]);
    let mut c = server.raw_conn();
    let none = "*2\r\n:0\r\n:0\r\n";
    assert_eq!(c.cmd_str(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(c.cmd_str(&["WAITAOF", "0", "0", "0"]), none);
    let started = Instant::now();
    assert_eq!(c.cmd_str(&["WAITAOF", "0", "1", "150"]), none);
    assert!(started.elapsed() >= Duration::from_millis(140), "waited");
    for (cmd, error) in [
        (
            ["WAITAOF", "1", "0", "0"],
            "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.",
        ),
        (
            ["WAITAOF", "2", "0", "0"],
            "ERR value is out of range, value must between 0 and 1",
        ),
        (
            ["WAITAOF", "0", "-1", "0"],
            "ERR value is out of range, value must between 0 and 9223372036854775807",
        ),
        (
            ["WAITAOF", "x", "0", "0"],
            "ERR value is not an integer or out of range",
        ),
        (["WAITAOF", "0", "1", "-1"], "ERR timeout is negative"),
        (
            ["WAITAOF", "0", "1", "1.5"],
            "ERR timeout is not an integer or out of range",
        ),
    ] {
        assert_eq!(c.cmd_str(&cmd), format!("-{error}\r\n"), "{cmd:?}");
    }
    assert_eq!(c.cmd_str(&["MULTI"]), "+OK\r\n");
    assert_eq!(c.cmd_str(&["WAITAOF", "0", "1", "0"]), "+QUEUED\r\n");
    assert_eq!(c.cmd_str(&["EXEC"]), format!("*1\r\n{none}"));
    let script = c.cmd_str(&["EVAL", "return redis.call('waitaof', 0, 0, 0)", "0"]);
    assert!(
        script.contains("This Redis command is not allowed from script"),
        "{script}"
    );
}

/// `kvasir server` takes redis-server's way of configuring: a redis.conf
/// file first, then `--name value ...` for any parameter, the command line
/// over the file; a bad line stops the start with redis-server's message.
#[test]
fn redis_conf_file_and_redis_server_flags_configure_the_server() {
    let dir = std::env::temp_dir().join(format!("kvasir-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let conf = dir.join("redis.conf");
    std::fs::write(
        &conf,
        "# as written for redis-server\nmaxmemory 2mb\nsave \"\"\nappendonly no\nhz 25\n\
         enable-debug-command yes\nnotify-keyspace-events \"Ex\"\n",
    )
    .expect("write conf");
    let server = Kvasir::start_with_file(
        Some(&conf),
        &[
            "--hz",
            "30",
            "--save",
            "900",
            "1",
            "--databases",
            "4",
            "--protected-mode",
            "no",
        ],
    );
    let mut c = server.conn();
    let get = |c: &mut Connection, name: &str| -> String {
        let v: Vec<String> = q(c, &["CONFIG", "GET", name]);
        v.get(1).cloned().unwrap_or_default()
    };
    assert_eq!(get(&mut c, "maxmemory"), "2097152");
    assert_eq!(get(&mut c, "hz"), "30", "the command line is over the file");
    assert_eq!(get(&mut c, "databases"), "4");
    assert_eq!(get(&mut c, "enable-debug-command"), "yes");
    assert_eq!(get(&mut c, "protected-mode"), "no");
    assert_eq!(get(&mut c, "notify-keyspace-events"), "xE");
    let _: () = q(&mut c, &["SELECT", "3"]);
    assert!(err(&mut c, &["SELECT", "4"]).contains("out of range"));
    // CONFIG REWRITE writes the running values back into the file.
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "3mb"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "slowlog-max-len", "77"]);
    let _: () = q(&mut c, &["CONFIG", "REWRITE"]);
    let text = std::fs::read_to_string(&conf).expect("read conf");
    assert!(
        text.starts_with("# as written for redis-server\nmaxmemory 3145728\n"),
        "{text}"
    );
    assert!(text.contains("# Generated by CONFIG REWRITE\n"), "{text}");
    assert!(text.contains("\nslowlog-max-len 77\n"), "{text}");
    let plain = Kvasir::start(&[]);
    let mut p = plain.conn();
    assert_eq!(
        err(&mut p, &["CONFIG", "REWRITE"]),
        "ERR The server is running without a config file"
    );

    for (args, line) in [
        (vec!["--no-such-thing", "1"], ">>> 'no-such-thing \"1\"'"),
        (vec!["--maxmemory", "lots"], ">>> 'maxmemory \"lots\"'"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kvasir"))
            .arg("server")
            .args(["--port", "0"])
            .args(&args)
            .output()
            .expect("run kvasir");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let redis = std::process::Command::new("redis-server")
            .args(["--port", "0"])
            .args(&args)
            .output()
            .expect("run redis-server");
        assert_eq!(out.status.code(), redis.status.code(), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("*** FATAL CONFIG FILE ERROR"), "{stderr}");
        assert!(stderr.contains(line), "{stderr}");
    }
    std::fs::write(&conf, "port 0\nbogus directive here\n").expect("write conf");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kvasir"))
        .arg("server")
        .arg(&conf)
        .output()
        .expect("run kvasir");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("redis.conf:2"), "{stderr}");
    assert!(
        stderr.contains("Bad directive or wrong number of arguments"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn start_in(dir: &std::path::Path, extra: &[&str]) -> Kvasir {
    Kvasir::start_in(dir, extra)
}

fn info_field(c: &mut Connection, section: &str, name: &str) -> String {
    let text: String = q(c, &["INFO", section]);
    info_fields(&text).get(name).cloned().unwrap_or_default()
}

/// SAVE and BGSAVE write dump.rdb in `dir`; a server started there loads
/// it (values, types, expiries, databases); SHUTDOWN SAVE saves on the way
/// out; and a dump.rdb written by redis-server 7.0 loads too.
#[test]
fn save_bgsave_and_a_restart_from_dump_rdb() {
    let dir = std::env::temp_dir().join(format!("kvasir-rdb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let fill = |c: &mut Connection| {
        let _: () = q(c, &["SET", "s", "hello"]);
        let _: () = q(c, &["SET", "ttl", "v", "EX", "1000"]);
        let _: i64 = q(c, &["RPUSH", "l", "a", "b", "c"]);
        let _: i64 = q(c, &["SADD", "set", "x", "y", "7"]);
        let _: i64 = q(c, &["ZADD", "z", "1.5", "m", "2", "n"]);
        let _: i64 = q(c, &["HSET", "h", "f", "v"]);
        let _: String = q(c, &["XADD", "x", "1-1", "f", "v"]);
        let _: i64 = q(c, &["PFADD", "hll", "a", "b", "c"]);
        let _: () = q(c, &["SELECT", "3"]);
        let _: () = q(c, &["SET", "in3", "yes"]);
        let _: () = q(c, &["SELECT", "0"]);
        let _: String = q(
            c,
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=lib\nredis.register_function('seven', function() return 7 end)",
            ],
        );
    };
    let check = |c: &mut Connection, who: &str| {
        let n: i64 = q(c, &["DBSIZE"]);
        assert_eq!(n, 8, "{who}");
        let l: Vec<String> = q(c, &["LRANGE", "l", "0", "-1"]);
        assert_eq!(l, vec!["a", "b", "c"], "{who}");
        let z: Vec<String> = q(c, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]);
        assert_eq!(z, vec!["m", "1.5", "n", "2"], "{who}");
        let ttl: i64 = q(c, &["TTL", "ttl"]);
        assert!((990..=1000).contains(&ttl), "{who}: ttl {ttl}");
        let hll: i64 = q(c, &["PFCOUNT", "hll"]);
        assert_eq!(hll, 3, "{who}");
        let seven: i64 = q(c, &["FCALL", "seven", "0"]);
        assert_eq!(seven, 7, "{who}: the function library");
        let _: () = q(c, &["SELECT", "3"]);
        let v: String = q(c, &["GET", "in3"]);
        assert_eq!(v, "yes", "{who}");
        let _: () = q(c, &["SELECT", "0"]);
    };
    let rdb = dir.join("dump.rdb");
    {
        let server = start_in(&dir, &[]);
        let mut c = server.conn();
        fill(&mut c);
        // Kvasir counts write commands (Redis counts changed elements).
        assert_eq!(
            info_field(&mut c, "persistence", "rdb_changes_since_last_save"),
            "10"
        );
        let before: i64 = q(&mut c, &["LASTSAVE"]);
        std::thread::sleep(Duration::from_millis(1100));
        let _: () = q(&mut c, &["SAVE"]);
        assert!(rdb.exists(), "SAVE wrote no dump.rdb");
        assert!(std::fs::read(&rdb).expect("read").starts_with(b"REDIS0010"));
        let after: i64 = q(&mut c, &["LASTSAVE"]);
        assert!(after > before, "LASTSAVE {before} -> {after}");
        assert_eq!(
            info_field(&mut c, "persistence", "rdb_changes_since_last_save"),
            "0"
        );
        std::fs::remove_file(&rdb).expect("rm");
        let started: String = q(&mut c, &["BGSAVE"]);
        assert_eq!(started, "Background saving started");
        assert!(common::eventually(Duration::from_secs(10), || {
            info_field(&mut c, "persistence", "rdb_bgsave_in_progress") == "0"
        }));
        assert!(rdb.exists(), "BGSAVE wrote no dump.rdb");
        assert_eq!(
            info_field(&mut c, "persistence", "rdb_last_bgsave_status"),
            "ok"
        );
        assert!(err(&mut c, &["BGSAVE", "NOW"]).contains("syntax error"));
        // BGREWRITEAOF with the append-only file off writes a base alone
        // into appendonlydir, as redis-server 7 does (the second one
        // replaces the first); inside MULTI it is scheduled.
        for seq in 1..=2 {
            let started: String = q(&mut c, &["BGREWRITEAOF"]);
            assert_eq!(started, "Background append only file rewriting started");
            assert!(common::eventually(Duration::from_secs(10), || {
                info_field(&mut c, "persistence", "aof_rewrite_in_progress") == "0"
            }));
            let folder = dir.join("appendonlydir");
            let manifest =
                std::fs::read_to_string(folder.join("appendonly.aof.manifest")).expect("manifest");
            assert_eq!(
                manifest,
                format!("file appendonly.aof.{seq}.base.rdb seq {seq} type b\n")
            );
            let names: Vec<String> = std::fs::read_dir(&folder)
                .expect("folder")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            assert_eq!(names.len(), 2, "{names:?}");
            assert_eq!(
                info_field(&mut c, "persistence", "aof_rewrites"),
                seq.to_string()
            );
        }
        let _: () = q(&mut c, &["MULTI"]);
        let _: () = q(&mut c, &["BGREWRITEAOF"]);
        let replies: Vec<String> = q(&mut c, &["EXEC"]);
        assert!(
            replies[0].starts_with("Background append only file rewriting"),
            "{replies:?}"
        );
    }
    {
        let server = start_in(&dir, &[]);
        let mut c = server.conn();
        check(&mut c, "restarted from BGSAVE's file");
        // SHUTDOWN SAVE writes what changed since.
        let _: () = q(&mut c, &["SET", "late", "write"]);
        let _ = redis::cmd("SHUTDOWN").arg("SAVE").query::<()>(&mut c);
        let mut server = server;
        assert!(server.wait_exit(Duration::from_secs(10)).is_some());
    }
    {
        let server = start_in(&dir, &[]);
        let mut c = server.conn();
        let late: String = q(&mut c, &["GET", "late"]);
        assert_eq!(late, "write");
    }

    // A dump.rdb written by redis-server loads as well.
    let redis_dir = dir.join("from-redis");
    std::fs::create_dir_all(&redis_dir).expect("dir");
    {
        let (_redis, port) = common::redis_server::start_redis_in(Some(&redis_dir), &[]);
        let mut r = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|c| c.get_connection())
            .expect("connect to redis-server");
        fill(&mut r);
        let _: () = q(&mut r, &["SAVE"]);
    }
    let server = start_in(&redis_dir, &[]);
    let mut c = server.conn();
    check(&mut c, "loaded from redis-server's dump.rdb");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `save` points: a BGSAVE runs once enough writes and seconds passed, and
/// SIGTERM saves before the server exits.
#[test]
fn save_points_snapshot_in_the_background_and_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("kvasir-savepoints-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let rdb = dir.join("dump.rdb");
    let mut server = Kvasir::start_in(&dir, &["--save", "1 2"]);
    let mut c = server.conn();
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "save"]);
    assert_eq!(got, vec!["save", "1 2"]);
    let _: () = q(&mut c, &["SET", "a", "1"]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !rdb.exists(),
        "saved after one write of the two the point asks"
    );
    let _: () = q(&mut c, &["SET", "b", "2"]);
    assert!(
        common::eventually(Duration::from_secs(5), || rdb.exists()),
        "no snapshot after the save point was reached"
    );
    let _: () = q(&mut c, &["SET", "c", "3"]);
    // SIGTERM: saves, then exits.
    signal(&server, libc::SIGTERM);
    assert!(server.wait_exit(Duration::from_secs(10)).is_some());
    drop(server);
    let server = Kvasir::start_in(&dir, &[]);
    let mut c = server.conn();
    let v: Option<String> = q(&mut c, &["GET", "c"]);
    assert_eq!(
        v.as_deref(),
        Some("3"),
        "the write before SIGTERM was not saved"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sends `sig` to the server's process.
fn signal(server: &Kvasir, sig: libc::c_int) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(server.child.id() as libc::pid_t, sig);
    }
}

/// Waits (bounded) for a log line containing `text`.
fn wait_log(server: &Kvasir, text: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(line) = server.log.recv_timeout(Duration::from_millis(100)) {
            if line.contains(text) {
                return true;
            }
        }
    }
    false
}

/// As redis-server: a server given no `save` has the points
/// `3600 1 300 100 60 10000` and saves when stopped; a final save that
/// fails keeps it running (SHUTDOWN answers an error, a signal is logged),
/// unless FORCE; under DEBUG PAUSE-CRON a signal waits and SHUTDOWN ABORT
/// cancels it.
#[test]
fn a_failed_final_save_keeps_the_server_running() {
    let dir = common::temp_dir();
    let mut server = Kvasir::start_in(&dir, &["--enable-debug-command", "yes"]);
    let mut c = server.conn();
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "save"]);
    assert_eq!(got, vec!["save", "3600 1 300 100 60 10000"]);
    let _: () = q(&mut c, &["SET", "kept", "1"]);
    signal(&server, libc::SIGTERM);
    assert!(server.wait_exit(Duration::from_secs(10)).is_some());
    drop(server);
    let mut server = Kvasir::start_in(&dir, &["--enable-debug-command", "yes"]);
    let mut c = server.conn();
    let v: Option<String> = q(&mut c, &["GET", "kept"]);
    assert_eq!(
        v.as_deref(),
        Some("1"),
        "the default save points saved nothing at SIGTERM"
    );

    // A folder named dump.rdb: every save fails.
    let rdb = dir.join("dump.rdb");
    std::fs::remove_file(&rdb).expect("remove dump.rdb");
    std::fs::create_dir(&rdb).expect("dump.rdb folder");
    let _: () = q(&mut c, &["SET", "more", "2"]);
    assert_eq!(
        err(&mut c, &["SHUTDOWN"]),
        "ERR Errors trying to SHUTDOWN. Check logs."
    );
    assert!(wait_log(
        &server,
        "Error trying to save the DB, can't exit."
    ));
    assert_eq!(
        err(&mut c, &["SHUTDOWN", "SAVE", "NOSAVE"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["SHUTDOWN", "ABORT", "NOW"]),
        "ERR syntax error"
    );
    signal(&server, libc::SIGTERM);
    assert!(wait_log(&server, "Received SIGTERM scheduling shutdown"));
    assert!(wait_log(
        &server,
        "Error trying to save the DB, can't exit."
    ));
    let pong: String = q(&mut c, &["PING"]);
    assert_eq!(pong, "PONG");
    assert!(server.is_running());

    // A signal waits while the periodic work is paused; ABORT cancels it.
    let _: () = q(&mut c, &["DEBUG", "PAUSE-CRON", "1"]);
    signal(&server, libc::SIGTERM);
    assert!(wait_log(&server, "Received SIGTERM scheduling shutdown"));
    let _: () = q(&mut c, &["SHUTDOWN", "ABORT"]);
    assert!(wait_log(&server, "Shutdown manually aborted."));
    let _: () = q(&mut c, &["DEBUG", "PAUSE-CRON", "0"]);
    assert_eq!(
        err(&mut c, &["SHUTDOWN", "ABORT"]),
        "ERR No shutdown in progress."
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(server.is_running(), "an aborted SIGTERM stopped the server");

    // The signals' settings take SHUTDOWN's words; `force` exits anyway.
    assert!(
        err(&mut c, &["CONFIG", "SET", "shutdown-on-sigterm", "later"])
            .contains("must be one of the following: default, save, nosave, now, force")
    );
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "shutdown-on-sigterm", "save force"],
    );
    signal(&server, libc::SIGTERM);
    assert!(wait_log(
        &server,
        "Error trying to save the DB. Exit anyway."
    ));
    assert!(server.wait_exit(Duration::from_secs(10)).is_some());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);

    // SHUTDOWN FORCE likewise, and NOSAVE exits without trying.
    for (words, logged) in [
        (&["SHUTDOWN", "FORCE"][..], "Exit anyway."),
        (&["SHUTDOWN", "NOSAVE"][..], "ready to exit"),
    ] {
        let mut server = Kvasir::start(&["--save", "1 1"]);
        let mut c = server.conn();
        let dir: String = q::<Vec<String>>(&mut c, &["CONFIG", "GET", "dir"]).remove(1);
        std::fs::create_dir(std::path::Path::new(&dir).join("dump.rdb")).expect("folder");
        let _: () = q(&mut c, &["SET", "k", "v"]);
        let _ = redis::cmd(words[0]).arg(&words[1..]).query::<()>(&mut c);
        assert!(wait_log(&server, logged), "{words:?}");
        assert!(
            server.wait_exit(Duration::from_secs(10)).is_some(),
            "{words:?}"
        );
    }
}

/// Whether a fresh connection to `host:port` answers PING.
fn answers(host: &str, port: u16) -> bool {
    redis::Client::open(format!("redis://{host}:{port}/"))
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
        .is_ok()
}

/// CONFIG SET port / bind listen again at once, as in Redis 7 (they were
/// refused as immutable): a port or address that cannot be bound refuses
/// the CONFIG SET and the server keeps listening where it was; connections
/// already open stay. The bind list takes Redis's syntax (the stock
/// redis.conf's `bind 127.0.0.1 -::1`, where `-` marks an address that may
/// be missing).
#[test]
fn config_set_port_and_bind_listen_again() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let busy_port = busy.local_addr().expect("addr").port().to_string();
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "port", &busy_port]),
        "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs."
    );
    assert!(answers("127.0.0.1", server.port));

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let _: () = q(&mut c, &["CONFIG", "SET", "port", &port.to_string()]);
    assert!(answers("127.0.0.1", port));
    assert!(
        common::eventually(Duration::from_secs(5), || !answers(
            "127.0.0.1",
            server.port
        )),
        "the old port still answers"
    );
    let info: String = q(&mut c, &["INFO", "server"]);
    assert_eq!(info_fields(&info)["tcp_port"], port.to_string());

    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "bind", "999.999.999.999"]),
        "ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses."
    );
    assert!(answers("127.0.0.1", port));
    let _: () = q(&mut c, &["CONFIG", "SET", "bind", "127.0.0.2"]);
    assert!(common::eventually(Duration::from_secs(5), || {
        answers("127.0.0.2", port) && !answers("127.0.0.1", port)
    }));
    let _: () = q(&mut c, &["CONFIG", "SET", "bind", ""]);
    assert!(common::eventually(Duration::from_secs(5), || {
        !answers("127.0.0.2", port)
    }));
    let pong: String = q(&mut c, &["PING"]);
    assert_eq!(pong, "PONG", "an open connection was closed");
    let _: () = q(&mut c, &["CONFIG", "SET", "bind", "127.0.0.1"]);
    assert!(common::eventually(Duration::from_secs(5), || answers(
        "127.0.0.1",
        port
    )));
    drop(busy);
}

/// As Redis: with `save` points, FLUSHALL saves the emptied dataset at
/// once (alone or in EXEC), so a crash after it does not bring the keys
/// back from an older dump.rdb; without them the old file stays.
#[test]
fn flushall_with_save_points_saves_the_empty_dataset() {
    for (save, in_exec, keys_after_crash) in
        [("3600 1", false, 0), ("3600 1", true, 0), ("", false, 1)]
    {
        let dir = common::temp_dir();
        let server = Kvasir::start_in(&dir, &["--save", save]);
        let mut c = server.conn();
        let _: () = q(&mut c, &["SET", "old", "1"]);
        let _: () = q(&mut c, &["SAVE"]);
        let _: () = q(&mut c, &["SET", "new", "2"]);
        if in_exec {
            let _: Vec<Value> = redis::pipe()
                .atomic()
                .cmd("SET")
                .arg("k")
                .arg("v")
                .cmd("FLUSHALL")
                .query(&mut c)
                .expect("EXEC");
        } else {
            let _: () = q(&mut c, &["FLUSHALL"]);
        }
        let info: String = q(&mut c, &["INFO", "persistence"]);
        let changes: u64 = info_fields(&info)["rdb_changes_since_last_save"]
            .parse()
            .expect("number");
        assert_eq!(changes == 0, keys_after_crash == 0, "save {save:?}: {info}");
        drop(server); // kill -9
        let server = Kvasir::start_in(&dir, &["--save", save]);
        let mut c = server.conn();
        let n: u64 = q(&mut c, &["DBSIZE"]);
        assert_eq!(n, keys_after_crash, "save {save:?}, in EXEC {in_exec}");
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// What a connection from `source` to 127.0.0.1:`port` is answered to
/// PING (the first line), or "" if it was closed without a word.
fn ping_from(source: &str, port: u16) -> String {
    use std::io::{Read, Write};
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    let from: std::net::SocketAddr = format!("{source}:0").parse().expect("address");
    socket.bind(&from.into()).expect("bind the source address");
    let to: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
    socket
        .connect_timeout(&to.into(), Duration::from_secs(2))
        .expect("connect");
    let mut stream: std::net::TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let _ = stream.write_all(b"PING\r\n");
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buf) {
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
        if answer.ends_with(b"\r\n") {
            break;
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

/// Redis's protected mode: with `protected-mode yes` (the default) and no
/// password for the default user, a client from anywhere but 127.0.0.1
/// or ::1 is turned away with redis-server 7.0.15's very words (here from
/// 127.0.0.2, a loopback address Redis does not count as local); a
/// password or `protected-mode no` lets it in.
#[test]
fn protected_mode_turns_away_other_addresses_as_redis_does() {
    let (_redis, redis_port) = common::redis_server::start_redis_in(None, &[]);
    let redis_answer = ping_from("127.0.0.2", redis_port);
    assert!(redis_answer.starts_with("-DENIED"), "{redis_answer}");

    let server = Kvasir::start(&[]);
    assert_eq!(ping_from("127.0.0.2", server.port), redis_answer);
    assert_eq!(ping_from("127.0.0.1", server.port), "+PONG\r\n");
    let mut c = server.conn();
    let info: String = q(&mut c, &["INFO", "stats"]);
    assert_eq!(info_fields(&info)["rejected_connections"], "1");
    let _: () = q(&mut c, &["CONFIG", "SET", "requirepass", "secret"]);
    assert!(ping_from("127.0.0.2", server.port).starts_with("-NOAUTH"));
    let _: () = q(&mut c, &["AUTH", "secret"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "requirepass", ""]);
    assert!(ping_from("127.0.0.2", server.port).starts_with("-DENIED"));
    let _: () = q(&mut c, &["CONFIG", "SET", "protected-mode", "no"]);
    assert_eq!(ping_from("127.0.0.2", server.port), "+PONG\r\n");
}

/// Redis 7's protected configs: `dir` and `dbfilename` (where the server
/// writes files) are refused unless `enable-protected-configs` is `yes`,
/// or `local` for a client at 127.0.0.1.
#[test]
fn protected_configs_need_enable_protected_configs() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    for name in ["dir", "dbfilename"] {
        assert_eq!(
            err(&mut c, &["CONFIG", "SET", name, "elsewhere"]),
            format!("ERR CONFIG SET failed (possibly related to argument '{name}') - can't set protected config")
        );
    }
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "dbfilename"]);
    assert_eq!(got, vec!["dbfilename", "dump.rdb"]);
    drop(c);
    drop(server);
    assert!(err(
        &mut Kvasir::start(&[]).conn(),
        &["CONFIG", "SET", "enable-debug-command", "local"]
    )
    .contains("can't set immutable config"));
    for setting in ["yes", "local", "LOCAL"] {
        let server = Kvasir::start(&["--enable-protected-configs", setting]);
        let mut c = server.conn();
        let _: () = q(&mut c, &["CONFIG", "SET", "dbfilename", "other.rdb"]);
        let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "dbfilename"]);
        assert_eq!(got, vec!["dbfilename", "other.rdb"], "{setting}");
    }
}

/// The temporary files (`temp-*`) in `dir`.
fn temp_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().to_str().map(str::to_string))
                .filter(|n| n.starts_with("temp-"))
                .collect()
        })
        .unwrap_or_default()
}

/// BGSAVE forks, as redis-server does: the child writes the data as it was
/// at the fork while the server goes on serving (writes made meanwhile are
/// not in the file), INFO shows the child's progress and the fork, a
/// second BGSAVE is refused, and `rdb-key-save-delay` (a hidden config:
/// CONFIG GET shows it only by its exact name) slows the child down.
#[test]
fn bgsave_writes_the_moment_of_the_fork_in_a_child_process() {
    let dir = common::temp_dir();
    let args = ["--save", "", "--enable-debug-command", "yes"];
    let server = Kvasir::start_in(&dir, &args);
    let mut c = server.conn();
    let mut fill = redis::pipe();
    for i in 0..400 {
        fill.cmd("SET")
            .arg(format!("k{i}"))
            .arg(format!("v{i}"))
            .ignore();
    }
    let _: () = fill.query(&mut c).expect("fill");
    let digest: String = q(&mut c, &["DEBUG", "DIGEST"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "2500"]);
    let all: Vec<String> = q(&mut c, &["CONFIG", "GET", "*"]);
    assert!(
        !all.iter().any(|n| n == "rdb-key-save-delay"),
        "hidden from patterns"
    );
    let one: Vec<String> = q(&mut c, &["CONFIG", "GET", "rdb-key-save-delay"]);
    assert_eq!(one, vec!["rdb-key-save-delay", "2500"]);

    let started: String = q(&mut c, &["BGSAVE"]);
    assert_eq!(started, "Background saving started");
    assert_eq!(
        err(&mut c, &["BGSAVE"]),
        "ERR Background save already in progress"
    );
    let pid = server.child.id();
    assert_eq!(common::children_of(pid).len(), 1, "one child process");
    let info: String = q(&mut c, &["INFO", "persistence"]);
    let fields = info_fields(&info);
    assert_eq!(fields["rdb_bgsave_in_progress"], "1", "{info}");
    assert_eq!(fields["current_save_keys_total"], "400", "{info}");
    assert_ne!(fields["rdb_current_bgsave_time_sec"], "-1", "{info}");
    assert_eq!(info_field(&mut c, "stats", "total_forks"), "1");
    // Served while the child writes; not in its file.
    let _: () = q(&mut c, &["SET", "after", "fork"]);
    let _: i64 = q(&mut c, &["DEL", "k0"]);
    let progress: f64 = info_field(&mut c, "persistence", "current_fork_perc")
        .parse()
        .expect("percent");
    assert!((0.0..100.0).contains(&progress), "{progress}");
    assert!(common::eventually(Duration::from_secs(20), || {
        info_field(&mut c, "persistence", "rdb_bgsave_in_progress") == "0"
    }));
    let info: String = q(&mut c, &["INFO", "persistence"]);
    let fields = info_fields(&info);
    assert_eq!(fields["rdb_last_bgsave_status"], "ok", "{info}");
    assert_eq!(fields["rdb_saves"], "1", "{info}");
    assert_eq!(fields["rdb_changes_since_last_save"], "2", "{info}");
    // The pages the server changed while the child ran were copied for
    // it: the child measured them (its private dirty memory), as Redis's.
    let cow: u64 = fields["rdb_last_cow_size"].parse().expect("a number");
    assert!(cow > 0, "{info}");
    assert_eq!(fields["current_cow_size"], "0", "no child now: {info}");
    assert!(common::eventually(Duration::from_secs(5), || {
        common::children_of(pid).is_empty()
    }));
    assert!(temp_files(&dir).is_empty(), "{:?}", temp_files(&dir));
    drop(server); // kill -9: the file is what BGSAVE wrote

    let server = Kvasir::start_in(&dir, &args);
    let mut c = server.conn();
    let again: String = q(&mut c, &["DEBUG", "DIGEST"]);
    assert_eq!(again, digest, "the file holds the data at the fork");
    let after: Option<String> = q(&mut c, &["GET", "after"]);
    assert_eq!(after, None);
    let info: String = q(&mut c, &["INFO", "persistence"]);
    assert_eq!(
        info_fields(&info)["rdb_last_load_keys_loaded"],
        "400",
        "{info}"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A background save that failed stops writes, as redis-server does with
/// `stop-writes-on-bgsave-error yes` and `save` points: writes, PING and
/// the writes of scripts get MISCONF, reads are served; a save that
/// succeeds (or the setting off) lifts it.
#[test]
fn a_failed_bgsave_refuses_writes_with_misconf() {
    let server = Kvasir::start(&["--save", "3600 1", "--enable-debug-command", "yes"]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "100"]);
    let _: () = q(&mut c, &["SET", "x", "x"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "10000000"]);
    // Transactions queued before the save fails.
    let mut writer = server.conn();
    let _: () = q(&mut writer, &["MULTI"]);
    let _: String = q(&mut writer, &["SET", "x", "queued"]);
    let mut reader = server.conn();
    let _: () = q(&mut reader, &["MULTI"]);
    let _: String = q(&mut reader, &["GET", "x"]);
    let _: String = q(&mut reader, &["PING"]);
    let _: String = q(&mut c, &["BGSAVE"]);
    let pid = server.child.id();
    let children = common::children_of(pid);
    assert_eq!(children.len(), 1, "the save's child");
    // SAFETY: kill(2) on the pid of the server's child, read from /proc.
    assert_eq!(unsafe { libc::kill(children[0] as i32, libc::SIGKILL) }, 0);
    assert!(common::eventually(Duration::from_secs(10), || {
        info_field(&mut c, "persistence", "rdb_bgsave_in_progress") == "0"
    }));
    assert_eq!(
        info_field(&mut c, "persistence", "rdb_last_bgsave_status"),
        "err"
    );
    let misconf = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";
    assert_eq!(err(&mut c, &["SET", "x", "y"]), misconf);
    assert_eq!(err(&mut c, &["PING"]), misconf);
    assert_eq!(q::<String>(&mut c, &["GET", "x"]), "x");
    // As redis-server: a transaction that writes is refused at EXEC, one
    // that only reads runs (its PING too, run inside EXEC); a write or a
    // PING queued now is refused and makes EXEC abort.
    assert_eq!(
        err(&mut writer, &["EXEC"]),
        format!("EXECABORT Transaction discarded because of: {misconf}")
    );
    let (value, pong): (Option<String>, String) = q(&mut reader, &["EXEC"]);
    assert_eq!((value.as_deref(), pong.as_str()), (Some("x"), "PONG"));
    for refused in [&["SET", "x", "y"][..], &["PING"]] {
        let _: () = q(&mut c, &["MULTI"]);
        assert_eq!(err(&mut c, refused), misconf);
        let _: String = q(&mut c, &["GET", "x"]);
        assert_eq!(
            err(&mut c, &["EXEC"]),
            "EXECABORT Transaction discarded because of previous errors."
        );
    }
    assert_eq!(q::<String>(&mut c, &["GET", "x"]), "x");
    let set_in_script = ["EVAL", "return redis.call('set','x',1)", "1", "x"];
    assert!(err(&mut c, &set_in_script).contains("MISCONF"));
    let get_in_script = ["EVAL", "return redis.call('get','x')", "1", "x"];
    assert_eq!(q::<String>(&mut c, &get_in_script), "x");
    let shebang = ["EVAL", "#!lua\nreturn redis.call('set','x',1)", "1", "x"];
    assert_eq!(err(&mut c, &shebang), misconf);
    let no_writes = [
        "EVAL",
        "#!lua flags=no-writes\nreturn redis.call('get','x')",
        "1",
        "x",
    ];
    assert_eq!(q::<String>(&mut c, &no_writes), "x");
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "stop-writes-on-bgsave-error", "no"],
    );
    let _: () = q(&mut c, &["SET", "x", "y"]);
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "stop-writes-on-bgsave-error", "yes"],
    );
    assert_eq!(err(&mut c, &["SET", "x", "z"]), misconf);
    let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    let _: () = q(&mut c, &["SAVE"]);
    let _: () = q(&mut c, &["SET", "x", "z"]);
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

/// Keys already expired are written to the file as Redis writes them; the
/// load leaves them out and counts them.
#[test]
fn expired_keys_are_saved_and_counted_at_load() {
    let server = Kvasir::start(&["--save", "", "--enable-debug-command", "yes"]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "10"]);
    let _: () = q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    for db in 0..4 {
        let _: () = q(&mut c, &["SELECT", &db.to_string()]);
        let _: () = q(&mut c, &["SET", &format!("short{db}"), "v", "PX", "10"]);
    }
    std::thread::sleep(Duration::from_millis(50));
    let _: () = q(&mut c, &["DEBUG", "RELOAD"]);
    let info: String = q(&mut c, &["INFO", "persistence"]);
    let fields = info_fields(&info);
    assert_eq!(fields["rdb_last_load_keys_expired"], "4", "{info}");
    assert_eq!(fields["rdb_last_load_keys_loaded"], "10", "{info}");
    let _: () = q(&mut c, &["SELECT", "0"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 10);
}

/// redis.conf's `rename-command`, as production configs use it: a command
/// answers to its new name only, an empty name disables it, scripts call
/// by the same names, CONFIG REWRITE keeps the lines and the server starts
/// again from the rewritten file; Redis's errors for a bad line.
#[test]
fn rename_command_in_redis_conf() {
    let dir = common::temp_dir();
    let conf = dir.join("redis.conf");
    std::fs::write(
        &conf,
        "rename-command flushdb badger\nrename-command FLUSHALL \"\"\n",
    )
    .expect("write redis.conf");
    for round in 0..2 {
        let server = Kvasir::start_with_file(Some(&conf), &[]);
        let mut c = server.conn();
        let _: () = q(&mut c, &["SET", "k", "v"]);
        assert_eq!(
            err(&mut c, &["FLUSHDB"]),
            "ERR unknown command 'FLUSHDB', with args beginning with: ",
            "round {round}"
        );
        assert!(err(&mut c, &["FLUSHALL", "ASYNC"]).starts_with("ERR unknown command 'FLUSHALL'"));
        assert!(err(&mut c, &["EVAL", "return redis.call('flushall')", "0"])
            .starts_with("ERR Unknown Redis command called from script"));
        assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1);
        let _: () = q(&mut c, &["BADGER"]);
        assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
        let _: () = q(&mut c, &["SET", "k", "v"]);
        let _: () = q(&mut c, &["EVAL", "return redis.call('badger')", "0"]);
        assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
        let _: () = q(&mut c, &["CONFIG", "REWRITE"]);
    }
    let text = std::fs::read_to_string(&conf).expect("rewritten");
    assert!(text.contains("rename-command flushdb badger"), "{text}");
    for (line, why) in [
        (
            "rename-command nosuch x",
            "No such command in rename-command",
        ),
        (
            "rename-command get set",
            "Target command name already exists",
        ),
    ] {
        std::fs::write(&conf, format!("{line}\n")).expect("write");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kvasir"))
            .arg("server")
            .arg(&conf)
            .output()
            .expect("run kvasir");
        assert!(!out.status.success());
        let text = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(text.trim_end().ends_with(why), "{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// One child at a time, as in Redis: FLUSHALL stops a BGSAVE (its image
/// holds the flushed keys), a BGREWRITEAOF during a BGSAVE is scheduled
/// and runs after it, BGSAVE during a rewrite is refused or scheduled
/// (SCHEDULE), and SHUTDOWN stops the child and leaves no temporary file.
#[test]
fn flushall_shutdown_and_scheduling_with_a_child_running() {
    let dir = common::temp_dir();
    let mut server = Kvasir::start_in(&dir, &["--save", ""]);
    let mut c = server.conn();
    let pid = server.child.id();
    let mut fill = redis::pipe();
    for i in 0..300 {
        fill.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
    }
    let _: () = fill.query(&mut c).expect("fill");
    // 100 ms a key: a child that would run for half a minute.
    let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "100000"]);
    let in_progress = |c: &mut Connection, what: &str| info_field(c, "persistence", what);

    let _: String = q(&mut c, &["BGSAVE"]);
    assert!(
        common::eventually(Duration::from_secs(5), || !temp_files(&dir).is_empty()),
        "the child writes temp-<pid>.rdb as it goes"
    );
    let child = common::children_of(pid);
    assert_eq!(temp_files(&dir), vec![format!("temp-{}.rdb", child[0])]);
    let _: () = q(&mut c, &["FLUSHALL"]);
    assert!(common::eventually(Duration::from_secs(5), || {
        in_progress(&mut c, "rdb_bgsave_in_progress") == "0" && common::children_of(pid).is_empty()
    }));
    assert!(temp_files(&dir).is_empty(), "{:?}", temp_files(&dir));
    assert!(!dir.join("dump.rdb").exists());
    assert_eq!(in_progress(&mut c, "rdb_last_bgsave_status"), "ok");

    // A rewrite asked for during a BGSAVE waits for it.
    let _: () = q(&mut c, &["SET", "k", "v"]);
    let _: String = q(&mut c, &["BGSAVE"]);
    let scheduled: String = q(&mut c, &["BGREWRITEAOF"]);
    assert_eq!(scheduled, "Background append only file rewriting scheduled");
    assert_eq!(in_progress(&mut c, "aof_rewrite_scheduled"), "1");
    let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    for child in common::children_of(pid) {
        // SAFETY: kill(2) of the server's child, as Redis's test does.
        unsafe {
            libc::kill(child as libc::pid_t, libc::SIGKILL);
        }
    }
    assert!(common::eventually(Duration::from_secs(10), || {
        in_progress(&mut c, "aof_rewrite_scheduled") == "0"
            && in_progress(&mut c, "aof_rewrite_in_progress") == "0"
            && in_progress(&mut c, "aof_rewrites") == "1"
    }));
    assert_eq!(in_progress(&mut c, "rdb_last_bgsave_status"), "err");

    // BGSAVE during a rewrite: refused, or scheduled with SCHEDULE.
    let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "1000000"]);
    let _: String = q(&mut c, &["BGREWRITEAOF"]);
    assert_eq!(
        err(&mut c, &["BGSAVE"]),
        "ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible."
    );
    assert_eq!(
        err(&mut c, &["BGREWRITEAOF"]),
        "ERR Background append only file rewriting already in progress"
    );
    let scheduled: String = q(&mut c, &["BGSAVE", "SCHEDULE"]);
    assert_eq!(scheduled, "Background saving scheduled");
    assert_eq!(common::children_of(pid).len(), 1);
    let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut c);
    assert!(server.wait_exit(Duration::from_secs(10)).is_some());
    assert!(common::eventually(Duration::from_secs(5), || {
        common::children_of(pid).is_empty()
    }));
    let folder = dir.join("appendonlydir");
    assert!(temp_files(&folder).is_empty(), "{:?}", temp_files(&folder));
    assert!(temp_files(&dir).is_empty(), "{:?}", temp_files(&dir));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Kills a daemonized server (not our child) when the test ends.
struct KillPid(i32);

impl Drop for KillPid {
    fn drop(&mut self) {
        // SAFETY: kill(2) of the server this test started.
        unsafe {
            libc::kill(self.0, libc::SIGKILL);
        }
    }
}

/// redis-server's process conventions, which service files, init scripts
/// and test harnesses rely on: `--version` prints its `v=` line,
/// `daemonize yes` returns at once with the server running on in a session
/// of its own, `pidfile` holds its pid while it runs and is removed when it
/// exits, `logfile` receives redis-server's log lines
/// (`pid:M 28 Nov 2026 12:21:49.402 * text`), and a logfile that cannot be
/// opened stops the start.
#[test]
fn daemonize_pidfile_logfile_and_version_as_redis_server() {
    use std::process::Command;
    let bin = env!("CARGO_BIN_EXE_kvasir");
    let version = Command::new(bin)
        .args(["server", "--version"])
        .output()
        .expect("run --version");
    assert!(version.status.success());
    let line = String::from_utf8_lossy(&version.stdout).to_string();
    assert!(line.starts_with("Redis server v=7.0.15 sha="), "{line}");

    let dir = common::temp_dir();
    let started = Instant::now();
    let status = Command::new(bin)
        .args(["server", "--port", "0", "--bind", "127.0.0.1", "--dir"])
        .arg(&dir)
        .args(["--save", "", "--daemonize", "yes"])
        .args(["--pidfile", "kvasir.pid", "--logfile", "kvasir.log"])
        .status()
        .expect("run the daemon");
    assert!(status.success(), "{status}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let pidfile = dir.join("kvasir.pid");
    let mut pid = None;
    assert!(common::eventually(Duration::from_secs(10), || {
        pid = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok());
        pid.is_some()
    }));
    let pid = pid.unwrap_or_default();
    let _guard = KillPid(pid);
    // A session of its own (setsid): field 6 of /proc/PID/stat.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("daemon runs");
    let session = stat
        .rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().nth(3))
        .and_then(|s| s.parse::<i32>().ok());
    assert_eq!(session, Some(pid), "{stat}");

    let logfile = dir.join("kvasir.log");
    let mut port = None;
    assert!(common::eventually(Duration::from_secs(10), || {
        let log = std::fs::read_to_string(&logfile).unwrap_or_default();
        port = log
            .split("port=")
            .nth(1)
            .and_then(|rest| rest.split('.').next())
            .and_then(|p| p.parse::<u16>().ok());
        port.is_some() && log.contains("Ready to accept connections")
    }));
    let port = port.unwrap_or_default();
    let log = std::fs::read_to_string(&logfile).unwrap_or_default();
    for line in log.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words[0], format!("{pid}:M"), "{line}");
        assert!(
            words[1].len() == 2 && words[1].parse::<u8>().is_ok(),
            "{line}"
        );
        assert_eq!(words[2].len(), 3, "{line}");
        assert!(words[3].parse::<u32>().is_ok_and(|y| y >= 2024), "{line}");
        assert!(words[4].len() == 12 && &words[4][8..9] == ".", "{line}");
        assert!(["*", "#", "-", "."].contains(&words[5]), "{line}");
    }

    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let mut c = client.get_connection().expect("connect to the daemon");
    let daemonize: Vec<String> = q(&mut c, &["CONFIG", "GET", "daemonize"]);
    assert_eq!(daemonize, vec!["daemonize", "yes"]);
    let _ = redis::cmd("SHUTDOWN").query::<()>(&mut c);
    assert!(common::eventually(Duration::from_secs(10), || {
        !pidfile.exists() && !std::path::Path::new(&format!("/proc/{pid}")).exists()
    }));
    let log = std::fs::read_to_string(&logfile).unwrap_or_default();
    assert!(log.contains("Removing the pid file."), "{log}");

    // A log file that cannot be opened: the start stops with Redis's text.
    let refused = Command::new(bin)
        .args(["server", "--port", "0", "--bind", "127.0.0.1", "--dir"])
        .arg(&dir)
        .args(["--logfile", "no/such/folder/kvasir.log"])
        .output()
        .expect("run");
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("Can't open the log file: No such file or directory"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `supervised systemd`, as Debian's redis-server.service (a `Type=notify`
/// unit) starts redis-server: READY=1 reaches the socket in NOTIFY_SOCKET
/// once the server accepts connections and STOPPING=1 when it shuts down,
/// and INFO says `process_supervised:systemd`. Redis's enum settings take
/// their words (a unit's `--supervised systemd` was refused as "not yes or
/// no") and refuse others with redis-server's text.
#[test]
fn supervised_systemd_hears_ready_and_stopping() {
    use std::io::BufRead;
    use std::os::unix::net::UnixDatagram;
    use std::process::{Command, Stdio};
    let dir = common::temp_dir();
    let socket_path = dir.join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).expect("bind the notify socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let child = Command::new(env!("CARGO_BIN_EXE_kvasir"))
        .args(["server", "--port", "0", "--bind", "127.0.0.1", "--dir"])
        .arg(&dir)
        .args(["--save", "", "--supervised", "systemd"])
        .env("NOTIFY_SOCKET", &socket_path)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut guard = common::ChildGuard(Some(child));
    let stdout = guard.child().stdout.take().expect("stdout");
    let mut port = None;
    let mut lines = std::io::BufReader::new(stdout).lines();
    for line in lines.by_ref().map_while(Result::ok) {
        if let Some(rest) = line.split("port=").nth(1) {
            port = rest.trim_end_matches('.').parse::<u16>().ok();
            break;
        }
    }
    // The rest of the log is read (and dropped) until the server exits.
    std::thread::spawn(move || lines.for_each(drop));
    let port = port.expect("the server reported its port");
    let mut buf = [0u8; 512];
    let n = socket.recv(&mut buf).expect("a notification");
    let ready = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready}");
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let mut c = client.get_connection().expect("connect");
    let info: String = q(&mut c, &["INFO", "server"]);
    assert_eq!(
        info_fields(&info)
            .get("process_supervised")
            .map(String::as_str),
        Some("systemd")
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "sanitize-dump-payload", "sometimes"]),
        "ERR CONFIG SET failed (possibly related to argument 'sanitize-dump-payload') - argument(s) must be one of the following: no, yes, clients"
    );
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "sanitize-dump-payload", "CLIENTS"],
    );
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "sanitize-dump-payload"]);
    assert_eq!(got[1], "clients");
    let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut c);
    let n = socket.recv(&mut buf).expect("the stop notification");
    let stopping = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(stopping.lines().any(|l| l == "STOPPING=1"), "{stopping}");
    assert!(guard.child().wait().expect("exit").success());

    let refused = Command::new(env!("CARGO_BIN_EXE_kvasir"))
        .args(["server", "--port", "0", "--bind", "127.0.0.1", "--dir"])
        .arg(&dir)
        .args(["--supervised", "sometimes"])
        .output()
        .expect("run");
    assert_eq!(refused.status.code(), Some(1), "as redis-server");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("argument(s) must be one of the following: upstart, systemd, auto, no"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `unixsocket` / `unixsocketperm`, as redis-server: clients connect
/// through the socket file (pytest-redis' fixtures, GitLab and many local
/// set-ups do), which has the given permissions and replaces a file left
/// at the path; its clients show as `path:0` with flag U in CLIENT LIST,
/// as `unix:path` in MONITOR, count as local for `enable-debug-command
/// local`, and the file is removed at shutdown.
#[test]
fn unix_socket_clients_as_redis_server_serves_them() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    use std::os::unix::net::UnixStream;
    let dir = common::temp_dir();
    let path = dir.join("kvasir.sock");
    std::fs::write(&path, "left from an earlier run").expect("stale file");
    let path_text = path.to_str().expect("utf8").to_string();
    let server = Kvasir::start_in(
        &dir,
        &[
            "--unixsocket",
            &path_text,
            "--unixsocketperm",
            "700",
            "--enable-debug-command",
            "local",
        ],
    );
    let meta = std::fs::metadata(&path).expect("socket file");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);

    let client = redis::Client::open(format!("redis+unix://{path_text}")).expect("unix url");
    let mut c = client.get_connection().expect("connect through the socket");
    let _: () = q(&mut c, &["SET", "k", "v"]);
    let v: String = q(&mut c, &["GET", "k"]);
    assert_eq!(v, "v");
    let info: String = q(&mut c, &["CLIENT", "INFO"]);
    assert!(
        info.contains(&format!("addr={path_text}:0 laddr={path_text}:0 ")),
        "{info}"
    );
    let flags = info
        .split(' ')
        .find_map(|f| f.strip_prefix("flags="))
        .unwrap_or_default();
    assert_eq!(flags, "U", "{info}");
    // Local: DEBUG is allowed from the socket.
    let digest: String = q(&mut c, &["DEBUG", "DIGEST"]);
    assert_eq!(digest.len(), 40);

    let mut monitor = UnixStream::connect(&path).expect("monitor connection");
    monitor
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    monitor.write_all(b"MONITOR\r\n").expect("MONITOR");
    let mut lines = BufReader::new(monitor.try_clone().expect("clone"));
    let mut line = String::new();
    lines.read_line(&mut line).expect("+OK");
    assert_eq!(line, "+OK\r\n");
    let _: () = q(&mut c, &["SET", "watched", "1"]);
    line.clear();
    lines.read_line(&mut line).expect("the monitored command");
    assert!(
        line.contains(&format!("[0 unix:{path_text}] \"SET\" \"watched\" \"1\"")),
        "{line}"
    );

    let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut c);
    assert!(common::eventually(Duration::from_secs(10), || !path.exists()));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A wrong command line is refused as redis-server refuses it, compared
/// with redis-server's own texts: the option shown with its values quoted,
/// "wrong number of arguments" for a known parameter given none or too
/// many (Kvasir's `--port`, `--bind`, `--dir`... are read the same way),
/// its check's text for a bad value; neither server starts.
#[test]
fn a_wrong_command_line_gets_redis_servers_texts() {
    use std::process::Command;
    let cases: &[&[&str]] = &[
        &["--port"],
        &["--port", "6379", "6380"],
        &["--port", "--loglevel", "verbose"],
        &["--port", "--bla", "--loglevel", "verbose"],
        &["--port", "70000"],
        &["--maxclients"],
        &["--shutdown-on-sigint"],
        &["--shutdown-on-sigint", "now force", "--shutdown-on-sigterm"],
        &["--supervised", "sometimes"],
        &["--nosuch", "1"],
        &["--hz", "abc"],
        &["--replicaof", "127.0.0.1", "abc"],
        &["--replicaof", "--127.0.0.1", "abc"],
        &["--replicaof", "--127.0.0.1", "--abc"],
        &["--replicaof", "127.0.0.1", "70000"],
    ];
    // The line naming the option and the reason (redis-server also says
    // at which line of its generated config it was).
    let last_two = |out: &std::process::Output| -> Vec<String> {
        let text = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        let lines: Vec<String> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect();
        lines[lines.len().saturating_sub(2)..].to_vec()
    };
    for args in cases {
        let redis = Command::new("redis-server")
            .args(*args)
            .output()
            .expect("run redis-server");
        let kvasir = Command::new(env!("CARGO_BIN_EXE_kvasir"))
            .arg("server")
            .args(*args)
            .output()
            .expect("run kvasir");
        assert_eq!(last_two(&kvasir), last_two(&redis), "{args:?}");
        assert!(
            !redis.status.success() && !kvasir.status.success(),
            "{args:?}"
        );
    }
}

/// `oom-score-adj` sets the process's Linux OOM score adjustment as
/// redis-server does: relative to the score it had (the first of
/// `oom-score-adj-values`), absolute, restored by `no`; a forked BGSAVE
/// child takes the third value; out-of-range values are refused with
/// Redis's text. Both servers run the same steps.
#[test]
fn oom_score_adj_sets_the_process_score_as_redis() {
    let server = Kvasir::start(&[]);
    // Its BGSAVE writes a dump.rdb: in a folder of its own.
    let redis_dir = common::temp_dir();
    let (mut redis, redis_port) = common::redis_server::start_redis_in(Some(&redis_dir), &[]);
    let redis_pid = redis.child().id();
    let score = |pid: u32| -> i64 {
        std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj"))
            .expect("oom_score_adj")
            .trim()
            .parse()
            .expect("a number")
    };
    let set = |pid: u32, value: i64| {
        std::fs::write(format!("/proc/{pid}/oom_score_adj"), format!("{value}\n"))
            .expect("write oom_score_adj")
    };
    let steps = |pid: u32, c: &mut Connection| -> Vec<String> {
        let mut out = Vec::new();
        set(pid, 22);
        let _: () = q(c, &["CONFIG", "SET", "oom-score-adj-values", "9 19 29"]);
        out.push(format!("values, still off: {}", score(pid)));
        let _: () = q(c, &["CONFIG", "SET", "oom-score-adj", "yes"]);
        out.push(format!("yes: {}", score(pid)));
        let _: () = q(c, &["CONFIG", "SET", "oom-score-adj-values", "15 19 30"]);
        out.push(format!("new values: {}", score(pid)));
        let _: () = q(c, &["CONFIG", "SET", "oom-score-adj", "absolute"]);
        out.push(format!("absolute: {}", score(pid)));
        let _: () = q(c, &["CONFIG", "SET", "oom-score-adj", "relative"]);
        out.push(format!("relative: {}", score(pid)));
        // A forked child takes the third value.
        for i in 0..5 {
            let _: () = q(c, &["SET", &format!("k{i}"), "v"]);
        }
        let _: () = q(c, &["CONFIG", "SET", "rdb-key-save-delay", "200000"]);
        let _: String = q(c, &["BGSAVE"]);
        let mut child_score = None;
        let deadline = Instant::now() + Duration::from_secs(5);
        while child_score != Some(52) && Instant::now() < deadline {
            child_score = common::children_of(pid).first().map(|&child| score(child));
            std::thread::sleep(Duration::from_millis(10));
        }
        out.push(format!("bgsave child: {child_score:?}"));
        let _: () = q(c, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
        assert!(common::eventually(Duration::from_secs(10), || {
            common::children_of(pid).is_empty()
        }));
        let _: () = q(
            c,
            &["CONFIG", "SET", "oom-score-adj-values", "1000 1000 1000"],
        );
        out.push(format!("clamped: {}", score(pid)));
        let _: () = q(c, &["CONFIG", "SET", "oom-score-adj", "no"]);
        out.push(format!("no: {}", score(pid)));
        for values in ["-2001 0 0", "0 0 2001", "1 2", "1 2 x"] {
            out.push(err(c, &["CONFIG", "SET", "oom-score-adj-values", values]));
        }
        let got: HashMap<String, String> = q(c, &["CONFIG", "GET", "oom-score-adj*"]);
        let mut got: Vec<_> = got.into_iter().collect();
        got.sort();
        out.push(format!("{got:?}"));
        out
    };
    let mut c = server.conn();
    let kvasir = steps(server.child.id(), &mut c);
    let mut r = redis::Client::open(format!("redis://127.0.0.1:{redis_port}/"))
        .expect("client")
        .get_connection()
        .expect("connect");
    let expected = steps(redis_pid, &mut r);
    assert_eq!(kvasir, expected, "Kvasir (left) and redis-server (right)");
    assert_eq!(kvasir[1], "yes: 31");
    assert_eq!(kvasir[5], "bgsave child: Some(52)");
    drop(redis);
    let _ = std::fs::remove_dir_all(&redis_dir);
}

/// Once SHUTDOWN closes its connection the server accepts no other, as
/// an exited redis-server: a client that reconnects at once is refused
/// (Kvasir used to accept it for a moment while it exited).
#[test]
fn after_shutdown_closes_its_connection_new_connections_are_refused() {
    for _ in 0..5 {
        let mut server = Kvasir::start(&[]);
        let port = server.port;
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        use std::io::{Read, Write};
        c.write_all(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n")
            .expect("send");
        let mut buf = [0u8; 64];
        assert_eq!(
            c.read(&mut buf).expect("EOF"),
            0,
            "SHUTDOWN answers nothing"
        );
        let again = std::net::TcpStream::connect(("127.0.0.1", port));
        assert!(again.is_err(), "a connection was accepted after SHUTDOWN");
        assert!(server.child.wait().expect("exit").success());
    }
}

/// A port another process holds stops the start as redis-server stops:
/// exit status 1 and "Failed listening on port N (TCP), aborting." in the
/// log, the line supervisors and Redis's own test harness look for to try
/// another port (without it the harness waited for the server forever).
#[test]
fn a_busy_port_fails_the_start_with_redis_words() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("hold a port");
    let port = held.local_addr().expect("its address").port().to_string();
    let args = ["--port", port.as_str(), "--bind", "127.0.0.1", "--save", ""];
    let ours = std::process::Command::new(env!("CARGO_BIN_EXE_kvasir"))
        .arg("server")
        .args(args)
        .output()
        .expect("run kvasir");
    let redis = std::process::Command::new("redis-server")
        .args(args)
        .output()
        .expect("run redis-server");
    let line = format!("Failed listening on port {port} (TCP), aborting.");
    for (who, out) in [("redis-server", &redis), ("kvasir", &ours)] {
        let log = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{who}: {log}");
        assert!(log.contains(&line), "{who}: {log}");
        assert!(
            log.contains("Could not create server TCP listening socket 127.0.0.1:"),
            "{who}: {log}"
        );
    }
    drop(held);
}

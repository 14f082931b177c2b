//! The list family end to end, as Redis 7.0 answers it: LPUSH RPUSH LPUSHX
//! RPUSHX LPOP RPOP (with counts) LLEN LRANGE LINDEX LSET LREM LTRIM LINSERT
//! LPOS LMOVE RPOPLPUSH LMPOP and the blocking forms when they can serve at
//! once (waiting itself is the server's and tested with it), their errors,
//! WRONGTYPE, deletion of emptied lists, the two encodings, and the reply
//! shapes that differ between RESP2 and RESP3 on raw sockets.

mod common;

use common::{err, q, Kvasir};
use redis::{Connection, Value};

fn strings(conn: &mut Connection, args: &[&str]) -> Vec<String> {
    q(conn, args)
}

fn all(conn: &mut Connection, key: &str) -> Vec<String> {
    strings(conn, &["LRANGE", key, "0", "-1"])
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";

#[test]
fn pushes_pops_and_lengths() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<i64>(&mut c, &["LPUSH", "l", "a", "b", "c"]), 3);
    assert_eq!(q::<i64>(&mut c, &["RPUSH", "l", "1", "2"]), 5);
    assert_eq!(all(&mut c, "l"), ["c", "b", "a", "1", "2"]);
    assert_eq!(q::<i64>(&mut c, &["LPUSHX", "l", "x"]), 6);
    assert_eq!(q::<i64>(&mut c, &["RPUSHX", "l", "y", "z"]), 8);
    assert_eq!(q::<i64>(&mut c, &["LPUSHX", "none", "x"]), 0);
    assert_eq!(q::<i64>(&mut c, &["RPUSHX", "none", "x"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "none"]), 0);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "l"]), 8);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "none"]), 0);
    assert_eq!(q::<String>(&mut c, &["TYPE", "l"]), "list");
    assert_eq!(q::<String>(&mut c, &["LPOP", "l"]), "x");
    assert_eq!(q::<String>(&mut c, &["RPOP", "l"]), "z");
    assert_eq!(strings(&mut c, &["LPOP", "l", "2"]), ["c", "b"]);
    assert_eq!(strings(&mut c, &["RPOP", "l", "2"]), ["y", "2"]);
    assert_eq!(strings(&mut c, &["LPOP", "l", "0"]), Vec::<String>::new());
    assert_eq!(strings(&mut c, &["RPOP", "l", "100"]), ["1", "a"]);
    assert_eq!(
        q::<i64>(&mut c, &["EXISTS", "l"]),
        0,
        "emptied list deleted"
    );
    assert_eq!(q::<Value>(&mut c, &["LPOP", "l"]), Value::Nil);
    assert_eq!(q::<Option<Vec<String>>>(&mut c, &["LPOP", "l", "1"]), None);
    // Binary-safe elements, integers kept byte for byte.
    let bin: &[u8] = b"\x00\xff\r\n";
    let _: i64 = redis::cmd("RPUSH")
        .arg("b")
        .arg(bin)
        .arg("007")
        .arg("-0")
        .arg("9223372036854775808")
        .arg("-9223372036854775808")
        .query(&mut c)
        .unwrap();
    let got: Vec<Vec<u8>> = q(&mut c, &["LRANGE", "b", "0", "-1"]);
    let want: Vec<Vec<u8>> = vec![
        bin.to_vec(),
        b"007".to_vec(),
        b"-0".to_vec(),
        b"9223372036854775808".to_vec(),
        b"-9223372036854775808".to_vec(),
    ];
    assert_eq!(got, want);
}

#[test]
fn pop_errors_and_arity() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: i64 = q(&mut c, &["RPUSH", "l", "a"]);
    let positive = "ERR value is out of range, must be positive";
    assert_eq!(err(&mut c, &["LPOP", "l", "-1"]), positive);
    assert_eq!(err(&mut c, &["RPOP", "l", "abc"]), positive);
    assert_eq!(
        err(&mut c, &["LPOP", "l", "1", "2"]),
        "ERR wrong number of arguments for 'lpop' command"
    );
    assert_eq!(
        err(&mut c, &["RPOP"]),
        "ERR wrong number of arguments for 'rpop' command"
    );
    assert_eq!(
        err(&mut c, &["LPUSH", "l"]),
        "ERR wrong number of arguments for 'lpush' command"
    );
    assert_eq!(
        err(&mut c, &["LINSERT", "l", "before", "a"]),
        "ERR wrong number of arguments for 'linsert' command"
    );
    assert_eq!(
        err(&mut c, &["BLPOP", "l"]),
        "ERR wrong number of arguments for 'blpop' command"
    );
    assert_eq!(all(&mut c, "l"), ["a"]);
}

#[test]
fn wrongtype_everywhere_and_nothing_changes() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "s", "v"]);
    let _: i64 = q(&mut c, &["RPUSH", "l", "a", "b"]);
    for a in [
        &["LPUSH", "s", "a"][..],
        &["RPUSHX", "s", "a"],
        &["LPOP", "s"],
        &["RPOP", "s", "1"],
        &["LLEN", "s"],
        &["LRANGE", "s", "0", "-1"],
        &["LINDEX", "s", "0"],
        &["LSET", "s", "0", "x"],
        &["LREM", "s", "0", "x"],
        &["LTRIM", "s", "0", "1"],
        &["LINSERT", "s", "BEFORE", "a", "b"],
        &["LPOS", "s", "a"],
        &["LMOVE", "s", "l", "LEFT", "LEFT"],
        &["LMOVE", "l", "s", "LEFT", "LEFT"],
        &["RPOPLPUSH", "l", "s"],
        &["LMPOP", "2", "s", "l", "LEFT"],
        &["BLPOP", "s", "l", "0"],
        &["BRPOPLPUSH", "l", "s", "0"],
        &["BLMPOP", "0", "1", "s", "RIGHT"],
    ] {
        assert_eq!(err(&mut c, a), WRONGTYPE, "{a:?}");
    }
    assert_eq!(all(&mut c, "l"), ["a", "b"]);
    assert_eq!(q::<String>(&mut c, &["GET", "s"]), "v");
}

#[test]
fn ranges_indexes_and_edits() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: i64 = q(&mut c, &["RPUSH", "l", "a", "b", "c", "d", "e"]);
    assert_eq!(strings(&mut c, &["LRANGE", "l", "1", "2"]), ["b", "c"]);
    assert_eq!(strings(&mut c, &["LRANGE", "l", "-2", "-1"]), ["d", "e"]);
    assert_eq!(strings(&mut c, &["LRANGE", "l", "-100", "100"]).len(), 5);
    assert!(strings(&mut c, &["LRANGE", "l", "3", "1"]).is_empty());
    assert!(strings(&mut c, &["LRANGE", "none", "0", "-1"]).is_empty());
    assert_eq!(err(&mut c, &["LRANGE", "none", "a", "1"]), NOT_INT);
    assert_eq!(q::<String>(&mut c, &["LINDEX", "l", "-1"]), "e");
    assert_eq!(q::<Option<String>>(&mut c, &["LINDEX", "l", "5"]), None);
    assert_eq!(
        q::<Option<String>>(&mut c, &["LINDEX", "none", "abc"]),
        None
    );
    assert_eq!(err(&mut c, &["LINDEX", "l", "abc"]), NOT_INT);

    let _: () = q(&mut c, &["LSET", "l", "0", "A"]);
    let _: () = q(&mut c, &["LSET", "l", "-1", "E"]);
    assert_eq!(all(&mut c, "l"), ["A", "b", "c", "d", "E"]);
    assert_eq!(
        err(&mut c, &["LSET", "none", "abc", "x"]),
        "ERR no such key"
    );
    assert_eq!(err(&mut c, &["LSET", "l", "abc", "x"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["LSET", "l", "5", "x"]),
        "ERR index out of range"
    );

    assert_eq!(q::<i64>(&mut c, &["LINSERT", "l", "BEFORE", "b", "x"]), 6);
    assert_eq!(q::<i64>(&mut c, &["LINSERT", "l", "after", "d", "x"]), 7);
    assert_eq!(q::<i64>(&mut c, &["LINSERT", "l", "after", "zz", "x"]), -1);
    assert_eq!(
        q::<i64>(&mut c, &["LINSERT", "none", "after", "zz", "x"]),
        0
    );
    assert_eq!(err(&mut c, &["LINSERT", "l", "around", "b", "x"]), SYNTAX);
    assert_eq!(all(&mut c, "l"), ["A", "x", "b", "c", "d", "x", "E"]);

    assert_eq!(q::<i64>(&mut c, &["LREM", "l", "-1", "x"]), 1);
    assert_eq!(all(&mut c, "l"), ["A", "x", "b", "c", "d", "E"]);
    assert_eq!(q::<i64>(&mut c, &["LREM", "l", "0", "x"]), 1);
    assert_eq!(q::<i64>(&mut c, &["LREM", "none", "0", "x"]), 0);
    assert_eq!(err(&mut c, &["LREM", "l", "x", "x"]), NOT_INT);

    let _: () = q(&mut c, &["LTRIM", "l", "1", "-2"]);
    assert_eq!(all(&mut c, "l"), ["b", "c", "d"]);
    let _: () = q(&mut c, &["LTRIM", "none", "0", "1"]);
    assert_eq!(err(&mut c, &["LTRIM", "l", "a", "1"]), NOT_INT);
    let _: () = q(&mut c, &["LTRIM", "l", "5", "10"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "l"]), 0);
}

#[test]
fn lpos_options() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: i64 = q(&mut c, &["RPUSH", "p", "a", "b", "c", "a", "b", "a"]);
    assert_eq!(q::<i64>(&mut c, &["LPOS", "p", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["LPOS", "p", "a", "RANK", "-1"]), 5);
    assert_eq!(q::<i64>(&mut c, &["LPOS", "p", "a", "RANK", "2"]), 3);
    assert_eq!(q::<Option<i64>>(&mut c, &["LPOS", "p", "z"]), None);
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "p", "a", "COUNT", "0"]),
        [0, 3, 5]
    );
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "p", "a", "RANK", "-1", "COUNT", "2"]),
        [5, 3]
    );
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "p", "a", "COUNT", "0", "MAXLEN", "4"]),
        [0, 3]
    );
    assert!(q::<Vec<i64>>(&mut c, &["LPOS", "none", "a", "COUNT", "1"]).is_empty());
    assert_eq!(q::<Option<i64>>(&mut c, &["LPOS", "none", "a"]), None);
    assert_eq!(
        err(&mut c, &["LPOS", "p", "a", "RANK", "0"]),
        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"
    );
    assert_eq!(
        err(&mut c, &["LPOS", "p", "a", "COUNT", "-1"]),
        "ERR COUNT can't be negative"
    );
    assert_eq!(
        err(&mut c, &["LPOS", "p", "a", "MAXLEN", "-1"]),
        "ERR MAXLEN can't be negative"
    );
    assert_eq!(err(&mut c, &["LPOS", "p", "a", "RANK"]), SYNTAX);
    assert_eq!(err(&mut c, &["LPOS", "p", "a", "RANK", "x"]), NOT_INT);
}

#[test]
fn moves_between_lists_and_lmpop() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: i64 = q(&mut c, &["RPUSH", "src", "a", "b", "c"]);
    assert_eq!(
        q::<String>(&mut c, &["LMOVE", "src", "dst", "LEFT", "RIGHT"]),
        "a"
    );
    assert_eq!(q::<String>(&mut c, &["RPOPLPUSH", "src", "dst"]), "c");
    assert_eq!(all(&mut c, "dst"), ["c", "a"]);
    assert_eq!(
        q::<String>(&mut c, &["LMOVE", "dst", "dst", "left", "right"]),
        "c"
    );
    assert_eq!(all(&mut c, "dst"), ["a", "c"]);
    assert_eq!(
        q::<String>(&mut c, &["LMOVE", "src", "dst", "right", "left"]),
        "b"
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "src"]), 0);
    assert_eq!(
        q::<Option<String>>(&mut c, &["LMOVE", "src", "dst", "LEFT", "LEFT"]),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["RPOPLPUSH", "src", "dst"]),
        None
    );
    assert_eq!(err(&mut c, &["LMOVE", "dst", "x", "UP", "LEFT"]), SYNTAX);

    // LMPOP: [key, [elements]] from the first non-empty list.
    let got: (String, Vec<String>) = q(&mut c, &["LMPOP", "2", "none", "dst", "LEFT"]);
    assert_eq!(got, ("dst".to_string(), vec!["b".to_string()]));
    let got: (String, Vec<String>) = q(&mut c, &["LMPOP", "1", "dst", "RIGHT", "COUNT", "10"]);
    assert_eq!(got.1, ["c", "a"]);
    assert_eq!(
        q::<Value>(&mut c, &["LMPOP", "1", "dst", "LEFT"]),
        Value::Nil
    );
    assert_eq!(
        err(&mut c, &["LMPOP", "0", "dst", "LEFT"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err(&mut c, &["LMPOP", "1", "dst", "LEFT", "COUNT", "0"]),
        "ERR count should be greater than 0"
    );
    assert_eq!(err(&mut c, &["LMPOP", "2", "dst", "LEFT"]), SYNTAX);
    assert_eq!(
        err(
            &mut c,
            &["LMPOP", "1", "dst", "LEFT", "COUNT", "1", "COUNT", "1"]
        ),
        SYNTAX
    );
}

#[test]
fn blocking_forms_serve_at_once_when_data_exists() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: i64 = q(&mut c, &["RPUSH", "l", "a", "b", "c", "d", "e"]);
    let got: (String, String) = q(&mut c, &["BLPOP", "none", "l", "0"]);
    assert_eq!(got, ("l".to_string(), "a".to_string()));
    let got: (String, String) = q(&mut c, &["BRPOP", "l", "1"]);
    assert_eq!(got, ("l".to_string(), "e".to_string()));
    assert_eq!(
        q::<String>(&mut c, &["BLMOVE", "l", "m", "LEFT", "LEFT", "0"]),
        "b"
    );
    assert_eq!(q::<String>(&mut c, &["BRPOPLPUSH", "l", "m", "0"]), "d");
    let got: (String, Vec<String>) = q(
        &mut c,
        &["BLMPOP", "0", "2", "none", "m", "RIGHT", "COUNT", "5"],
    );
    assert_eq!(got, ("m".to_string(), vec!["b".into(), "d".into()]));
    assert_eq!(all(&mut c, "l"), ["c"]);
    // Argument errors come before anything else.
    let not_float = "ERR timeout is not a float or out of range";
    assert_eq!(err(&mut c, &["BLPOP", "l", "abc"]), not_float);
    assert_eq!(
        err(&mut c, &["BRPOP", "l", "-1"]),
        "ERR timeout is negative"
    );
    assert_eq!(
        err(&mut c, &["BLMOVE", "l", "m", "LEFT", "UP", "0"]),
        SYNTAX
    );
    assert_eq!(
        err(&mut c, &["BLMPOP", "0", "0", "l", "LEFT"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(err(&mut c, &["BLMPOP", "x", "1", "l", "LEFT"]), not_float);
}

#[test]
fn reply_shapes_in_resp2_and_resp3() {
    let server = Kvasir::start(&[]);
    let mut r2 = server.raw_conn();
    assert_eq!(r2.cmd_str(&["RPUSH", "l", "a", "b"]), ":2\r\n");
    assert_eq!(r2.cmd_str(&["LPOP", "none"]), "$-1\r\n");
    assert_eq!(r2.cmd_str(&["LPOP", "none", "1"]), "*-1\r\n");
    assert_eq!(r2.cmd_str(&["LPOP", "l", "0"]), "*0\r\n");
    assert_eq!(r2.cmd_str(&["LINDEX", "l", "9"]), "$-1\r\n");
    assert_eq!(r2.cmd_str(&["LPOS", "l", "z"]), "$-1\r\n");
    assert_eq!(r2.cmd_str(&["LMPOP", "1", "none", "LEFT"]), "*-1\r\n");
    assert_eq!(
        r2.cmd_str(&["LMOVE", "none", "l", "LEFT", "LEFT"]),
        "$-1\r\n"
    );
    assert_eq!(
        r2.cmd_str(&["LRANGE", "l", "0", "-1"]),
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(
        r2.cmd_str(&["LMPOP", "1", "l", "RIGHT"]),
        "*2\r\n$1\r\nl\r\n*1\r\n$1\r\nb\r\n"
    );
    assert_eq!(
        r2.cmd_str(&["BLPOP", "l", "0"]),
        "*2\r\n$1\r\nl\r\n$1\r\na\r\n"
    );

    let mut r3 = server.raw_conn();
    assert!(r3.cmd_str(&["HELLO", "3"]).starts_with('%'));
    assert_eq!(r3.cmd_str(&["RPUSH", "l", "a", "b"]), ":2\r\n");
    assert_eq!(r3.cmd_str(&["LPOP", "none"]), "_\r\n");
    assert_eq!(r3.cmd_str(&["LPOP", "none", "1"]), "_\r\n");
    assert_eq!(r3.cmd_str(&["LPOS", "l", "z"]), "_\r\n");
    assert_eq!(r3.cmd_str(&["LMPOP", "1", "none", "LEFT"]), "_\r\n");
    assert_eq!(
        r3.cmd_str(&["LPOP", "l", "5"]),
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
}

#[test]
fn resp3_client_reads_lists() {
    let server = Kvasir::start(&[]);
    let mut c = server
        .client_resp3()
        .get_connection()
        .expect("resp3 connection");
    let _: i64 = q(&mut c, &["RPUSH", "l", "1", "2", "3"]);
    assert_eq!(all(&mut c, "l"), ["1", "2", "3"]);
    assert_eq!(q::<Option<String>>(&mut c, &["LPOP", "none"]), None);
    assert_eq!(
        q::<Option<Vec<String>>>(&mut c, &["RPOP", "none", "2"]),
        None
    );
    let got: (String, Vec<String>) = q(&mut c, &["LMPOP", "1", "l", "LEFT", "COUNT", "2"]);
    assert_eq!(got.1, ["1", "2"]);
}

#[test]
fn encodings_and_memory() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: i64 = q(&mut c, &["RPUSH", "small", "a", "b", "c"]);
    // Redis 7.0 names every list a quicklist (7.2 says listpack here).
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "small"]),
        "quicklist"
    );
    let big = "x".repeat(10_000);
    let _: i64 = q(&mut c, &["RPUSH", "small", &big]);
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "small"]),
        "quicklist"
    );
    assert_eq!(q::<String>(&mut c, &["LINDEX", "small", "-1"]), big);

    // 1000 short elements: a few bytes each beyond the data.
    let mut push = redis::cmd("RPUSH");
    push.arg("m");
    for i in 0..1000 {
        push.arg(format!("elem:{i:05}"));
    }
    let _: i64 = push.query(&mut c).unwrap();
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "m"]),
        "quicklist"
    );
    let usage: i64 = q(&mut c, &["MEMORY", "USAGE", "m"]);
    // 10 bytes of data + 2 of entry overhead per element, plus slack.
    assert!(usage < 1000 * 16, "MEMORY USAGE {usage}");
    assert!(usage > 1000 * 10, "MEMORY USAGE {usage}");
}

#[test]
fn long_lists_built_by_lpush_read_back_in_order() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let mut pipe = redis::pipe();
    for i in 0..20_000 {
        pipe.cmd("LPUSH").arg("big").arg(i.to_string()).ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    assert_eq!(q::<i64>(&mut c, &["LLEN", "big"]), 20_000);
    let first: Vec<String> = strings(&mut c, &["LRANGE", "big", "0", "599"]);
    let want: Vec<String> = (0..600).map(|i| (19_999 - i).to_string()).collect();
    assert_eq!(first, want);
    assert_eq!(q::<String>(&mut c, &["LINDEX", "big", "10000"]), "9999");
    let _: () = q(&mut c, &["LSET", "big", "10000", "mid"]);
    assert_eq!(q::<i64>(&mut c, &["LPOS", "big", "mid"]), 10_000);
    assert_eq!(
        q::<i64>(&mut c, &["LINSERT", "big", "AFTER", "mid", "m2"]),
        20_001
    );
    assert_eq!(q::<i64>(&mut c, &["LREM", "big", "0", "m2"]), 1);
    let _: () = q(&mut c, &["LTRIM", "big", "100", "-101"]);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "big"]), 19_800);
    assert_eq!(q::<String>(&mut c, &["LPOP", "big"]), "19899");
    assert_eq!(q::<String>(&mut c, &["RPOP", "big"]), "100");
}

#[test]
fn command_table_entries() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let info: Vec<Value> = q(&mut c, &["COMMAND", "INFO", "lpush", "blpop", "lmpop"]);
    assert_eq!(info.len(), 3);
    let Value::Array(lpush) = &info[0] else {
        panic!("{info:?}")
    };
    assert_eq!(lpush[1], Value::Int(-3));
    let Value::Array(blpop) = &info[1] else {
        panic!("{info:?}")
    };
    assert_eq!(
        (&blpop[3], &blpop[4], &blpop[5]),
        (&Value::Int(1), &Value::Int(-2), &Value::Int(1))
    );
    let keys: Vec<String> = q(
        &mut c,
        &["COMMAND", "GETKEYS", "LMPOP", "2", "a", "b", "LEFT"],
    );
    assert_eq!(keys, ["a", "b"]);
}

/// list-compress-depth: a quicklist's inner nodes are kept compressed, so
/// a long list of compressible values costs clearly less memory, and every
/// list command answers exactly as it does without compression (a seeded
/// random sequence replayed on a server with depth 0 and one with depth 1).
#[test]
fn compress_depth_saves_memory_and_changes_no_reply() {
    let plain = Kvasir::start(&[]);
    let packed = Kvasir::start(&[]);
    let mut a = plain.conn();
    let mut b = packed.conn();
    let bad = "ERR CONFIG SET failed (possibly related to argument 'list-compress-depth') - argument must be between 0 and 2147483647 inclusive";
    assert_eq!(
        err(&mut b, &["CONFIG", "SET", "list-compress-depth", "-1"]),
        bad
    );
    assert_eq!(
        err(
            &mut b,
            &["CONFIG", "SET", "list-compress-depth", "2147483648"]
        ),
        bad
    );
    let _: () = q(&mut b, &["CONFIG", "SET", "list-compress-depth", "1"]);
    let depth: Vec<String> = strings(&mut b, &["CONFIG", "GET", "list-compress-depth"]);
    assert_eq!(depth, ["list-compress-depth", "1"]);

    let value = |i: u64| format!("session:{:04}:{}", i % 1000, "payload-".repeat(8));
    for c in [&mut a, &mut b] {
        let mut push = redis::cmd("RPUSH");
        push.arg("big");
        for i in 0..20_000 {
            push.arg(value(i));
        }
        let _: i64 = push.query(c).unwrap();
        assert_eq!(q::<String>(c, &["OBJECT", "ENCODING", "big"]), "quicklist");
    }
    let usage_plain: i64 = q(&mut a, &["MEMORY", "USAGE", "big"]);
    let usage_packed: i64 = q(&mut b, &["MEMORY", "USAGE", "big"]);
    assert!(
        usage_packed * 3 < usage_plain,
        "depth 1 uses {usage_packed} bytes, depth 0 {usage_plain}"
    );
    // Reading decompresses a copy; the stored nodes stay compressed.
    let whole: Vec<String> = strings(&mut b, &["LRANGE", "big", "0", "-1"]);
    assert_eq!(whole, strings(&mut a, &["LRANGE", "big", "0", "-1"]));
    assert_eq!(whole.len(), 20_000);
    assert_eq!(q::<i64>(&mut b, &["MEMORY", "USAGE", "big"]), usage_packed);

    // A random sequence over every list command, on both servers.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n.max(1)
    };
    let keys = ["big", "l1", "l2"];
    let mut compared = 0;
    for _ in 0..4000 {
        let k = keys[rnd(3) as usize].to_string();
        let k2 = keys[rnd(3) as usize].to_string();
        let v = match rnd(4) {
            0 => rnd(1000).to_string(),
            1 => value(rnd(3000)),
            2 => "z".repeat(rnd(300) as usize),
            _ => format!("v{}", rnd(10)),
        };
        let i = (rnd(30_000) as i64 - 15_000).to_string();
        let j = (rnd(30_000) as i64 - 15_000).to_string();
        let n = rnd(5).to_string();
        let end = if rnd(2) == 0 { "LEFT" } else { "RIGHT" };
        let args: Vec<String> = match rnd(17) {
            0 | 1 => vec!["LPUSH".into(), k, v.clone(), v],
            2 | 3 => vec!["RPUSH".into(), k, v],
            4 => vec!["LPOP".into(), k, n],
            5 => vec!["RPOP".into(), k],
            6 => vec!["LINDEX".into(), k, i],
            7 => vec!["LSET".into(), k, i, v],
            8 => vec![
                "LINSERT".into(),
                k,
                if rnd(2) == 0 { "BEFORE" } else { "AFTER" }.into(),
                format!("v{}", rnd(10)),
                v,
            ],
            9 => vec!["LRANGE".into(), k, i, j],
            10 => vec![
                "LREM".into(),
                k,
                (rnd(5) as i64 - 2).to_string(),
                format!("v{}", rnd(10)),
            ],
            11 => vec![
                "LTRIM".into(),
                k,
                rnd(50).to_string(),
                (-1 - rnd(50) as i64).to_string(),
            ],
            12 => vec![
                "LPOS".into(),
                k,
                v,
                "RANK".into(),
                (rnd(3) + 1).to_string(),
                "COUNT".into(),
                "0".into(),
            ],
            13 => vec!["LMOVE".into(), k, k2, end.into(), end.into()],
            14 => vec!["LLEN".into(), k],
            15 => vec![
                "LMPOP".into(),
                "2".into(),
                k,
                k2,
                end.into(),
                "COUNT".into(),
                (rnd(3) + 1).to_string(),
            ],
            _ => vec!["RPOPLPUSH".into(), k, k2],
        };
        let mut cmd = redis::cmd(&args[0]);
        for x in &args[1..] {
            cmd.arg(x);
        }
        let ra: redis::RedisResult<Value> = cmd.query(&mut a);
        let rb: redis::RedisResult<Value> = cmd.query(&mut b);
        match (&ra, &rb) {
            (Ok(x), Ok(y)) => assert_eq!(x, y, "{args:?}"),
            (Err(x), Err(y)) => assert_eq!(x.to_string(), y.to_string(), "{args:?}"),
            _ => panic!("{args:?}: {ra:?} vs {rb:?}"),
        }
        compared += 1;
    }
    assert_eq!(compared, 4000);
    for k in keys {
        assert_eq!(all(&mut a, k), all(&mut b, k), "{k}");
        let ea: Option<String> = q(&mut a, &["OBJECT", "ENCODING", k]);
        let eb: Option<String> = q(&mut b, &["OBJECT", "ENCODING", k]);
        assert_eq!(ea, eb, "{k}");
    }
    // The big list is still long and still compressed after all that.
    let len: i64 = q(&mut b, &["LLEN", "big"]);
    assert!(len > 10_000, "{len}");
    let usage_plain: i64 = q(&mut a, &["MEMORY", "USAGE", "big"]);
    let usage_packed: i64 = q(&mut b, &["MEMORY", "USAGE", "big"]);
    assert!(
        usage_packed * 2 < usage_plain,
        "depth 1 uses {usage_packed} bytes, depth 0 {usage_plain}"
    );
}

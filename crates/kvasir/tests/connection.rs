//! Connection commands end to end, byte-exact where Redis 7.0's reply is
//! fixed: PING ECHO SELECT AUTH HELLO RESET QUIT and CLIENT
//! ID/SETNAME/GETNAME/LIST/INFO/KILL/NO-EVICT, over RESP2 and RESP3.

mod common;

use common::{query_err, Kvasir, RawConn};
use redis::Value;
use std::time::{Duration, Instant};

const NOAUTH: &str = "-NOAUTH Authentication required.\r\n";
const WRONGPASS: &str = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";

fn client_id(r: &mut RawConn) -> u64 {
    let reply = r.cmd_str(&["CLIENT", "ID"]);
    reply
        .strip_prefix(':')
        .and_then(|s| s.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("CLIENT ID replied {reply:?}"))
}

/// The text of a bulk (`$`) or verbatim (`=`, `txt:` prefix) reply.
fn text_of(reply: &str) -> String {
    let (_, body) = reply.split_once("\r\n").expect("header");
    let body = body.strip_suffix("\r\n").expect("trailer");
    if reply.starts_with('=') {
        body.strip_prefix("txt:").expect("txt format").to_string()
    } else {
        assert!(reply.starts_with('$'), "not a bulk reply: {reply:?}");
        body.to_string()
    }
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.trim_end()
        .split(' ')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
}

#[test]
fn ping_and_echo() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    assert_eq!(r.cmd_str(&["PING"]), "+PONG\r\n");
    assert_eq!(
        r.cmd_str(&["ping", "hello world"]),
        "$11\r\nhello world\r\n"
    );
    assert_eq!(
        r.cmd_str(&["PING", "a", "b"]),
        "-ERR wrong number of arguments for 'ping' command\r\n"
    );
    assert_eq!(r.cmd_str(&["ECHO", "x y"]), "$3\r\nx y\r\n");
    assert_eq!(r.cmd_str(&["ECHO", ""]), "$0\r\n\r\n");
    assert_eq!(
        r.cmd_str(&["ECHO"]),
        "-ERR wrong number of arguments for 'echo' command\r\n"
    );
    // Inline commands work too.
    r.send(b"PING\r\n");
    assert_eq!(r.read_reply(), b"+PONG\r\n");
    r.send(b"ECHO \"a b\"\r\n");
    assert_eq!(r.read_reply(), b"$3\r\na b\r\n");
    // Same shapes in RESP3.
    let hello = r.cmd_str(&["HELLO", "3"]);
    assert!(hello.starts_with('%'), "{hello}");
    assert_eq!(r.cmd_str(&["PING"]), "+PONG\r\n");
    assert_eq!(r.cmd_str(&["ECHO", "hi"]), "$2\r\nhi\r\n");
}

#[test]
fn select_checks_range_and_type() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    assert_eq!(r.cmd_str(&["SELECT", "15"]), "+OK\r\n");
    assert_eq!(r.cmd_str(&["SELECT", "0"]), "+OK\r\n");
    for bad in ["16", "-1", "1000000"] {
        assert_eq!(
            r.cmd_str(&["SELECT", bad]),
            "-ERR DB index is out of range\r\n",
            "SELECT {bad}"
        );
    }
    assert_eq!(
        r.cmd_str(&["SELECT", "abc"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        r.cmd_str(&["SELECT"]),
        "-ERR wrong number of arguments for 'select' command\r\n"
    );
}

#[test]
fn select_honours_databases_flag() {
    let server = Kvasir::start(&["--databases", "4"]);
    let mut r = server.raw_conn();
    assert_eq!(r.cmd_str(&["SELECT", "3"]), "+OK\r\n");
    assert_eq!(
        r.cmd_str(&["SELECT", "4"]),
        "-ERR DB index is out of range\r\n"
    );
}

#[test]
fn requirepass_demands_auth_before_commands() {
    let server = Kvasir::start(&["--requirepass", "s3cret"]);
    let mut r = server.raw_conn();
    assert_eq!(r.cmd_str(&["GET", "k"]), NOAUTH);
    assert_eq!(r.cmd_str(&["PING"]), NOAUTH);
    assert_eq!(r.cmd_str(&["SET", "k", "v"]), NOAUTH);
    assert_eq!(r.cmd_str(&["CLIENT", "ID"]), NOAUTH);
    assert_eq!(r.cmd_str(&["AUTH", "wrong"]), WRONGPASS);
    assert_eq!(r.cmd_str(&["AUTH", "default", "wrong"]), WRONGPASS);
    assert_eq!(r.cmd_str(&["AUTH", "nobody", "s3cret"]), WRONGPASS);
    assert_eq!(r.cmd_str(&["GET", "k"]), NOAUTH);
    assert_eq!(r.cmd_str(&["AUTH", "a", "b", "c"]), "-ERR syntax error\r\n");
    assert_eq!(r.cmd_str(&["AUTH", "s3cret"]), "+OK\r\n");
    assert_eq!(r.cmd_str(&["GET", "k"]), "$-1\r\n");
    assert_eq!(r.cmd_str(&["SET", "k", "v"]), "+OK\r\n");

    let mut r2 = server.raw_conn();
    assert_eq!(r2.cmd_str(&["GET", "k"]), NOAUTH);
    assert_eq!(r2.cmd_str(&["AUTH", "default", "s3cret"]), "+OK\r\n");
    assert_eq!(r2.cmd_str(&["GET", "k"]), "$1\r\nv\r\n");
    // A failed AUTH after a good one does not log the connection out.
    assert_eq!(r2.cmd_str(&["AUTH", "nope"]), WRONGPASS);
    assert_eq!(r2.cmd_str(&["GET", "k"]), "$1\r\nv\r\n");
}

#[test]
fn redis_rs_authenticates_with_password_in_url() {
    let server = Kvasir::start(&["--requirepass", "pw"]);
    let url = format!("redis://:pw@127.0.0.1:{}/", server.port);
    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let url3 = format!(
        "redis://default:pw@127.0.0.1:{}/?protocol=resp3",
        server.port
    );
    let mut c3 = redis::Client::open(url3).unwrap().get_connection().unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut c3).unwrap();
    assert_eq!(v, "v");
    let bad = format!("redis://:nope@127.0.0.1:{}/", server.port);
    assert!(redis::Client::open(bad).unwrap().get_connection().is_err());
    let mut plain = server.conn();
    let e = query_err(&mut plain, redis::cmd("GET").arg("k"));
    assert_eq!(e, "NOAUTH Authentication required.");
}

#[test]
fn auth_without_requirepass() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    assert_eq!(
        r.cmd_str(&["AUTH", "x"]),
        "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"
    );
    // The default user has no password: any password works for it.
    assert_eq!(r.cmd_str(&["AUTH", "default", "anything"]), "+OK\r\n");
    assert_eq!(r.cmd_str(&["AUTH", "other", "anything"]), WRONGPASS);
}

#[test]
fn hello_3_auth_setname_switches_protocol() {
    let server = Kvasir::start(&["--requirepass", "pw"]);
    let mut r = server.raw_conn();
    assert_eq!(
        r.cmd_str(&["HELLO", "3"]),
        "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"
    );
    assert_eq!(
        r.cmd_str(&["HELLO", "3", "AUTH", "default", "wrong"]),
        WRONGPASS
    );
    assert_eq!(
        r.cmd_str(&["HELLO", "3", "AUTH", "default"]),
        "-ERR Syntax error in HELLO option 'AUTH'\r\n"
    );
    assert_eq!(
        r.cmd_str(&["GET", "k"]),
        NOAUTH,
        "still RESP2, still locked"
    );
    let hello = r.cmd_str(&["HELLO", "3", "AUTH", "default", "pw", "SETNAME", "myname"]);
    assert!(hello.starts_with("%7\r\n"), "{hello}");
    for part in [
        "$6\r\nserver\r\n$5\r\nredis\r\n",
        "$7\r\nversion\r\n$",
        "$5\r\nproto\r\n:3\r\n",
        "$2\r\nid\r\n:",
        "$4\r\nmode\r\n$10\r\nstandalone\r\n",
        "$4\r\nrole\r\n$6\r\nmaster\r\n",
        "$7\r\nmodules\r\n*0\r\n",
    ] {
        assert!(
            hello.contains(part),
            "HELLO reply lacks {part:?}: {hello:?}"
        );
    }
    assert_eq!(r.cmd_str(&["CLIENT", "GETNAME"]), "$6\r\nmyname\r\n");
    assert_eq!(r.cmd_str(&["GET", "k"]), "_\r\n");
    let info = text_of(&r.cmd_str(&["CLIENT", "INFO"]));
    assert_eq!(field(&info, "resp"), Some("3"), "{info}");
    assert_eq!(field(&info, "name"), Some("myname"), "{info}");
}

#[test]
fn hello_reply_shape_in_resp2_and_resp3() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    let id = client_id(&mut r);
    let two = r.cmd_str(&["HELLO"]);
    assert!(
        two.starts_with("*14\r\n"),
        "RESP2 HELLO is a flat array: {two}"
    );
    assert!(two.contains("$5\r\nproto\r\n:2\r\n"), "{two}");
    assert!(two.contains(&format!("$2\r\nid\r\n:{id}\r\n")), "{two}");
    let two = r.cmd_str(&["HELLO", "2"]);
    assert!(two.starts_with("*14\r\n"), "{two}");

    // Through redis-rs: a map in RESP3.
    let mut c3 = server.client_resp3().get_connection().unwrap();
    let v: Value = redis::cmd("HELLO").arg(3).query(&mut c3).unwrap();
    let Value::Map(pairs) = v else {
        panic!("HELLO 3 is not a map: {v:?}")
    };
    let get = |k: &str| {
        pairs
            .iter()
            .find(|(key, _)| *key == Value::BulkString(k.as_bytes().to_vec()))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(get("server"), Some(Value::BulkString(b"redis".to_vec())));
    assert_eq!(get("proto"), Some(Value::Int(3)));
    match get("version") {
        Some(Value::BulkString(v)) => assert!(v.starts_with(b"7."), "{v:?}"),
        other => panic!("version: {other:?}"),
    }
    assert!(matches!(get("id"), Some(Value::Int(n)) if n > 0));
    assert_eq!(get("modules"), Some(Value::Array(vec![])));
}

#[test]
fn hello_rejects_unsupported_protocol_versions() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    for v in ["4", "1", "0", "-3"] {
        assert_eq!(
            r.cmd_str(&["HELLO", v]),
            "-NOPROTO unsupported protocol version\r\n",
            "HELLO {v}"
        );
    }
    assert_eq!(
        r.cmd_str(&["HELLO", "abc"]),
        "-ERR Protocol version is not an integer or out of range\r\n"
    );
    assert_eq!(
        r.cmd_str(&["HELLO", "3", "FOO"]),
        "-ERR Syntax error in HELLO option 'FOO'\r\n"
    );
    // Still RESP2 after the refusals.
    assert_eq!(r.cmd_str(&["GET", "x"]), "$-1\r\n");
}

#[test]
fn reset_restores_connection_defaults() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    assert_eq!(r.cmd_str(&["SET", "k", "zero"]), "+OK\r\n");
    assert_eq!(r.cmd_str(&["SELECT", "3"]), "+OK\r\n");
    assert_eq!(r.cmd_str(&["CLIENT", "SETNAME", "named"]), "+OK\r\n");
    let hello = r.cmd_str(&["HELLO", "3"]);
    assert!(hello.starts_with('%'));
    assert_eq!(r.cmd_str(&["GET", "nope"]), "_\r\n");

    assert_eq!(r.cmd_str(&["RESET"]), "+RESET\r\n");
    assert_eq!(r.cmd_str(&["GET", "nope"]), "$-1\r\n", "back to RESP2");
    assert_eq!(r.cmd_str(&["GET", "k"]), "$4\r\nzero\r\n", "back to db 0");
    assert_eq!(r.cmd_str(&["CLIENT", "GETNAME"]), "$-1\r\n");
    let info = text_of(&r.cmd_str(&["CLIENT", "INFO"]));
    assert_eq!(field(&info, "db"), Some("0"), "{info}");
    assert_eq!(field(&info, "resp"), Some("2"), "{info}");
    // (Redis 7.0 keeps CLIENT NO-EVICT across RESET; not asserted either way.)
}

#[test]
fn reset_logs_the_connection_out() {
    let server = Kvasir::start(&["--requirepass", "pw"]);
    let mut r = server.raw_conn();
    assert_eq!(r.cmd_str(&["RESET"]), "+RESET\r\n", "RESET needs no auth");
    assert_eq!(r.cmd_str(&["AUTH", "pw"]), "+OK\r\n");
    assert_eq!(r.cmd_str(&["PING"]), "+PONG\r\n");
    assert_eq!(r.cmd_str(&["RESET"]), "+RESET\r\n");
    assert_eq!(r.cmd_str(&["PING"]), NOAUTH);
}

#[test]
fn quit_replies_ok_and_closes() {
    let mut server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    // Commands pipelined after QUIT are not run.
    r.send(b"*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n");
    let (bytes, closed) = r.read_until_close(Duration::from_secs(5));
    assert_eq!(String::from_utf8_lossy(&bytes), "+OK\r\n");
    assert!(closed, "connection still open after QUIT");
    server.assert_alive();
}

#[test]
fn quit_works_before_auth() {
    let server = Kvasir::start(&["--requirepass", "pw"]);
    let mut r = server.raw_conn();
    r.send(b"QUIT\r\n");
    let (bytes, closed) = r.read_until_close(Duration::from_secs(5));
    assert_eq!(String::from_utf8_lossy(&bytes), "+OK\r\n");
    assert!(closed);
    let mut r = server.raw_conn();
    assert_eq!(r.cmd_str(&["AUTH", "pw"]), "+OK\r\n");
    assert_eq!(r.cmd_str(&["PING"]), "+PONG\r\n");
}

#[test]
fn client_id_is_unique_and_increasing() {
    let server = Kvasir::start(&[]);
    let mut a = server.raw_conn();
    let mut b = server.raw_conn();
    let ia = client_id(&mut a);
    let ib = client_id(&mut b);
    assert!(ia > 0 && ib > ia, "{ia} {ib}");
    assert_eq!(client_id(&mut a), ia, "stable per connection");
}

#[test]
fn client_setname_and_getname() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    assert_eq!(r.cmd_str(&["CLIENT", "GETNAME"]), "$-1\r\n");
    assert_eq!(r.cmd_str(&["CLIENT", "SETNAME", "worker-1"]), "+OK\r\n");
    assert_eq!(r.cmd_str(&["CLIENT", "GETNAME"]), "$8\r\nworker-1\r\n");
    for bad in ["a b", "new\nline", "tab\there"] {
        assert_eq!(
            r.cmd_str(&["CLIENT", "SETNAME", bad]),
            "-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
            "{bad:?}"
        );
    }
    assert_eq!(r.cmd_str(&["CLIENT", "GETNAME"]), "$8\r\nworker-1\r\n");
    // An empty name removes the name.
    assert_eq!(r.cmd_str(&["CLIENT", "SETNAME", ""]), "+OK\r\n");
    assert_eq!(r.cmd_str(&["CLIENT", "GETNAME"]), "$-1\r\n");
    assert_eq!(
        r.cmd_str(&["CLIENT", "SETNAME"]),
        "-ERR wrong number of arguments for 'client|setname' command\r\n"
    );
    assert_eq!(
        r.cmd_str(&["CLIENT", "FOO"]),
        "-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n"
    );
}

#[test]
fn client_list_and_info_describe_connections() {
    let server = Kvasir::start(&[]);
    let mut a = server.raw_conn();
    let mut b = server.raw_conn();
    let ia = client_id(&mut a);
    let ib = client_id(&mut b);
    assert_eq!(b.cmd_str(&["CLIENT", "SETNAME", "bee"]), "+OK\r\n");
    assert_eq!(b.cmd_str(&["SELECT", "2"]), "+OK\r\n");

    let list = text_of(&a.cmd_str(&["CLIENT", "LIST"]));
    let lines: Vec<&str> = list.lines().collect();
    assert!(list.ends_with('\n'), "{list:?}");
    let line_a = lines
        .iter()
        .find(|l| field(l, "id") == Some(&ia.to_string()))
        .expect("own line");
    let line_b = lines
        .iter()
        .find(|l| field(l, "id") == Some(&ib.to_string()))
        .expect("other line");
    for name in [
        "id", "addr", "laddr", "fd", "name", "age", "idle", "flags", "db", "sub", "psub", "multi",
        "qbuf", "obl", "oll", "omem", "events", "cmd", "user", "resp",
    ] {
        assert!(
            field(line_a, name).is_some(),
            "CLIENT LIST lacks {name}: {line_a}"
        );
    }
    assert_eq!(field(line_a, "cmd"), Some("client|list"), "{line_a}");
    assert_eq!(field(line_a, "user"), Some("default"));
    assert_eq!(field(line_b, "name"), Some("bee"), "{line_b}");
    assert_eq!(field(line_b, "db"), Some("2"), "{line_b}");
    assert_eq!(field(line_b, "cmd"), Some("select"), "{line_b}");
    let local = b.stream.local_addr().unwrap().to_string();
    assert_eq!(field(line_b, "addr"), Some(local.as_str()), "{line_b}");

    let only_b = text_of(&a.cmd_str(&["CLIENT", "LIST", "ID", &ib.to_string()]));
    assert_eq!(only_b.lines().count(), 1, "{only_b}");
    assert_eq!(
        field(only_b.trim_end(), "id"),
        Some(ib.to_string().as_str())
    );
    let normal = text_of(&a.cmd_str(&["CLIENT", "LIST", "TYPE", "normal"]));
    assert!(normal.lines().count() >= 2, "{normal}");
    let pubsub = text_of(&a.cmd_str(&["CLIENT", "LIST", "TYPE", "pubsub"]));
    assert_eq!(pubsub, "");
    assert_eq!(
        a.cmd_str(&["CLIENT", "LIST", "TYPE", "bogus"]),
        "-ERR Unknown client type 'bogus'\r\n"
    );

    let info = text_of(&b.cmd_str(&["CLIENT", "INFO"]));
    assert_eq!(info.lines().count(), 1, "{info}");
    assert!(info.ends_with('\n'));
    assert_eq!(field(info.trim_end(), "id"), Some(ib.to_string().as_str()));
    assert_eq!(field(info.trim_end(), "cmd"), Some("client|info"), "{info}");
    assert_eq!(field(info.trim_end(), "name"), Some("bee"));

    // In RESP3 CLIENT INFO and CLIENT LIST are verbatim strings.
    assert!(b.cmd_str(&["HELLO", "3"]).starts_with('%'));
    let v = b.cmd_str(&["CLIENT", "INFO"]);
    assert!(v.starts_with('='), "{v:?}");
    assert!(text_of(&v).contains(&format!("id={ib} ")), "{v:?}");
}

#[test]
fn client_kill_by_id_closes_the_other_connection() {
    let server = Kvasir::start(&[]);
    let mut killer = server.conn();
    let mut victim = server.raw_conn();
    let vid = client_id(&mut victim);
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(vid)
        .query(&mut killer)
        .unwrap();
    assert_eq!(killed, 1);
    let (bytes, closed) = victim.read_until_close(Duration::from_secs(5));
    assert!(closed, "killed connection was not closed");
    assert!(bytes.is_empty(), "{:?}", String::from_utf8_lossy(&bytes));

    // It disappears from CLIENT LIST, and killing it again finds nobody.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut killer).unwrap();
        if !list
            .lines()
            .any(|l| field(l, "id") == Some(&vid.to_string()))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "killed client still listed: {list}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let again: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(vid)
        .query(&mut killer)
        .unwrap();
    assert_eq!(again, 0);
    let e = query_err(
        &mut killer,
        redis::cmd("CLIENT").arg("KILL").arg("ID").arg(0),
    );
    assert_eq!(e, "ERR client-id should be greater than 0");
    // The killer's own connection is fine.
    let pong: String = redis::cmd("PING").query(&mut killer).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn client_kill_by_address() {
    let server = Kvasir::start(&[]);
    let mut killer = server.raw_conn();
    let mut old_style = server.raw_conn();
    let mut new_style = server.raw_conn();
    assert_eq!(old_style.cmd_str(&["PING"]), "+PONG\r\n");
    assert_eq!(new_style.cmd_str(&["PING"]), "+PONG\r\n");
    let addr1 = old_style.stream.local_addr().unwrap().to_string();
    let addr2 = new_style.stream.local_addr().unwrap().to_string();
    assert_eq!(killer.cmd_str(&["CLIENT", "KILL", &addr1]), "+OK\r\n");
    assert!(old_style.read_until_close(Duration::from_secs(5)).1);
    assert_eq!(
        killer.cmd_str(&["CLIENT", "KILL", "ADDR", &addr2]),
        ":1\r\n"
    );
    assert!(new_style.read_until_close(Duration::from_secs(5)).1);
    assert_eq!(
        killer.cmd_str(&["CLIENT", "KILL", "10.9.8.7:65000"]),
        "-ERR No such client\r\n"
    );
    // SKIPME defaults to yes: killing by our own address kills nobody.
    let own = killer.stream.local_addr().unwrap().to_string();
    assert_eq!(killer.cmd_str(&["CLIENT", "KILL", "ADDR", &own]), ":0\r\n");
    assert_eq!(killer.cmd_str(&["PING"]), "+PONG\r\n");
}

#[test]
fn client_no_evict_sets_the_e_flag() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    assert_eq!(r.cmd_str(&["CLIENT", "NO-EVICT", "on"]), "+OK\r\n");
    let info = text_of(&r.cmd_str(&["CLIENT", "INFO"]));
    assert!(
        field(info.trim_end(), "flags").unwrap().contains('e'),
        "{info}"
    );
    assert_eq!(r.cmd_str(&["CLIENT", "NO-EVICT", "OFF"]), "+OK\r\n");
    let info = text_of(&r.cmd_str(&["CLIENT", "INFO"]));
    assert!(
        !field(info.trim_end(), "flags").unwrap().contains('e'),
        "{info}"
    );
    let bad = r.cmd_str(&["CLIENT", "NO-EVICT", "maybe"]);
    assert!(bad.starts_with("-ERR"), "{bad}");
}

/// CLIENT SETINFO (Redis 7.2), which client libraries send after
/// connecting: shown by CLIENT INFO and CLIENT LIST, validated as names,
/// an empty value clears it.
#[test]
fn client_setinfo_names_the_library_in_client_list() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    let info = text_of(&r.cmd_str(&["CLIENT", "INFO"]));
    assert_eq!(field(&info, "lib-name"), Some(""), "{info}");
    assert_eq!(field(&info, "lib-ver"), Some(""), "{info}");
    assert_eq!(
        r.cmd_str(&["CLIENT", "SETINFO", "LIB-NAME", "redis-py(redis-om_v0.2)"]),
        "+OK\r\n"
    );
    assert_eq!(
        r.cmd_str(&["CLIENT", "SETINFO", "lib-ver", "5.0.1"]),
        "+OK\r\n"
    );
    let info = text_of(&r.cmd_str(&["CLIENT", "INFO"]));
    assert_eq!(
        field(&info, "lib-name"),
        Some("redis-py(redis-om_v0.2)"),
        "{info}"
    );
    assert_eq!(field(&info, "lib-ver"), Some("5.0.1"), "{info}");
    // Both fields end the line, after resp=, as in Redis 7.2.
    assert!(
        info.trim_end()
            .ends_with("resp=2 lib-name=redis-py(redis-om_v0.2) lib-ver=5.0.1"),
        "{info}"
    );
    let id = client_id(&mut r).to_string();
    let list = text_of(&r.cmd_str(&["CLIENT", "LIST", "ID", &id]));
    assert_eq!(field(&list, "lib-ver"), Some("5.0.1"), "{list}");
    assert_eq!(
        r.cmd_str(&["CLIENT", "SETINFO", "lib-name", "redis py"]),
        "-ERR lib-name cannot contain spaces, newlines or special characters.\r\n"
    );
    assert_eq!(
        r.cmd_str(&["CLIENT", "SETINFO", "LIB-VER", "1\n2"]),
        "-ERR LIB-VER cannot contain spaces, newlines or special characters.\r\n"
    );
    assert_eq!(
        r.cmd_str(&["CLIENT", "SETINFO", "badger", "x"]),
        "-ERR Unrecognized option 'badger'\r\n"
    );
    assert_eq!(
        r.cmd_str(&["CLIENT", "SETINFO", "lib-name"]),
        "-ERR wrong number of arguments for 'client|setinfo' command\r\n"
    );
    assert_eq!(r.cmd_str(&["CLIENT", "SETINFO", "lib-name", ""]), "+OK\r\n");
    let info = text_of(&r.cmd_str(&["CLIENT", "INFO"]));
    assert_eq!(field(&info, "lib-name"), Some(""), "{info}");
    assert_eq!(field(&info, "lib-ver"), Some("5.0.1"), "{info}");
}

/// CLIENT NO-TOUCH (Redis 7.2): the client's commands leave the keys' LRU
/// and LFU stamps as they are, except TOUCH; flag T in CLIENT INFO.
/// With `lfu-log-factor 0` every access adds one to OBJECT FREQ, so the
/// counts are exact.
#[test]
fn client_no_touch_leaves_the_access_stamps() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    assert_eq!(
        r.cmd_str(&["CONFIG", "SET", "lfu-log-factor", "0"]),
        "+OK\r\n"
    );
    assert_eq!(
        r.cmd_str(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]),
        "+OK\r\n"
    );
    assert_eq!(r.cmd_str(&["SET", "k", "v"]), "+OK\r\n");
    let freq = |r: &mut RawConn| -> i64 {
        let reply = r.cmd_str(&["OBJECT", "FREQ", "k"]);
        reply
            .trim_start_matches(':')
            .trim_end()
            .parse()
            .unwrap_or_else(|_| panic!("{reply}"))
    };
    let f0 = freq(&mut r);
    r.cmd_str(&["GET", "k"]);
    assert_eq!(freq(&mut r), f0 + 1, "a GET counts");
    assert_eq!(r.cmd_str(&["CLIENT", "NO-TOUCH", "on"]), "+OK\r\n");
    let info = text_of(&r.cmd_str(&["CLIENT", "INFO"]));
    assert!(field(&info, "flags").unwrap().contains('T'), "{info}");
    r.cmd_str(&["GET", "k"]);
    r.cmd_str(&["APPEND", "k", "w"]);
    r.cmd_str(&["EVAL", "return redis.call('GET', KEYS[1])", "1", "k"]);
    assert_eq!(freq(&mut r), f0 + 1, "nothing counted in no-touch mode");
    assert_eq!(r.cmd_str(&["TOUCH", "k"]), ":1\r\n");
    assert_eq!(freq(&mut r), f0 + 2, "TOUCH still counts");
    // Another client's access still counts.
    let mut other = server.raw_conn();
    other.cmd_str(&["GET", "k"]);
    assert_eq!(freq(&mut r), f0 + 3);
    assert_eq!(r.cmd_str(&["CLIENT", "NO-TOUCH", "OFF"]), "+OK\r\n");
    let info = text_of(&r.cmd_str(&["CLIENT", "INFO"]));
    assert!(!field(&info, "flags").unwrap().contains('T'), "{info}");
    r.cmd_str(&["GET", "k"]);
    assert_eq!(freq(&mut r), f0 + 4);
    assert_eq!(
        r.cmd_str(&["CLIENT", "NO-TOUCH", "maybe"]),
        "-ERR syntax error\r\n"
    );
}

#[test]
fn config_set_requirepass_applies_to_new_connections() {
    let server = Kvasir::start(&[]);
    let mut admin = server.raw_conn();
    assert_eq!(
        admin.cmd_str(&["CONFIG", "SET", "requirepass", "later"]),
        "+OK\r\n"
    );
    // Connections that were in keep working.
    assert_eq!(admin.cmd_str(&["PING"]), "+PONG\r\n");
    let mut fresh = server.raw_conn();
    assert_eq!(fresh.cmd_str(&["PING"]), NOAUTH);
    assert_eq!(fresh.cmd_str(&["AUTH", "later"]), "+OK\r\n");
    assert_eq!(fresh.cmd_str(&["PING"]), "+PONG\r\n");
    assert_eq!(
        admin.cmd_str(&["CONFIG", "SET", "requirepass", ""]),
        "+OK\r\n"
    );
    let mut open = server.raw_conn();
    assert_eq!(open.cmd_str(&["PING"]), "+PONG\r\n");
}

#[test]
fn idle_clients_are_closed_after_timeout() {
    let server = Kvasir::start(&[]);
    // One connection idle since before the setting changed, one opened after.
    let mut before = server.raw_conn();
    assert_eq!(before.cmd_str(&["PING"]), "+PONG\r\n");
    let mut admin = server.raw_conn();
    assert_eq!(admin.cmd_str(&["CONFIG", "SET", "timeout", "1"]), "+OK\r\n");
    let mut after = server.raw_conn();
    assert_eq!(after.cmd_str(&["PING"]), "+PONG\r\n");
    let (bytes, closed) = after.read_until_close(Duration::from_secs(5));
    assert!(closed, "idle connection not closed within 5 s of timeout=1");
    assert!(bytes.is_empty());
    let (_, closed) = before.read_until_close(Duration::from_secs(5));
    assert!(
        closed,
        "connection idle before CONFIG SET timeout was never closed"
    );
}

#[test]
fn busy_clients_survive_the_idle_timeout() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    assert_eq!(r.cmd_str(&["CONFIG", "SET", "timeout", "1"]), "+OK\r\n");
    let until = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < until {
        assert_eq!(r.cmd_str(&["PING"]), "+PONG\r\n");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `(qbuf + qbuf-free, rbs)` of the connection named `name` in CLIENT
/// LIST, as seen from `conn`.
fn buffers_of(conn: &mut redis::Connection, name: &str) -> (u64, u64) {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(conn)
        .expect("CLIENT LIST");
    let line = list
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))
        .unwrap_or_else(|| panic!("no client {name} in {list}"));
    let field = |f: &str| -> u64 {
        line.split(' ')
            .find_map(|kv| kv.strip_prefix(&format!("{f}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {f} in {line}"))
    };
    (field("qbuf") + field("qbuf-free"), field("rbs"))
}

/// A connection idle for 2 s gives its query buffer back, as redis-server
/// 7.0 frees an idle client's query buffer (checked on both side by side
/// through CLIENT LIST's qbuf and qbuf-free), and on Kvasir its reply
/// buffer too (rbs 0); the next requests, a large one included, are
/// served as before and the query buffer comes back.
#[test]
fn an_idle_connection_gives_its_buffers_back() {
    let (_redis, redis_port) = common::redis_server::start_redis();
    let kvasir = Kvasir::start(&[]);
    let open = |port: u16| {
        redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|c| c.get_connection())
            .expect("connect")
    };
    for (server, port) in [("redis-server", redis_port), ("kvasir", kvasir.port)] {
        let mut idle = open(port);
        let mut watcher = open(port);
        let _: () = redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg("idler")
            .query(&mut idle)
            .expect("SETNAME");
        let (qbuf, _) = buffers_of(&mut watcher, "idler");
        assert!(qbuf > 0, "{server}: no query buffer after a request");
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let (qbuf, rbs) = buffers_of(&mut watcher, "idler");
            if qbuf == 0 && (server == "redis-server" || rbs == 0) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{server}: buffers still held after 15 s idle: qbuf+free {qbuf}, rbs {rbs}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let big = "v".repeat(300_000);
        let _: () = redis::cmd("SET")
            .arg("big")
            .arg(&big)
            .query(&mut idle)
            .expect("SET after idle");
        let got: String = redis::cmd("GET").arg("big").query(&mut idle).expect("GET");
        assert_eq!(got.len(), big.len(), "{server}");
        let pong: String = redis::cmd("PING").query(&mut idle).expect("PING");
        assert_eq!(pong, "PONG");
        if server == "kvasir" {
            // The query buffer is back (the reply buffer too, but with I/O
            // threads each write hands it to the I/O thread, so rbs reads
            // 0 between writes there).
            let (qbuf, _) = buffers_of(&mut watcher, "idler");
            assert!(qbuf > 0, "query buffer not back: {qbuf}");
        }
    }
}

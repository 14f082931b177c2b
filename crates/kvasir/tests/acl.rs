//! ACL users end to end: ACL SETUSER rules and their errors, what a user
//! may run (commands, subcommands, first arguments, keys read and written,
//! channels, selectors), AUTH / HELLO AUTH, the ACL log, CLIENT KILL USER
//! and ACL DELUSER closing connections, `requirepass` as the default
//! user's password; replies checked side by side with redis-server 7.0
//! where the two describe rules alike, and in cluster mode.

#[path = "common/cluster.rs"]
mod cluster;
mod common;

use common::{err, q, Kvasir, RawConn};
use std::time::Duration;

/// The rules every side-by-side run sets up.
const USERS: &[&[&str]] = &[
    &[
        "ACL",
        "SETUSER",
        "app",
        "on",
        ">apppass",
        "~app:*",
        "&news.*",
        "+@read",
        "+@write",
        "-flushdb",
        "+publish",
        "+subscribe",
        "+psubscribe",
        "+multi",
        "+exec",
        "+config|get",
        "+select|0",
        "+client",
    ],
    &[
        "ACL", "SETUSER", "split", "on", "nopass", "%R~r:*", "%W~w:*", "~rw:*", "+@all",
    ],
    &[
        "ACL",
        "SETUSER",
        "sel",
        "on",
        "nopass",
        "+get",
        "~a:*",
        "(+set ~b:*)",
    ],
    &["ACL", "SETUSER", "off", "off", ">x", "+@all", "~*"],
];

/// Replies of one session: rules with errors, DRYRUN answers, commands
/// run as the users, failed logins, the log (without ages and client
/// lines, which differ by run).
fn session(port: u16) -> Vec<String> {
    let mut admin = RawConn::to_port(port);
    let mut out = Vec::new();
    for user in USERS {
        out.push(admin.cmd_str(user));
    }
    for bad in [
        &["ACL", "SETUSER", "bad", "foo"][..],
        &["ACL", "SETUSER", "bad", "#abc"],
        &["ACL", "SETUSER", "bad", "<nope"],
        &["ACL", "SETUSER", "bad", "~*", "~x"],
        &["ACL", "SETUSER", "bad", "&*", "&x"],
        &["ACL", "SETUSER", "bad", "+nosuch"],
        &["ACL", "SETUSER", "bad", "+@nosuch"],
        &["ACL", "SETUSER", "bad", "+config|nosuch"],
        &["ACL", "SETUSER", "bad", "-select|1"],
        &["ACL", "SETUSER", "bad", "get"],
        &["ACL", "SETUSER", "bad", "(+get"],
        &["ACL", "SETUSER", "bad", "(+get", "~x"],
        &["ACL", "SETUSER", "bad", "%X~a"],
        &["ACL", "SETUSER", "bad", "+config|get|x"],
        &["ACL", "SETUSER", "bad", "+get|a|b"],
        &["ACL", "CAT", "a", "b"],
        &["ACL", "HELP", "x"],
        &["ACL", "SETUSER", "b d"],
        &["ACL", "USERS"],
    ] {
        out.push(admin.cmd_str(bad));
    }
    for dry in [
        &["ACL", "DRYRUN", "app", "GET", "app:1"][..],
        &["ACL", "DRYRUN", "app", "GET", "other"],
        &["ACL", "DRYRUN", "app", "FLUSHDB"],
        &["ACL", "DRYRUN", "app", "CONFIG", "GET", "x"],
        &["ACL", "DRYRUN", "app", "CONFIG", "SET", "x", "y"],
        &["ACL", "DRYRUN", "app", "SELECT", "0"],
        &["ACL", "DRYRUN", "app", "SELECT", "1"],
        &["ACL", "DRYRUN", "app", "PUBLISH", "news.a", "m"],
        &["ACL", "DRYRUN", "app", "PUBLISH", "sport", "m"],
        &["ACL", "DRYRUN", "app", "PSUBSCRIBE", "news.*"],
        &["ACL", "DRYRUN", "app", "PSUBSCRIBE", "news.a*"],
        &["ACL", "DRYRUN", "app", "MSET", "app:1", "v", "x", "v"],
        &["ACL", "DRYRUN", "split", "GET", "r:1"],
        &["ACL", "DRYRUN", "split", "GET", "w:1"],
        &["ACL", "DRYRUN", "split", "SET", "w:1", "v"],
        &["ACL", "DRYRUN", "split", "SET", "r:1", "v"],
        &["ACL", "DRYRUN", "split", "SET", "w:1", "v", "GET"],
        &["ACL", "DRYRUN", "split", "INCR", "w:1"],
        &["ACL", "DRYRUN", "split", "INCR", "rw:1"],
        &["ACL", "DRYRUN", "split", "LPUSH", "w:1", "a"],
        &["ACL", "DRYRUN", "split", "LPOP", "w:1"],
        &["ACL", "DRYRUN", "split", "DEL", "w:1", "rw:2"],
        &[
            "ACL",
            "DRYRUN",
            "split",
            "SUNIONSTORE",
            "w:1",
            "r:1",
            "rw:1",
        ],
        &["ACL", "DRYRUN", "split", "SUNIONSTORE", "r:1", "w:1"],
        &["ACL", "DRYRUN", "split", "COPY", "r:1", "w:1"],
        &["ACL", "DRYRUN", "split", "EXPIRE", "w:1", "10"],
        &["ACL", "DRYRUN", "split", "ZADD", "w:1", "1", "m"],
        &["ACL", "DRYRUN", "split", "HINCRBY", "w:1", "f", "1"],
        &["ACL", "DRYRUN", "split", "SMOVE", "rw:1", "w:1", "m"],
        &["ACL", "DRYRUN", "split", "SMOVE", "w:1", "rw:1", "m"],
        &[
            "ACL", "DRYRUN", "split", "LMOVE", "rw:1", "w:2", "LEFT", "RIGHT",
        ],
        &["ACL", "DRYRUN", "split", "RENAME", "rw:1", "w:2"],
        &["ACL", "DRYRUN", "split", "RENAME", "r:1", "w:2"],
        &["ACL", "DRYRUN", "split", "PFMERGE", "rw:1", "r:1", "r:2"],
        &["ACL", "DRYRUN", "split", "PFMERGE", "w:1", "r:1"],
        &["ACL", "DRYRUN", "sel", "GET", "a:1"],
        &["ACL", "DRYRUN", "sel", "GET", "b:1"],
        &["ACL", "DRYRUN", "sel", "SET", "b:1", "v"],
        &["ACL", "DRYRUN", "sel", "SET", "a:1", "v"],
        &["ACL", "DRYRUN", "sel", "DEL", "a:1"],
        &["ACL", "DRYRUN", "nouser", "GET", "x"],
        &["ACL", "DRYRUN", "app", "nocmd"],
        &["ACL", "DRYRUN", "app", "GET"],
    ] {
        out.push(admin.cmd_str(dry));
    }
    out.push(admin.cmd_str(&["ACL", "LOG", "RESET"]));

    // Commands run as `app`: allowed, refused command, key, channel;
    // inside MULTI a refusal aborts EXEC.
    let mut app = RawConn::to_port(port);
    for args in [
        &["ACL", "WHOAMI"][..],
        &["AUTH", "app", "wrong"],
        &["AUTH", "app", "apppass"],
        &["SET", "app:1", "v"],
        &["GET", "app:1"],
        &["GET", "other"],
        &["HSET", "other", "f", "v"],
        &["FLUSHDB"],
        &["CONFIG", "SET", "maxmemory", "0"],
        &["PUBLISH", "sport", "m"],
        &["MULTI"],
        &["SET", "app:2", "v"],
        &["GET", "secret"],
        &["EXEC"],
        &["GET", "app:2"],
    ] {
        out.push(app.cmd_str(args));
    }
    let whoami = app.cmd_str(&["CLIENT", "LIST"]);
    out.push(whoami.contains("user=app").to_string());
    // An off user, an unknown user, HELLO AUTH.
    let mut other = RawConn::to_port(port);
    for args in [
        &["AUTH", "off", "x"][..],
        &["AUTH", "nobody", "x"],
        &["HELLO", "2", "AUTH", "nobody", "x"],
        &["AUTH", "only-a-password"],
        &["HELLO", "2", "AUTH", "split", "anything"],
        &["ACL", "WHOAMI"],
    ] {
        let reply = other.cmd_str(args);
        // HELLO's map holds the connection id, which differs by server.
        let masked = match reply.split_once("$2\r\nid\r\n") {
            Some((head, tail)) => {
                format!("{head}id <n>{}", &tail[tail.find("\r\n").unwrap_or(0)..])
            }
            None => reply,
        };
        out.push(masked);
    }
    // The log: reason, context, object, username and count of each entry.
    let mut log = admin.conn_log();
    out.append(&mut log);

    // CLIENT KILL USER and ACL DELUSER close the user's connections.
    out.push(admin.cmd_str(&["CLIENT", "KILL", "USER", "nosuch"]));
    out.push(admin.cmd_str(&["CLIENT", "KILL", "USER", "split"]));
    let (_, closed) = other.read_until_close(Duration::from_secs(5));
    out.push(format!("split's connection closed: {closed}"));
    out.push(admin.cmd_str(&["ACL", "DELUSER", "app", "sel", "nosuch"]));
    let (_, closed) = app.read_until_close(Duration::from_secs(5));
    out.push(format!("app's connection closed: {closed}"));
    out.push(admin.cmd_str(&["ACL", "USERS"]));
    out
}

trait LogLines {
    fn conn_log(&mut self) -> Vec<String>;
}

impl LogLines for RawConn {
    /// ACL LOG with each entry's changing fields (age, client line) left
    /// out.
    fn conn_log(&mut self) -> Vec<String> {
        let reply = self.cmd_str(&["ACL", "LOG"]);
        let lines: Vec<&str> = reply.split("\r\n").collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i];
            if line == "age-seconds" || line == "client-info" {
                i += 3;
                continue;
            }
            out.push(line.to_string());
            i += 1;
        }
        out
    }
}

#[test]
fn users_rules_and_refusals_answer_as_redis_does() {
    let (_redis, redis_port) = common::redis_server::start_redis();
    let server = Kvasir::start(&[]);
    let theirs = session(redis_port);
    let ours = session(server.port);
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a, b, "reply {i}: {:?}", &ours[i..]);
    }
    assert_eq!(ours.len(), theirs.len(), "{ours:?}\n{theirs:?}");
}

/// Command rules are described as given (Redis 7.2's form), keys and
/// channels as Redis 7.0 and 7.2 both do.
#[test]
fn getuser_and_list_describe_the_rules() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "u",
            "reset",
            "on",
            ">p1",
            "~a*",
            "%R~r*",
            "%W~w*",
            "&ch*",
            "+@hash",
            "-hset",
            "+get",
            "+config|get",
            "(+set %W~app*)",
        ],
    );
    let list: Vec<String> = q(&mut c, &["ACL", "LIST"]);
    assert_eq!(
        list,
        vec![
            "user default on nopass ~* &* +@all".to_string(),
            "user u on sanitize-payload #f64551fcd6f07823cb87971cfb91446425da18286b3ab1ef935e0cbd7a69f68a \
             ~a* %R~r* %W~w* resetchannels &ch* -@all +@hash -hset +get +config|get \
             (%W~app* resetchannels -@all +set)"
                .to_string(),
        ]
    );
    let user: Vec<redis::Value> = q(&mut c, &["ACL", "GETUSER", "u"]);
    let text = format!("{user:?}");
    for part in [
        "\"on\"",
        "\"sanitize-payload\"",
        "\"-@all +@hash -hset +get +config|get\"",
        "\"~a* %R~r* %W~w*\"",
        "\"&ch*\"",
        "\"-@all +set\"",
        "\"%W~app*\"",
    ] {
        assert!(text.contains(part), "{part} missing from {text}");
    }
    // A later rule on the same command replaces the earlier one.
    let _: () = q(&mut c, &["ACL", "SETUSER", "u", "-config", "+hset"]);
    let user: Vec<redis::Value> = q(&mut c, &["ACL", "GETUSER", "u"]);
    assert!(format!("{user:?}").contains("\"-@all +@hash +get -config +hset\""));
    // A failing rule leaves the user as it was.
    assert!(err(&mut c, &["ACL", "SETUSER", "u", "off", "+nosuch"]).contains("+nosuch"));
    let list: Vec<String> = q(&mut c, &["ACL", "LIST"]);
    assert!(list[1].starts_with("user u on "), "{list:?}");
}

/// `requirepass` is the default user's password: new connections must
/// AUTH, and clearing it opens connections that never did, as in Redis.
#[test]
fn requirepass_is_the_default_users_password() {
    let server = Kvasir::start(&["--requirepass", "s3cret"]);
    let mut c = RawConn::to_port(server.port);
    assert_eq!(
        c.cmd_str(&["GET", "k"]),
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(
        c.cmd_str(&["AUTH", "default", "nope"]),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    let mut admin = RawConn::to_port(server.port);
    assert_eq!(admin.cmd_str(&["AUTH", "s3cret"]), "+OK\r\n");
    assert_eq!(
        admin.cmd_str(&["CONFIG", "SET", "requirepass", ""]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd_str(&["GET", "k"]), "$-1\r\n");
    // ACL SETUSER default can close the door again.
    assert_eq!(
        admin.cmd_str(&["ACL", "SETUSER", "default", "resetpass", ">two"]),
        "+OK\r\n"
    );
    let mut fresh = RawConn::to_port(server.port);
    assert_eq!(
        fresh.cmd_str(&["PING"]),
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(fresh.cmd_str(&["AUTH", "two"]), "+OK\r\n");
    assert_eq!(fresh.cmd_str(&["PING"]), "+PONG\r\n");
}

/// In cluster mode each node checks its own users before routing, as
/// Redis Cluster does (users are node-local).
#[test]
fn cluster_nodes_check_their_users_before_routing() {
    let c = cluster::Cluster::start(&[]);
    let port = c.port(1);
    let mut admin = RawConn::to_port(port);
    assert_eq!(
        admin.cmd_str(&["ACL", "SETUSER", "reader", "on", ">pw", "~pub:*", "+get", "+cluster"]),
        "+OK\r\n"
    );
    let mut r = RawConn::to_port(port);
    assert_eq!(r.cmd_str(&["AUTH", "reader", "pw"]), "+OK\r\n");
    assert_eq!(
        r.cmd_str(&["SET", "pub:1", "v"]),
        "-NOPERM this user has no permissions to run the 'set' command\r\n"
    );
    assert_eq!(
        r.cmd_str(&["GET", "secret"]),
        "-NOPERM this user has no permissions to access one of the keys used as arguments\r\n"
    );
    // Allowed: answered here or redirected to the slot's leader.
    let reply = r.cmd_str(&["GET", "pub:1"]);
    assert!(reply == "$-1\r\n" || reply.starts_with("-MOVED"), "{reply}");
    // Another node does not know the user.
    let mut elsewhere = RawConn::to_port(c.port(2));
    assert_eq!(
        elsewhere.cmd_str(&["AUTH", "reader", "pw"]),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
}

/// redis.conf's `user` lines make users at start; a bad rule stops the
/// start with the line and the reason.
#[test]
fn redis_conf_user_lines_make_users() {
    let dir = common::temp_dir();
    let conf = dir.join("redis.conf");
    std::fs::write(
        &conf,
        "user alice on >pw ~a:* +get +set\nuser default on nopass ~* &* +@all\n",
    )
    .expect("write redis.conf");
    let server = Kvasir::start_with_file(Some(&conf), &[]);
    let mut c = RawConn::to_port(server.port);
    let list = c.cmd_str(&["ACL", "LIST"]);
    assert!(
        list.contains("user alice on #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 ~a:* resetchannels -@all +get +set"),
        "{list}"
    );
    assert_eq!(c.cmd_str(&["AUTH", "alice", "pw"]), "+OK\r\n");
    assert_eq!(c.cmd_str(&["SET", "a:1", "v"]), "+OK\r\n");
    assert_eq!(
        c.cmd_str(&["DEL", "a:1"]),
        "-NOPERM this user has no permissions to run the 'del' command\r\n"
    );
    drop(server);

    std::fs::write(&conf, "user bob on nopass +nosuch\n").expect("write redis.conf");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kvasir"))
        .arg("server")
        .arg(&conf)
        .args(["--port", "0", "--bind", "127.0.0.1", "--dir"])
        .arg(&dir)
        .output()
        .expect("run kvasir");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Error in user declaration 'bob'") && stderr.contains("+nosuch"),
        "{stderr}"
    );
    // A user declared twice stops the start, default included (Redis's
    // text; the suite's "loading duplicate users in config on startup").
    for user in ["foo", "default"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kvasir"))
            .args(["server", "--port", "0", "--bind", "127.0.0.1", "--dir"])
            .arg(&dir)
            .args(["--user", user, "--user", user])
            .output()
            .expect("run kvasir");
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "Error in user declaration '{user}': Duplicate user found"
            )),
            "{stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Subscribers lose their connection when their user may no longer use a
/// channel or pattern they are subscribed to, and keep it while every
/// subscription stays allowed.
#[test]
fn subscribers_are_closed_when_their_channels_are_revoked() {
    let server = Kvasir::start(&[]);
    let mut admin = RawConn::to_port(server.port);
    assert_eq!(
        admin.cmd_str(&[
            "ACL",
            "SETUSER",
            "ps",
            "on",
            "nopass",
            "+@all",
            "resetchannels",
            "&foo:1",
            "&bar:*"
        ]),
        "+OK\r\n"
    );
    let mut sub = RawConn::to_port(server.port);
    assert_eq!(sub.cmd_str(&["AUTH", "ps", "x"]), "+OK\r\n");
    assert_eq!(sub.cmd_str(&["CLIENT", "SETNAME", "watched"]), "+OK\r\n");
    assert!(sub.cmd_str(&["SUBSCRIBE", "foo:1"]).contains("subscribe"));
    assert!(sub.cmd_str(&["PSUBSCRIBE", "bar:*"]).contains("psubscribe"));
    assert!(sub
        .cmd_str(&["PSUBSCRIBE", "bar:baz"])
        .starts_with("-NOPERM this user has no permissions to access one of the channels"));
    // Widening keeps it.
    assert_eq!(
        admin.cmd_str(&[
            "ACL",
            "SETUSER",
            "ps",
            "resetchannels",
            "&foo:1",
            "&bar:*",
            "&more"
        ]),
        "+OK\r\n"
    );
    assert!(admin.cmd_str(&["CLIENT", "LIST"]).contains("name=watched"));
    // Taking the pattern away closes it.
    assert_eq!(
        admin.cmd_str(&["ACL", "SETUSER", "ps", "resetchannels", "&foo:1"]),
        "+OK\r\n"
    );
    let (_, closed) = sub.read_until_close(Duration::from_secs(5));
    assert!(closed, "the subscriber was not closed");
    assert!(!admin.cmd_str(&["CLIENT", "LIST"]).contains("name=watched"));
}

/// `aclfile`: users read at start, ACL SAVE writes ACL LIST's lines, ACL
/// LOAD replaces every user or, with any bad line, none (Redis's error
/// text) and closes the connections of every user but default; side by
/// side with redis-server.
#[test]
fn acl_file_load_and_save_answer_as_redis_does() {
    let initial = "user alice on >pw ~a* +get\nuser default on nopass ~* &* +@all\n";
    let session = |port: u16, dir: &std::path::Path| {
        let file = dir.join("users.acl");
        let mut c = RawConn::to_port(port);
        let mut out = vec![c.cmd_str(&["ACL", "LIST"])];
        out.push(c.cmd_str(&["ACL", "SETUSER", "bob", "on", "nopass", "+@all"]));
        out.push(c.cmd_str(&["ACL", "SAVE"]));
        out.push(std::fs::read_to_string(&file).unwrap_or_default());
        let mut bad = initial.to_string();
        bad.push_str("user carl on +nosuch\nuser \"x y\" on\nuser alice off\njunk\nuser\n");
        std::fs::write(&file, bad).expect("write users.acl");
        out.push(c.cmd_str(&["ACL", "LOAD"]));
        out.push(c.cmd_str(&["ACL", "USERS"]));
        let mut bob_conn = RawConn::to_port(port);
        out.push(bob_conn.cmd_str(&["AUTH", "bob", "x"]));
        // alice stays in the file: Redis 7.0 closes her connections too
        // (every user but default is freed on a load).
        let mut alice_conn = RawConn::to_port(port);
        out.push(alice_conn.cmd_str(&["AUTH", "alice", "pw"]));
        std::fs::write(&file, initial).expect("write users.acl");
        out.push(c.cmd_str(&["ACL", "LOAD"]));
        out.push(c.cmd_str(&["ACL", "USERS"]));
        let (_, closed) = bob_conn.read_until_close(Duration::from_secs(5));
        out.push(format!("bob's connection closed: {closed}"));
        let (_, closed) = alice_conn.read_until_close(Duration::from_secs(5));
        out.push(format!("alice's connection closed: {closed}"));
        out.push(c.cmd_str(&["PING"]));
        out
    };
    let redis_dir = common::temp_dir();
    std::fs::write(redis_dir.join("users.acl"), initial).expect("write users.acl");
    let (_redis, redis_port) =
        common::redis_server::start_redis_in(Some(&redis_dir), &["--aclfile", "users.acl"]);
    let theirs = session(redis_port, &redis_dir);
    let dir = common::temp_dir();
    std::fs::write(dir.join("users.acl"), initial).expect("write users.acl");
    let server = Kvasir::start_in(&dir, &["--aclfile", "users.acl"]);
    let ours = session(server.port, &dir);
    assert_eq!(ours, theirs);
    drop(server);

    // A missing file stops the start.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kvasir"))
        .args(["server", "--port", "0", "--bind", "127.0.0.1", "--dir"])
        .arg(&dir)
        .args(["--aclfile", "missing.acl"])
        .output()
        .expect("run kvasir");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("Error loading ACLs, opening file 'missing.acl'"));
    for d in [redis_dir, dir] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// A restricted user's scripts have every `redis.call` checked against
/// the user's rules (standalone), with Redis's errors and `lua` log
/// entries; side by side with redis-server.
#[test]
fn script_calls_are_checked_against_the_callers_user() {
    let session = |port: u16| {
        let mut admin = RawConn::to_port(port);
        let mut out = vec![admin.cmd_str(&[
            "ACL", "SETUSER", "sc", "on", "nopass", "~k*", "&c*", "+eval", "+evalsha", "+get",
            "+multi", "+exec", "+publish",
        ])];
        out.push(admin.cmd_str(&["ACL", "LOG", "RESET"]));
        let mut c = RawConn::to_port(port);
        for args in [
            &["AUTH", "sc", "x"][..],
            &["EVAL", "return redis.call('set','k1','v')", "0"],
            &["EVAL", "return redis.call('get','zz')", "0"],
            &["EVAL", "return redis.pcall('set','k1','v')", "0"],
            &["EVAL", "return redis.call('publish','zz','m')", "0"],
            &["EVAL", "return redis.call('get','k1')", "0"],
            &["EVAL", "return redis.call('get',KEYS[1])", "1", "zz"],
            &["EVAL", "return redis.acl_check_cmd('set','k1','v')", "0"],
            &["EVAL", "return redis.acl_check_cmd('get','k1')", "0"],
            &["EVAL", "return redis.acl_check_cmd('get','zz')", "0"],
            &["EVAL", "return redis.acl_check_cmd('nosuch')", "0"],
            // Numbers as redis.call takes them (the 1 was dropped, and SET
            // with two arguments was called invalid); no arguments, a table.
            &["EVAL", "return redis.acl_check_cmd('set','k1',1)", "0"],
            &["EVAL", "return redis.acl_check_cmd('set','zz',1.5)", "0"],
            &["EVAL", "return redis.acl_check_cmd()", "0"],
            &["EVAL", "return redis.acl_check_cmd('set','k1',{})", "0"],
            &["MULTI"],
            &["EVAL", "return redis.call('set','k2','v')", "0"],
            &["EXEC"],
        ] {
            out.push(c.cmd_str(args));
        }
        out.append(&mut admin.conn_log());
        out
    };
    let (_redis, redis_port) = common::redis_server::start_redis();
    let server = Kvasir::start(&[]);
    let theirs = session(redis_port);
    let ours = session(server.port);
    assert_eq!(ours, theirs);
}

/// In cluster mode a restricted user's script carries the user's
/// permissions in its log entry: each call is checked on every replica, a
/// refused write writes nothing anywhere, and replicas stay identical.
#[test]
fn cluster_scripts_are_checked_against_the_callers_user() {
    let mut c = cluster::Cluster::start(&[]);
    let key = "{acl}a1";
    let leader = c.wait_leader_of_slot(cluster::key_slot(key.as_bytes()), Duration::from_secs(10));
    let mut admin = RawConn::to_port(c.port(leader));
    assert_eq!(
        admin.cmd_str(&[
            "ACL", "SETUSER", "sc", "on", "nopass", "~{acl}a*", "+eval", "+get", "+multi", "+exec"
        ]),
        "+OK\r\n"
    );
    let mut u = RawConn::to_port(c.port(leader));
    assert_eq!(u.cmd_str(&["AUTH", "sc", "x"]), "+OK\r\n");
    let set = u.cmd_str(&["EVAL", "return redis.call('set', KEYS[1], 'v')", "1", key]);
    assert!(
        set.starts_with("-ERR The user executing the script can't run this command or subcommand"),
        "{set}"
    );
    let other = u.cmd_str(&["EVAL", "return redis.call('get', KEYS[1])", "1", "{acl}b1"]);
    assert!(
        other.starts_with("-NOPERM this user has no permissions to access one of the keys"),
        "{other}"
    );
    let inside = u.cmd_str(&["EVAL", "return redis.call('get', '{acl}b1')", "1", key]);
    assert!(
        inside.starts_with(
            "-ERR The user executing the script can't access at least one of the keys"
        ),
        "{inside}"
    );
    assert_eq!(
        u.cmd_str(&["EVAL", "return redis.call('get', KEYS[1])", "1", key]),
        "$-1\r\n"
    );
    // A script without keys runs on a shard this node leads: checked too.
    let keyless = u.cmd_str(&["EVAL", "return redis.call('set', '{acl}a2', 'v')", "0"]);
    assert!(
        keyless.starts_with("-ERR The user executing the script"),
        "{keyless}"
    );
    // Inside MULTI.
    assert_eq!(u.cmd_str(&["MULTI"]), "+OK\r\n");
    assert_eq!(
        u.cmd_str(&["EVAL", "return redis.call('set', KEYS[1], 'v')", "1", key]),
        "+QUEUED\r\n"
    );
    let exec = u.cmd_str(&["EXEC"]);
    assert!(
        exec.starts_with("*1\r\n-ERR The user executing the script"),
        "{exec}"
    );
    // The default user's script writes; nothing the refused ones tried is there.
    assert_eq!(
        admin.cmd_str(&["EVAL", "return redis.call('set', KEYS[1], 'ok')", "1", key]),
        "+OK\r\n"
    );
    // Rules changed between MULTI and EXEC: checked again at EXEC.
    assert_eq!(u.cmd_str(&["MULTI"]), "+OK\r\n");
    assert_eq!(u.cmd_str(&["GET", key]), "+QUEUED\r\n");
    assert_eq!(u.cmd_str(&["GET", "{acl}a3"]), "+QUEUED\r\n");
    assert_eq!(
        admin.cmd_str(&["ACL", "SETUSER", "sc", "resetkeys", "~{acl}a3"]),
        "+OK\r\n"
    );
    let exec = u.cmd_str(&["EXEC"]);
    assert!(
        exec.starts_with("*2\r\n-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call.")
            && exec.ends_with("$-1\r\n"),
        "{exec}"
    );
    for id in 1..=3 {
        let mut r = RawConn::to_port(c.port(id));
        assert_eq!(r.cmd_str(&["READONLY"]), "+OK\r\n");
        assert!(
            cluster::wait_until(Duration::from_secs(5), || r.cmd_str(&["GET", key])
                == "$2\r\nok\r\n"),
            "node {id}"
        );
        assert_eq!(r.cmd_str(&["EXISTS", "{acl}a2"]), ":0\r\n", "node {id}");
    }
}

/// SORT's BY and GET patterns read keys the key patterns cannot see: only
/// a user allowed every key may use them (side by side with redis-server;
/// in MULTI Kvasir refuses them when queued, Redis inside EXEC's reply).
#[test]
fn sort_patterns_need_access_to_every_key() {
    let session = |port: u16| {
        let mut admin = RawConn::to_port(port);
        let mut out = vec![
            admin.cmd_str(&["ACL", "SETUSER", "srt", "on", "nopass", "~l*", "+@all"]),
            admin.cmd_str(&["DEL", "l1"]),
            admin.cmd_str(&["RPUSH", "l1", "b", "a"]),
        ];
        let mut u = RawConn::to_port(port);
        for args in [
            &["AUTH", "srt", "x"][..],
            &["SORT", "l1", "ALPHA"],
            &["SORT", "l1", "BY", "nosort"],
            &["SORT", "l1", "BY", "w_*"],
            &["SORT", "l1", "GET", "#"],
            &["SORT", "l1", "LIMIT", "0", "1", "GET", "x"],
            &["SORT_RO", "l1", "GET", "#"],
            &[
                "EVAL",
                "return redis.pcall('sort', KEYS[1], 'GET', 'x_*')",
                "1",
                "l1",
            ],
        ] {
            out.push(u.cmd_str(args));
        }
        out
    };
    let (_redis, redis_port) = common::redis_server::start_redis();
    let server = Kvasir::start(&[]);
    assert_eq!(session(server.port), session(redis_port));
}

/// A queued command is checked again at EXEC: if the user's rules changed
/// since, that command answers Redis's NOPERM inside EXEC's array and the
/// others run (side by side with redis-server).
#[test]
fn exec_checks_queued_commands_again() {
    let session = |port: u16| {
        let mut admin = RawConn::to_port(port);
        let mut out = vec![
            admin.cmd_str(&[
                "ACL", "SETUSER", "ex", "reset", "on", "nopass", "~k*", "+@all",
            ]),
            admin.cmd_str(&["ACL", "LOG", "RESET"]),
        ];
        let mut u = RawConn::to_port(port);
        for args in [
            &["AUTH", "ex", "x"][..],
            &["MULTI"],
            &["SET", "k1", "v"],
            &["INCR", "k2"],
            &["GET", "k3"],
            &["GET", "k1"],
        ] {
            out.push(u.cmd_str(args));
        }
        out.push(admin.cmd_str(&["ACL", "SETUSER", "ex", "-incr", "resetkeys", "~k1"]));
        out.push(u.cmd_str(&["EXEC"]));
        out.push(admin.cmd_str(&["GET", "k1"]));
        out.append(&mut admin.conn_log());
        out
    };
    let (_redis, redis_port) = common::redis_server::start_redis();
    let server = Kvasir::start(&[]);
    assert_eq!(session(server.port), session(redis_port));
}

/// An ACL file whose users grant `&*` loads under `acl-pubsub-default
/// allchannels` (a new user starts with every channel, and `&*` repeats
/// it), as redis-server loads Redis's own test file.
#[test]
fn acl_file_with_all_channels_loads_under_allchannels_default() {
    let users = "user alice on allcommands allkeys &* >alice\nuser bob on -@all +@set +acl ~set* &* >bob\nuser default on nopass ~* &* +@all\n";
    let flags = [
        "--aclfile",
        "users.acl",
        "--acl-pubsub-default",
        "allchannels",
    ];
    let redis_dir = common::temp_dir();
    std::fs::write(redis_dir.join("users.acl"), users).expect("write users.acl");
    let (_redis, redis_port) = common::redis_server::start_redis_in(Some(&redis_dir), &flags);
    let theirs = RawConn::to_port(redis_port).cmd_str(&["ACL", "LIST"]);
    let dir = common::temp_dir();
    std::fs::write(dir.join("users.acl"), users).expect("write users.acl");
    let server = Kvasir::start_in(&dir, &flags);
    let ours = RawConn::to_port(server.port).cmd_str(&["ACL", "LIST"]);
    assert!(ours.contains("user bob on"), "{ours}");
    assert_eq!(ours, theirs);
    let _ = std::fs::remove_dir_all(&redis_dir);
    let _ = std::fs::remove_dir_all(&dir);
}

//! A standalone server loading its data at start, as redis-server: the
//! port is open during the load, commands without the `loading` flag are
//! answered -LOADING, INFO tells the progress, a shutdown asked for
//! during the load does not save the half-loaded data. And DEBUG
//! POPULATE, which Redis's own tests use to make that data.

mod common;

use common::{error_text, q, threads_args, ChildGuard, Kvasir};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn info_field(info: &str, name: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|v| v.trim().to_string())
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

/// `kvasir server` in `dir` on `port`, not waiting for anything.
fn spawn_in(dir: &std::path::Path, port: u16, extra: &[&str]) -> ChildGuard {
    let child = Command::new(env!("CARGO_BIN_EXE_kvasir"))
        .args(["server", "--port", &port.to_string(), "--bind", "127.0.0.1"])
        .arg("--dir")
        .arg(dir)
        .args(["--enable-debug-command", "yes"])
        .args(threads_args(extra))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn kvasir");
    ChildGuard(Some(child))
}

/// The server's exit status, once it exited on its own (bounded wait).
fn exited(server: &mut ChildGuard) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(10);
    while matches!(server.child().try_wait(), Ok(None)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    server.child().try_wait().expect("wait").expect("exited")
}

/// A connection once the port accepts one (bounded wait).
fn connect(port: u16) -> redis::Connection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match client.get_connection() {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => panic!("no connection: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

#[test]
fn debug_populate_makes_keys_as_redis_does() {
    let server = Kvasir::start(&["--enable-debug-command", "yes"]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "key:1", "mine"]);
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "1000"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1000);
    // A key that exists is left as it is.
    assert_eq!(q::<String>(&mut c, &["GET", "key:1"]), "mine");
    assert_eq!(q::<String>(&mut c, &["GET", "key:999"]), "value:999");
    // With a prefix and a size: cut or padded with zero bytes.
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "3", "p", "10"]);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "p:2"]), b"value:2\0\0\0");
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "3", "short", "3"]);
    assert_eq!(q::<String>(&mut c, &["GET", "short:0"]), "val");
    // In the connection's database.
    let _: () = q(&mut c, &["SELECT", "2"]);
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "5"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 5);
    for (args, expected) in [
        (
            vec!["DEBUG", "POPULATE", "-1"],
            "ERR value is out of range, must be positive",
        ),
        (
            vec!["DEBUG", "POPULATE", "x"],
            "ERR value is not an integer or out of range",
        ),
        (
            vec!["DEBUG", "POPULATE", "1", "k", "-5"],
            "ERR value is out of range, must be positive",
        ),
    ] {
        let e = redis::cmd(args[0])
            .arg(&args[1..])
            .query::<()>(&mut c)
            .expect_err("refused");
        assert_eq!(error_text(&e), expected, "{args:?}");
    }
}

#[test]
fn clients_are_answered_loading_while_the_data_loads() {
    let dir = common::temp_dir();
    let digest = {
        let server = Kvasir::start_in(&dir, &["--enable-debug-command", "yes"]);
        let mut c = server.conn();
        let _: () = q(&mut c, &["DEBUG", "POPULATE", "20000", "key", "200"]);
        let _: () = q(&mut c, &["SAVE"]);
        q::<String>(&mut c, &["DEBUG", "DIGEST"])
    };
    let dump = dir.join("dump.rdb");
    let saved = std::fs::read(&dump).expect("dump.rdb");

    // 20,000 keys at 1 ms each: the load takes 20 s unless stopped.
    let port = free_port();
    let mut slow = spawn_in(
        &dir,
        port,
        &[
            "--key-load-delay",
            "1000",
            "--loading-process-events-interval-bytes",
            "1024",
        ],
    );
    let mut c = connect(port);
    let info: String = q(&mut c, &["INFO", "persistence"]);
    assert_eq!(info_field(&info, "loading").as_deref(), Some("1"), "{info}");
    assert_eq!(
        info_field(&info, "loading_total_bytes"),
        Some(saved.len().to_string())
    );
    let loaded: u64 = info_field(&info, "loading_loaded_bytes")
        .and_then(|v| v.parse().ok())
        .expect("loading_loaded_bytes");
    assert!(loaded < saved.len() as u64, "{info}");
    for args in [
        vec!["PING"],
        vec!["GET", "key:1"],
        vec!["DBSIZE"],
        vec!["SAVE"],
        vec!["CONFIG", "SET", "dir", "/tmp"],
        vec!["DEBUG", "RELOAD"],
    ] {
        let e = redis::cmd(args[0])
            .arg(&args[1..])
            .query::<()>(&mut c)
            .expect_err("refused while loading");
        assert_eq!(
            error_text(&e),
            "LOADING Redis is loading the dataset in memory",
            "{args:?}"
        );
    }
    // Commands flagged `loading` are served.
    let _: () = q(&mut c, &["CONFIG", "SET", "loglevel", "debug"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "loglevel"]),
        ["loglevel", "debug"]
    );
    let _: () = q(&mut c, &["CLIENT", "SETNAME", "waiting"]);
    // A transaction with a refused command fails at EXEC.
    let _: () = q(&mut c, &["MULTI"]);
    assert!(redis::cmd("GET").arg("key:1").query::<()>(&mut c).is_err());
    let e = redis::cmd("EXEC").query::<()>(&mut c).expect_err("aborted");
    assert!(error_text(&e).starts_with("EXECABORT"), "{e}");
    // SHUTDOWN SAVE during the load exits without saving a dataset half in.
    let _ = redis::cmd("SHUTDOWN").arg("SAVE").query::<()>(&mut c);
    let status = exited(&mut slow);
    assert!(status.success(), "{status:?}");
    assert!(
        std::fs::read(&dump).expect("dump.rdb") == saved,
        "the dump was not overwritten"
    );

    // Without the delay the same file loads whole.
    let port = free_port();
    let _server = spawn_in(&dir, port, &[]);
    let mut c = connect(port);
    let deadline = Instant::now() + Duration::from_secs(30);
    while redis::cmd("PING").query::<String>(&mut c).is_err() {
        assert!(Instant::now() < deadline, "still loading");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 20000);
    assert_eq!(q::<String>(&mut c, &["DEBUG", "DIGEST"]), digest);
    let info: String = q(&mut c, &["INFO", "persistence"]);
    assert_eq!(info_field(&info, "loading").as_deref(), Some("0"));
    assert_eq!(
        info_field(&info, "rdb_last_load_keys_loaded").as_deref(),
        Some("20000")
    );
    assert_eq!(info_field(&info, "loading_total_bytes"), None);
    drop(_server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigterm_during_the_load_exits_without_saving() {
    let dir = common::temp_dir();
    {
        let server = Kvasir::start_in(&dir, &["--enable-debug-command", "yes"]);
        let mut c = server.conn();
        let _: () = q(&mut c, &["DEBUG", "POPULATE", "5000"]);
        let _: () = q(&mut c, &["SAVE"]);
    }
    let dump = dir.join("dump.rdb");
    let saved = std::fs::read(&dump).expect("dump.rdb");
    let port = free_port();
    // Save points that a shutdown would honour after a whole load.
    let mut slow = spawn_in(
        &dir,
        port,
        &[
            "--save",
            "3600 1",
            "--key-load-delay",
            "2000",
            "--loading-process-events-interval-bytes",
            "1024",
        ],
    );
    let mut c = connect(port);
    let info: String = q(&mut c, &["INFO", "persistence"]);
    assert_eq!(info_field(&info, "loading").as_deref(), Some("1"), "{info}");
    let pid = slow.child().id() as libc::pid_t;
    // SAFETY: kill(2) on the pid of a child this test spawned and has not
    // reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = exited(&mut slow);
    assert!(status.success(), "{status:?}");
    assert!(std::fs::read(&dump).expect("dump.rdb") == saved);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The append-only file too: its commands replay in steps, clients are
/// answered -LOADING meanwhile.
#[test]
fn clients_are_answered_loading_while_the_append_only_file_replays() {
    let dir = common::temp_dir();
    let aof = ["--appendonly", "yes"];
    let keys = {
        let server = Kvasir::start_in(&dir, &aof);
        let mut c = server.conn();
        let mut fill = redis::pipe();
        let value = "v".repeat(200);
        for i in 0..5000 {
            fill.cmd("SET").arg(format!("key:{i}")).arg(&value).ignore();
        }
        let _: () = fill.query(&mut c).expect("fill");
        let _: i64 = q(&mut c, &["DEL", "key:0"]);
        q::<i64>(&mut c, &["DBSIZE"])
    };
    let port = free_port();
    let mut slow = spawn_in(
        &dir,
        port,
        &[
            "--appendonly",
            "yes",
            "--key-load-delay",
            "1000",
            "--loading-process-events-interval-bytes",
            "1024",
        ],
    );
    let mut c = connect(port);
    let info: String = q(&mut c, &["INFO", "persistence"]);
    assert_eq!(info_field(&info, "loading").as_deref(), Some("1"), "{info}");
    let e = redis::cmd("GET")
        .arg("key:1")
        .query::<()>(&mut c)
        .expect_err("refused while loading");
    assert_eq!(
        error_text(&e),
        "LOADING Redis is loading the dataset in memory"
    );
    let pid = slow.child().id() as libc::pid_t;
    // SAFETY: kill(2) on the pid of a child this test spawned and has not
    // reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    exited(&mut slow);

    let port = free_port();
    let _server = spawn_in(&dir, port, &aof);
    let mut c = connect(port);
    let deadline = Instant::now() + Duration::from_secs(30);
    while redis::cmd("PING").query::<String>(&mut c).is_err() {
        assert!(Instant::now() < deadline, "still loading");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), keys);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "key:0"]), 0);
    drop(_server);
    let _ = std::fs::remove_dir_all(&dir);
}

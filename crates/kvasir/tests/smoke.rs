//! Start-up, shutdown and the most basic round trip over RESP2 and RESP3.

mod common;

use common::Kvasir;
use std::time::Duration;

#[test]
fn ping_set_get_over_resp2_and_resp3() {
    let server = Kvasir::start(&[]);
    let mut c2 = server.conn();
    let pong: String = redis::cmd("PING").query(&mut c2).expect("ping");
    assert_eq!(pong, "PONG");
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut c2)
        .expect("set");
    let v: String = redis::cmd("GET").arg("k").query(&mut c2).expect("get");
    assert_eq!(v, "v");

    let mut c3 = server.client_resp3().get_connection().expect("resp3");
    let v: String = redis::cmd("GET")
        .arg("k")
        .query(&mut c3)
        .expect("get resp3");
    assert_eq!(v, "v");
    let missing: Option<String> = redis::cmd("GET").arg("nope").query(&mut c3).expect("nil");
    assert_eq!(missing, None);
}

#[test]
fn shutdown_command_stops_the_process() {
    let mut server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _ = redis::cmd("SHUTDOWN").query::<()>(&mut c);
    let status = server.wait_exit(Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| s.success()),
        "kvasir did not exit cleanly"
    );
}

#[test]
fn sigterm_stops_the_process_gracefully() {
    let mut server = Kvasir::start(&[]);
    let pid = server.child.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = server.wait_exit(Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| s.success()),
        "kvasir did not exit cleanly on SIGTERM"
    );
}

//! Paused scripts (a standalone server's busy-reply-threshold): a run
//! allowed to pause yields from its step hook wherever Lua 5.1 lets a hook
//! yield, resumes where it stopped with the same result as a run straight
//! through (also inside `pcall` and coroutines), never pauses inside a C
//! call such as a `table.sort` comparator, ends at once when
//! killed, and a store without the setting (every Raft replica) never
//! pauses.

mod common;

use kvasir_core::error::CmdError;
use kvasir_core::{Ctx, Store};
use kvasir_resp::Reply;
use std::time::Duration;

const CTX: Ctx = Ctx { now_ms: 1, seed: 2 };

/// Starts `args` on a store whose scripts pause at once (the first hook
/// call past the threshold).
fn start_pausing(store: &mut Store, args: &[&str]) -> Result<Reply, CmdError> {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    store.script_pause_after = Some(Duration::ZERO);
    let first = store.apply(0, &common::to_args(&args), &CTX);
    store.script_pause_after = None;
    first
}

/// Runs `args` on a store whose scripts pause at once; returns the final
/// reply and how many times the run paused.
fn run_pausing(store: &mut Store, args: &[&str]) -> (Reply, usize) {
    let first = start_pausing(store, args);
    let mut pauses = 0;
    let reply = match first {
        Ok(reply) => reply,
        Err(CmdError::ScriptPaused) => loop {
            pauses += 1;
            assert!(store.scripts.busy().is_some(), "paused but not busy");
            if let Some(reply) = store.resume_script() {
                break reply;
            }
        },
        Err(e) => e.to_reply(),
    };
    assert!(store.scripts.busy().is_none(), "busy after the end");
    (reply, pauses)
}

const COUNT: &str =
    "local i = 0 while i < 3000000 do i = i + 1 end redis.call('set', KEYS[1], i) return i";

#[test]
fn a_paused_script_resumes_to_the_same_result() {
    let mut store = Store::new(1);
    let (reply, pauses) = run_pausing(&mut store, &["EVAL", COUNT, "1", "k"]);
    assert_eq!(reply, Reply::Int(3_000_000));
    // Once at the first hook call, then once per slice of run time.
    assert!(pauses >= 2, "paused only {pauses} times");
    let got = store.apply(0, &common::to_args(&["GET".into(), "k".into()]), &CTX);
    assert_eq!(got, Ok(Reply::bulk_str("3000000")));
    // The interpreter goes on serving runs after a paused one.
    let (again, _) = run_pausing(&mut store, &["EVAL", "return 7", "0"]);
    assert_eq!(again, Reply::Int(7));
}

/// pcall, xpcall and coroutines run their function in a coroutine the
/// hook may pause (as Redis processes events inside them too); a C call
/// such as table.sort's comparator cannot pause, and neither can any run
/// of a store without the setting (a Raft replica's).
#[test]
fn runs_pause_inside_pcall_and_coroutines_but_not_in_c_calls() {
    let mut store = Store::new(1);
    let cases = [
        ("return select(2, pcall(function() local i = 0 while i < 3000000 do i = i + 1 end return i end))", Reply::Int(3_000_000)),
        ("return select(2, xpcall(function() local i = 0 while i < 3000000 do i = i + 1 end error({err = 'E ' .. i}) end, function(e) return e.err end))", Reply::bulk_str("E 3000000")),
        ("local f = coroutine.wrap(function() local i = 0 while i < 3000000 do i = i + 1 end coroutine.yield(i) return 5 end) return {f(), f()}", Reply::Array(vec![Reply::Int(3_000_000), Reply::Int(5)])),
        ("return select(2, pcall(function() return select(2, pcall(function() local i = 0 while i < 3000000 do i = i + 1 end return i end)) end))", Reply::Int(3_000_000)),
    ];
    for (script, want) in cases {
        let (reply, pauses) = run_pausing(&mut store, &["EVAL", script, "0"]);
        assert_eq!(reply, want, "{script}");
        assert!(pauses >= 2, "{script}: paused {pauses} times");
    }
    let in_sort = "local t = {3, 1, 2} table.sort(t, function(a, b) local i = 0 while i < 1000000 do i = i + 1 end return a < b end) return t[1]";
    let (reply, pauses) = run_pausing(&mut store, &["EVAL", in_sort, "0"]);
    assert_eq!(reply, Reply::Int(1));
    assert!(pauses <= 1, "paused {pauses} times inside table.sort");
    // As on a Raft replica: the setting is off, the run goes through.
    let args: Vec<String> = ["EVAL", COUNT, "1", "k"]
        .iter()
        .map(|a| a.to_string())
        .collect();
    let reply = store.apply(0, &common::to_args(&args), &CTX);
    assert_eq!(reply, Ok(Reply::Int(3_000_000)));
}

#[test]
fn a_killed_run_ends_at_once_and_only_if_it_wrote_nothing() {
    let mut store = Store::new(1);
    let spin = "local i = 0\nwhile true do i = i + 1 end";
    assert!(matches!(
        start_pausing(&mut store, &["EVAL", spin, "0"]),
        Err(CmdError::ScriptPaused)
    ));
    assert!(store.resume_script().is_none(), "an endless loop ended");
    let kill = |store: &Store, by_function: bool| store.scripts.kill(by_function);
    assert!(
        matches!(kill(&store, true), Err(e) if e.text().starts_with("BUSY") && e.text().contains("SCRIPT KILL"))
    );
    assert!(kill(&store, false).is_ok());
    let reply = store.resume_script().expect("a killed run ends");
    let sha = kvasir_core::scripting::sha1_hex(spin.as_bytes());
    let want =
        format!("ERR Script killed by user with SCRIPT KILL... script: {sha}, on @user_script:2.");
    assert_eq!(reply, Reply::Error(want.into()));
    assert!(matches!(kill(&store, false), Err(e) if e.text().starts_with("NOTBUSY")));

    // One that wrote cannot be killed.
    let writer =
        "redis.call('set', 'w', 1) local i = 0 while i < 3000000 do i = i + 1 end return i";
    assert!(matches!(
        start_pausing(&mut store, &["EVAL", writer, "0"]),
        Err(CmdError::ScriptPaused)
    ));
    assert!(matches!(kill(&store, false), Err(e) if e.text().starts_with("UNKILLABLE")));
    let reply = loop {
        if let Some(r) = store.resume_script() {
            break r;
        }
    };
    assert_eq!(reply, Reply::Int(3_000_000));
}

/// A script's own `coroutine.yield` outside a coroutine is an error, as in
/// Redis, not a pause.
#[test]
fn a_script_cannot_yield_its_run() {
    let mut store = Store::new(1);
    let (reply, pauses) = run_pausing(&mut store, &["EVAL", "coroutine.yield(1)", "0"]);
    assert_eq!(pauses, 0);
    assert!(
        matches!(&reply, Reply::Error(e) if e.contains("attempt to yield across metamethod/C-call boundary")),
        "{reply:?}"
    );
    let (reply, _) = run_pausing(&mut store, &["EVAL", "return 1", "0"]);
    assert_eq!(reply, Reply::Int(1));
}

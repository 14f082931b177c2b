//! Every command and subcommand in the command table is answered by a
//! handler: a table entry whose name no code path serves would otherwise
//! answer "unknown command" while COMMAND, COMMAND DOCS and docs/commands.md
//! advertise it. Each entry is called with its minimal arity (placeholder
//! arguments) on a fresh connection, on a standalone server and, for the
//! CLUSTER subcommands, on a cluster node; whatever it answers (a value or a
//! Redis error about the arguments), it must not be "unknown".

#[path = "common/cluster.rs"]
mod cluster;
mod common;

use common::Kvasir;
use kvasir_core::table::{all_commands, Handler};
use std::time::Duration;

/// Commands whose minimal call ends the server or the test's ability to
/// talk to it.
const SKIPPED: &[&str] = &["shutdown"];

/// (full name, args) of every table entry, with `arity` placeholders.
fn invocations() -> Vec<(String, Vec<String>)> {
    fn args_for(words: &[&str], arity: i32) -> Vec<String> {
        let n = arity.unsigned_abs() as usize;
        let mut args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        while args.len() < n {
            args.push("0".into());
        }
        args
    }
    let mut out = Vec::new();
    for spec in all_commands() {
        if SKIPPED.contains(&spec.name) {
            continue;
        }
        // A container runs its subcommands; COMMAND also runs bare.
        for sub in spec.subcommands {
            out.push((
                format!("{}|{}", spec.name, sub.name),
                args_for(&[spec.name, sub.name], sub.arity),
            ));
        }
        if !matches!(spec.handler, Handler::Container) {
            out.push((spec.name.to_string(), args_for(&[spec.name], spec.arity)));
        }
    }
    out
}

fn unknown(reply: &str) -> bool {
    reply.starts_with("-ERR unknown command") || reply.starts_with("-ERR unknown subcommand")
}

#[test]
fn every_table_entry_has_a_handler() {
    let server = Kvasir::start(&[]);
    let mut missing = Vec::new();
    let calls = invocations();
    assert!(calls.len() > 200, "only {} table entries", calls.len());
    for (name, args) in &calls {
        let mut conn = server.raw_conn();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let bytes: Vec<&[u8]> = refs.iter().map(|a| a.as_bytes()).collect();
        conn.send(&common::encode_cmd(&bytes));
        // Blocking commands with a 0 timeout wait forever: no reply is
        // fine, it means a handler took the command.
        let reply = conn
            .read_reply_within(Duration::from_millis(500))
            .map(|r| String::from_utf8_lossy(&r).into_owned())
            .unwrap_or_default();
        if unknown(&reply) {
            missing.push(format!("{name}: {}", reply.trim_end()));
        }
    }
    assert!(
        missing.is_empty(),
        "table entries without a handler:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_cluster_subcommand_has_a_handler_in_cluster_mode() {
    let c = cluster::Cluster::start(&[]);
    let mut missing = Vec::new();
    for (name, args) in invocations() {
        if !name.starts_with("cluster|") {
            continue;
        }
        let mut conn = c.conn(1);
        let mut cmd = redis::cmd(&args[0]);
        for a in &args[1..] {
            cmd.arg(a);
        }
        if let Err(e) = cmd.query::<redis::Value>(&mut conn) {
            let text = format!("-{} {}", e.code().unwrap_or(""), e.detail().unwrap_or(""));
            if unknown(&text) {
                missing.push(format!("{name}: {text}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "CLUSTER subcommands without a handler in cluster mode:\n{}",
        missing.join("\n")
    );
}

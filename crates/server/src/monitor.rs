//! MONITOR: connections that are sent every command the node's sessions
//! run, as redis-server writes them: `+<unix seconds>.<micros> [<db>
//! <client addr>] "arg" "arg" ...`, after the command ran (Redis 7 feeds
//! its monitors from `call()`), in the order the commands ran. Admin
//! commands and those flagged `skip_monitor` are not shown, and secrets
//! (`crate::redact`) are shown as `(redacted)`, as in Redis 7.
//!
//! A monitoring connection is a replica in Redis's model: it may still run
//! commands that do not touch the keyspace (PING, QUIT, RESET, which ends
//! monitoring), and gets Redis's error for those that do.

use crate::clients::ClientInfo;
use crate::listener::Server;
use crate::session::Session;
use bytes::Bytes;
use kvasir_core::table::Flags;
use kvasir_core::CommandSpec;
use kvasir_resp::Reply;
use std::fmt::Write;
use std::rc::Rc;

/// The error a monitoring connection gets for a keyspace command.
pub const KEYSPACE_REFUSED: &str = "ERR Replica can't interact with the keyspace";

/// The connections in MONITOR mode.
#[derive(Default)]
pub struct Monitors {
    list: Vec<Rc<ClientInfo>>,
}

impl Monitors {
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    fn remove(&mut self, id: u64) {
        self.list.retain(|c| c.id != id);
    }
}

/// MONITOR. Like Redis, a connection already monitoring gets no reply, and
/// one inside EXEC gets an error (it expects one reply per command).
pub fn start(s: &mut Session) -> Option<Reply> {
    if s.txn.executing {
        return Some(Reply::error(
            "ERR MONITOR isn't allowed for DENY BLOCKING client",
        ));
    }
    if s.info.monitor.get() {
        return None;
    }
    s.info.monitor.set(true);
    s.server.monitors.borrow_mut().list.push(s.info.clone());
    set_monitored(&s.server);
    Some(Reply::ok())
}

/// Ends monitoring (RESET, or the connection closing).
pub fn stop(s: &Session) {
    if s.info.monitor.replace(false) {
        s.server.monitors.borrow_mut().remove(s.info.id);
        set_monitored(&s.server);
    }
}

/// Tells the standalone store whether to record the commands scripts run
/// (for the `[db lua]` lines). In cluster mode scripts run on the shards'
/// threads at apply time, and their commands are not shown.
fn set_monitored(server: &Server) {
    if server.cluster.is_none() {
        let on = !server.monitors.borrow().is_empty();
        let shard = server.local_store.borrow();
        shard.store().monitored.set(on);
        if !on {
            shard.store().script_calls.borrow_mut().clear();
        }
    }
}

/// Whether a monitoring connection must be refused `spec` (Redis refuses
/// replicas every command that reads, writes or may replicate).
pub fn refuses(info: &ClientInfo, spec: &CommandSpec) -> bool {
    info.monitor.get()
        && spec.flags.intersects(
            Flags::WRITE
                .union(Flags::READONLY)
                .union(Flags::MAY_REPLICATE),
        )
}

/// Sends the command `args` that `session`'s client ran on `db` to every
/// monitor, unless the command is not shown. `top` is the command (the
/// container for a subcommand), `spec` the subcommand or the command.
pub fn feed(
    server: &Server,
    info: &ClientInfo,
    db: usize,
    top: &CommandSpec,
    spec: &CommandSpec,
    args: &[Bytes],
) {
    if server.monitors.borrow().is_empty() {
        return;
    }
    let hidden = Flags::ADMIN.union(Flags::SKIP_MONITOR);
    // Redis's EVAL and FCALL families are flagged skip_monitor but feed
    // the monitors themselves, before the script runs.
    let script = matches!(
        top.name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    );
    if script || !(top.flags.intersects(hidden) || spec.flags.intersects(hidden)) {
        push(
            server,
            render(db, &info.addr.monitor_text(), top.name, args),
        );
    }
    // Then what a script of this command ran, as Redis shows its Lua
    // client's commands: `[db lua]`.
    if server.cluster.is_none() {
        let calls = std::mem::take(
            &mut *server
                .local_store
                .borrow()
                .store()
                .script_calls
                .borrow_mut(),
        );
        for (db, argv) in calls {
            let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
            push(server, render(db, "lua", &name, &argv));
        }
    }
}

fn push(server: &Server, line: String) {
    let line = Reply::Simple(line.into());
    for monitor in server.monitors.borrow().list.iter() {
        monitor.push(line.clone());
    }
}

/// One monitor line, without the leading `+`.
fn render(db: usize, addr: &str, command: &str, args: &[Bytes]) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut line = format!("{}.{:06} [{db} {addr}]", now.as_secs(), now.subsec_micros());
    let secret = crate::redact::secret_positions(command, args);
    for (i, arg) in args.iter().enumerate() {
        line.push(' ');
        if secret.as_ref().is_some_and(|s| s[i]) {
            line.push('"');
            line.push_str(crate::redact::REDACTED);
            line.push('"');
        } else {
            quote(arg, &mut line);
        }
    }
    line
}

/// Appends `arg` in double quotes as Redis's `sdscatrepr` writes it.
pub(crate) fn quote(arg: &[u8], out: &mut String) {
    out.push('"');
    for &b in arg {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(command: &str, args: &[&[u8]]) -> String {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        let l = render(3, "127.0.0.1:5000", command, &args);
        // Drop the time.
        l.split_once(' ')
            .map(|(_, rest)| rest.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn arguments_are_quoted_as_redis_does() {
        assert_eq!(
            line("set", &[b"SET", b"k", b"a \"b\"\\\n\r\t\x07\x08\x00\xff"]),
            r#"[3 127.0.0.1:5000] "SET" "k" "a \"b\"\\\n\r\t\a\b\x00\xff""#
        );
    }

    #[test]
    fn credentials_are_redacted() {
        assert_eq!(
            line("auth", &[b"AUTH", b"user", b"pass"]),
            r#"[3 127.0.0.1:5000] "AUTH" "(redacted)" "(redacted)""#
        );
        assert_eq!(
            line(
                "hello",
                &[b"HELLO", b"3", b"AUTH", b"u", b"p", b"SETNAME", b"n"]
            ),
            r#"[3 127.0.0.1:5000] "HELLO" "3" "AUTH" "(redacted)" "(redacted)" "SETNAME" "n""#
        );
        assert_eq!(
            line("hello", &[b"HELLO", b"3"]),
            r#"[3 127.0.0.1:5000] "HELLO" "3""#
        );
    }

    #[test]
    fn the_time_is_seconds_and_six_digit_micros() {
        let l = render(0, "a:1", "ping", &[Bytes::from_static(b"PING")]);
        let (time, _) = l.split_once(' ').unwrap_or_default();
        let (secs, micros) = time.split_once('.').unwrap_or_default();
        assert!(secs.parse::<u64>().is_ok_and(|s| s > 1_600_000_000), "{l}");
        assert_eq!(micros.len(), 6, "{l}");
    }
}

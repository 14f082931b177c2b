//! CLIENT PAUSE timeout [WRITE|ALL] and CLIENT UNPAUSE, as Redis 7: while
//! a pause is in force, a connection's next command waits (it counts in
//! INFO `blocked_clients`) until the pause ends or is lifted. ALL holds
//! every command; WRITE holds the commands that write or may replicate
//! (PUBLISH, EVAL, PFCOUNT, SCRIPT LOAD...) and an EXEC whose transaction
//! holds one. Commands a connection queues inside MULTI are held only if
//! they are such commands, as in Redis, and a transaction that pauses runs
//! to its end. Syntax and arity errors are answered at once. Monitoring
//! connections (replicas in Redis's model) are never held.
//!
//! As in Redis, nothing deletes keys on its own while a pause is in force:
//! the active expiry cycle and eviction wait for its end (reads already
//! treat an expired key as missing without deleting it).

use crate::session::Session;
use bytes::Bytes;
use kvasir_core::args::{eq_ic, parse_i64};
use kvasir_core::table::{Flags, Handler};
use kvasir_core::{CmdError, CommandSpec, SessionCmd};
use kvasir_resp::Reply;
use std::cell::Cell;
use tokio::sync::Notify;
use tokio::time::Instant;

/// The pause in force, if any.
#[derive(Default)]
pub struct ClientPause {
    /// When it ends, and whether it holds every command (ALL).
    until: Cell<Option<(Instant, bool)>>,
    /// Woken when a pause is lifted early (CLIENT UNPAUSE).
    lifted: Notify,
}

impl ClientPause {
    /// The pause still in force: (its end, ALL).
    fn current(&self) -> Option<(Instant, bool)> {
        match self.until.get() {
            Some((end, all)) if Instant::now() < end => Some((end, all)),
            Some(_) => {
                self.until.set(None);
                None
            }
            None => None,
        }
    }

    /// Whether a pause holds clients now.
    pub fn in_force(&self) -> bool {
        self.current().is_some()
    }

    /// Whether any pause is set (one load on the request path).
    pub fn is_set(&self) -> bool {
        self.until.get().is_some()
    }
}

/// CLIENT PAUSE timeout [WRITE|ALL]. A second pause extends the first to
/// the later end and to the stricter mode, as Redis does.
pub fn pause(s: &Session, args: &[Bytes]) -> Result<Reply, CmdError> {
    let millis = parse_i64(&args[2])
        .map_err(|_| CmdError::other("ERR timeout is not an integer or out of range"))?;
    if millis < 0 {
        return Err(CmdError::other("ERR timeout is negative"));
    }
    let all = match args.get(3) {
        None => true,
        Some(m) if eq_ic(m, "all") => true,
        Some(m) if eq_ic(m, "write") => false,
        Some(_) => {
            return Err(CmdError::other(
                "ERR CLIENT PAUSE mode must be WRITE or ALL",
            ))
        }
    };
    if args.len() > 4 {
        return Err(CmdError::Syntax);
    }
    let end = Instant::now()
        .checked_add(std::time::Duration::from_millis(millis as u64))
        .unwrap_or_else(|| Instant::now() + std::time::Duration::from_secs(100 * 365 * 86400));
    let pause = &s.server.client_pause;
    let (end, all) = match pause.current() {
        Some((e, a)) => (e.max(end), a || all),
        None => (end, all),
    };
    pause.until.set(Some((end, all)));
    Ok(Reply::ok())
}

/// CLIENT UNPAUSE: held connections go on at once.
pub fn unpause(s: &Session) -> Reply {
    s.server.client_pause.until.set(None);
    s.server.client_pause.lifted.notify_waiters();
    Reply::ok()
}

/// Whether `spec` is held by a pause of this kind: every command under
/// ALL, under WRITE those that write or may replicate, or an EXEC of a
/// transaction that holds one.
fn holds(s: &Session, spec: &CommandSpec, args: &[Bytes], all: bool) -> bool {
    if all {
        return true;
    }
    let replicates = Flags::WRITE.union(Flags::MAY_REPLICATE);
    let may_replicate = |spec: &CommandSpec, args: &[Bytes]| {
        spec.flags.intersects(replicates) && s.invocation_flags(spec, args).intersects(replicates)
    };
    if may_replicate(spec, args) {
        return true;
    }
    // Redis's mstate.cmd_flags: each queued command's flags as it was
    // called (a `no-writes` script's are its declared ones).
    matches!(spec.handler, Handler::Session(SessionCmd::Exec))
        && s.txn.queued().any(|q| may_replicate(q.spec, &q.args))
}

/// Whether a pause holds this call of `spec` for this connection now.
pub fn holds_now(s: &Session, spec: &CommandSpec, args: &[Bytes]) -> bool {
    !s.info.monitor.get()
        && s.server
            .client_pause
            .current()
            .is_some_and(|(_, all)| holds(s, spec, args, all))
}

/// Waits while a pause holds `spec` for this connection. Returns false if
/// the connection was killed meanwhile.
pub async fn wait_while_held(s: &Session, spec: &CommandSpec, args: &[Bytes]) -> bool {
    let info = s.info.clone();
    let pause = &s.server.client_pause;
    let mut held = false;
    let alive = loop {
        let Some((end, all)) = pause.current() else {
            break true;
        };
        if !holds(s, spec, args, all) {
            break true;
        }
        if !held {
            held = true;
            s.server
                .paused_clients
                .set(s.server.paused_clients.get() + 1);
        }
        let lifted = pause.lifted.notified();
        let kill = info.kill.notified();
        tokio::select! {
            _ = tokio::time::sleep_until(end) => {}
            _ = lifted => {}
            _ = kill => break false,
        }
        if info.killed.get() {
            break false;
        }
    };
    if held {
        s.server
            .paused_clients
            .set(s.server.paused_clients.get() - 1);
    }
    alive
}

//! Shutting down as redis-server 7 does: SHUTDOWN's flags, the
//! `shutdown-on-sigterm` / `shutdown-on-sigint` settings for signals, the
//! final save and what happens when it fails (the server keeps running and
//! says so, unless FORCE), SHUTDOWN ABORT and DEBUG PAUSE-CRON.
//!
//! A signal is not acted on where it arrives but by the server's periodic
//! work, as Redis's serverCron does: while that is paused (DEBUG
//! PAUSE-CRON 1) a signal waits, and SHUTDOWN ABORT can cancel it.

use crate::listener::Server;
use std::cell::Cell;
use tokio::sync::Notify;
use tracing::{error, info, warn};

/// How to shut down: SHUTDOWN's arguments, or a signal's setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// SAVE: save even without `save` points.
    pub save: bool,
    /// NOSAVE: never save.
    pub nosave: bool,
    /// NOW: do not wait for replicas: a cluster node exits without
    /// handing its shards' leadership over first.
    pub now: bool,
    /// FORCE: exit even if the final save fails.
    pub force: bool,
}

impl Flags {
    /// One flag word (`save`, `nosave`, `now`, `force`), case-insensitive;
    /// false if it is none of them.
    fn add(&mut self, word: &[u8]) -> bool {
        let flag = match word.to_ascii_lowercase().as_slice() {
            b"save" => &mut self.save,
            b"nosave" => &mut self.nosave,
            b"now" => &mut self.now,
            b"force" => &mut self.force,
            _ => return false,
        };
        *flag = true;
        true
    }

    /// A `shutdown-on-sigterm` / `shutdown-on-sigint` value: `default`, or
    /// flag words separated by spaces (Redis's multi-value enum); None if
    /// a word is neither or SAVE and NOSAVE are both given.
    pub fn from_setting(value: &str) -> Option<Flags> {
        let mut flags = Flags::default();
        let mut words = value.split_whitespace().peekable();
        words.peek()?;
        for word in words {
            if !(word.eq_ignore_ascii_case("default") || flags.add(word.as_bytes())) {
                return None;
            }
        }
        (!(flags.save && flags.nosave)).then_some(flags)
    }
}

impl Flags {
    /// The setting as Redis shows it: the flag words in their order, or
    /// `default` for none.
    pub fn render(&self) -> String {
        let words: Vec<&str> = [
            (self.save, "save"),
            (self.nosave, "nosave"),
            (self.now, "now"),
            (self.force, "force"),
        ]
        .into_iter()
        .filter_map(|(set, word)| set.then_some(word))
        .collect();
        if words.is_empty() {
            "default".into()
        } else {
            words.join(" ")
        }
    }
}

/// What SHUTDOWN was asked to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    Shutdown(Flags),
    Abort,
}

/// SHUTDOWN's arguments, `[NOSAVE | SAVE] [NOW] [FORCE] [ABORT]`; None is a
/// syntax error (an unknown word, SAVE with NOSAVE, ABORT with any other).
pub fn parse_command(args: &[bytes::Bytes]) -> Option<Request> {
    let mut flags = Flags::default();
    let mut abort = false;
    for a in args {
        if a.eq_ignore_ascii_case(b"abort") {
            abort = true;
        } else if !flags.add(a) {
            return None;
        }
    }
    if (flags.save && flags.nosave) || (abort && flags != Flags::default()) {
        return None;
    }
    Some(if abort {
        Request::Abort
    } else {
        Request::Shutdown(flags)
    })
}

/// A signal that asks the server to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    Term,
    Int,
}

impl Signal {
    fn name(self) -> &'static str {
        match self {
            Signal::Term => "SIGTERM",
            Signal::Int => "SIGINT",
        }
    }

    fn setting(self) -> &'static str {
        match self {
            Signal::Term => "shutdown-on-sigterm",
            Signal::Int => "shutdown-on-sigint",
        }
    }
}

/// A signal received and not yet acted on, and the pause that holds it.
#[derive(Default)]
pub struct ShutdownState {
    pending: Cell<Option<Signal>>,
    /// DEBUG PAUSE-CRON: the periodic work (signals, active expiry, save
    /// points, client timeouts) is skipped.
    cron_paused: Cell<bool>,
    /// Wakes the signal loop when the pause ends.
    resumed: Notify,
    /// The shutdown under way is NOW: no leadership hand-over.
    now: Cell<bool>,
}

impl ShutdownState {
    pub fn cron_paused(&self) -> bool {
        self.cron_paused.get()
    }

    pub fn pause_cron(&self, paused: bool) {
        self.cron_paused.set(paused);
        if !paused {
            self.resumed.notify_one();
        }
    }

    /// Whether the shutdown under way skips the hand-over (NOW).
    pub fn now(&self) -> bool {
        self.now.get()
    }

    /// SHUTDOWN ABORT: cancels a signal's shutdown not yet started; false
    /// if there is none (Kvasir starts a shutdown only when it can finish
    /// it at once, so there is never one in progress to cancel).
    pub fn abort(&self) -> bool {
        if self.pending.take().is_none() {
            return false;
        }
        info!("Shutdown manually aborted.");
        true
    }
}

/// What the signal loop does next.
pub enum Next {
    Continue,
    /// Exit: the shutdown finished.
    Exit,
    /// Exit at once with an error (a second SIGINT while one waits).
    Insist,
}

/// A signal arrived: it waits for the periodic work, which acts on it.
pub fn on_signal(server: &Server, signal: Signal) -> Next {
    let state = &server.shutdown_state;
    if signal == Signal::Int && state.pending.get().is_some() {
        warn!("You insist... exiting now.");
        return Next::Insist;
    }
    info!("Received {} scheduling shutdown...", signal.name());
    state.pending.set(Some(signal));
    run_pending(server)
}

/// Acts on a waiting signal unless the periodic work is paused.
pub fn run_pending(server: &Server) -> Next {
    let state = &server.shutdown_state;
    if state.cron_paused.get() {
        return Next::Continue;
    }
    let Some(signal) = state.pending.take() else {
        return Next::Continue;
    };
    let flags = server
        .config
        .borrow()
        .stored
        .get(signal.setting())
        .and_then(Flags::from_setting)
        .unwrap_or_default();
    if finish(server, flags) {
        Next::Exit
    } else {
        Next::Continue
    }
}

/// Waits until DEBUG PAUSE-CRON 0.
pub async fn resumed(server: &Server) {
    server.shutdown_state.resumed.notified().await
}

/// The last steps before exiting: the append-only file on disk, then the
/// final snapshot when the flags and `save` points ask for one; whether
/// the server may exit. A failed save keeps it running (logged as Redis
/// logs it), unless FORCE.
pub fn finish(server: &Server, flags: Flags) -> bool {
    server.shutdown_state.now.set(flags.now);
    if server.cluster.is_some() {
        return true;
    }
    crate::persistence::kill_child(server, None);
    crate::persistence::stop_sync_children(server);
    if let Err(e) = crate::aof_persistence::sync_at_exit(server) {
        warn!("Fail to fsync the AOF file: {e}.");
    }
    // Never while the data loads: the save would hold part of it (Redis
    // shuts down NOSAVE then).
    let wants_save = !flags.nosave
        && !server.loading.active()
        && (flags.save || crate::persistence::has_save_points(server));
    if wants_save {
        info!("Saving the final RDB snapshot before exiting.");
        if crate::persistence::save(server).is_err() {
            if flags.force {
                warn!("Error trying to save the DB. Exit anyway.");
            } else {
                error!("Error trying to save the DB, can't exit.");
                error!(
                    "Errors trying to shut down the server. Check the logs for more information."
                );
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    #[test]
    fn shutdown_arguments_are_checked_as_redis_checks_them() {
        assert_eq!(
            parse_command(&args(&[])),
            Some(Request::Shutdown(Flags::default()))
        );
        assert_eq!(
            parse_command(&args(&["NOSAVE", "now", "Force"])),
            Some(Request::Shutdown(Flags {
                nosave: true,
                now: true,
                force: true,
                ..Flags::default()
            }))
        );
        assert_eq!(parse_command(&args(&["abort"])), Some(Request::Abort));
        assert_eq!(parse_command(&args(&["abort", "now"])), None);
        assert_eq!(parse_command(&args(&["save", "nosave"])), None);
        assert_eq!(parse_command(&args(&["later"])), None);
    }

    #[test]
    fn signal_settings_are_flag_words() {
        assert_eq!(Flags::from_setting("default"), Some(Flags::default()));
        assert_eq!(
            Flags::from_setting("nosave force"),
            Some(Flags {
                nosave: true,
                force: true,
                ..Flags::default()
            })
        );
        assert_eq!(
            Flags::from_setting("force now NOSAVE").map(|f| f.render()),
            Some("nosave now force".to_string())
        );
        assert_eq!(
            Flags::from_setting("default").map(|f| f.render()),
            Some("default".to_string())
        );
        assert_eq!(Flags::from_setting(""), None);
        assert_eq!(Flags::from_setting("save nosave"), None);
        assert_eq!(Flags::from_setting("sometimes"), None);
    }
}

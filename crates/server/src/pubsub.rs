//! Pub/Sub: channel and pattern subscriptions and message delivery.
//!
//! Each subscribed connection has a bounded queue of push messages; the
//! session writes them out as they arrive. A subscriber that falls more than
//! [`QUEUE_LIMIT`] messages behind is disconnected, as Redis does when a
//! pub/sub client exceeds its output buffer limit.

use crate::clients::{ClientInfo, Clients};
use bytes::Bytes;
use kvasir_resp::Reply;
use std::collections::BTreeMap;
use std::rc::Rc;
use tokio::sync::mpsc;

/// Messages a subscriber may have waiting before it is disconnected.
pub const QUEUE_LIMIT: usize = 65536;

/// A subscriber's delivery handle.
#[derive(Clone)]
pub struct Subscriber {
    pub info: Rc<ClientInfo>,
    pub tx: mpsc::Sender<Reply>,
}

impl Subscriber {
    /// Queues a message; a subscriber whose queue is full is killed.
    fn deliver(&self, msg: Reply) -> bool {
        match self.tx.try_send(msg) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(
                    client = self.info.id,
                    "closing pub/sub client over its output limit"
                );
                Clients::kill(&self.info);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }
}

/// Who listens to what. BTreeMaps keep delivery order deterministic
/// (by client id).
#[derive(Default)]
pub struct PubSub {
    channels: BTreeMap<Bytes, BTreeMap<u64, Subscriber>>,
    patterns: BTreeMap<Bytes, BTreeMap<u64, Subscriber>>,
}

impl PubSub {
    /// Adds a subscription; false if it already existed.
    pub fn subscribe(&mut self, channel: &Bytes, sub: &Subscriber, pattern: bool) -> bool {
        let map = if pattern {
            &mut self.patterns
        } else {
            &mut self.channels
        };
        map.entry(channel.clone())
            .or_default()
            .insert(sub.info.id, sub.clone())
            .is_none()
    }

    /// Removes a subscription; false if there was none.
    pub fn unsubscribe(&mut self, channel: &[u8], client: u64, pattern: bool) -> bool {
        let map = if pattern {
            &mut self.patterns
        } else {
            &mut self.channels
        };
        let Some(subs) = map.get_mut(channel) else {
            return false;
        };
        let removed = subs.remove(&client).is_some();
        if subs.is_empty() {
            map.remove(channel);
        }
        removed
    }

    /// Sends `message` to every subscriber of `channel` and of every
    /// matching pattern; returns how many received it.
    pub fn publish(&self, channel: &Bytes, message: &Bytes) -> usize {
        let mut receivers = 0;
        if let Some(subs) = self.channels.get(channel) {
            for s in subs.values() {
                let msg = Reply::Push(vec![
                    Reply::bulk_str("message"),
                    Reply::Bulk(channel.clone()),
                    Reply::Bulk(message.clone()),
                ]);
                receivers += s.deliver(msg) as usize;
            }
        }
        for (pattern, subs) in &self.patterns {
            if !kvasir_core::glob::matches(pattern, channel, false) {
                continue;
            }
            for s in subs.values() {
                let msg = Reply::Push(vec![
                    Reply::bulk_str("pmessage"),
                    Reply::Bulk(pattern.clone()),
                    Reply::Bulk(channel.clone()),
                    Reply::Bulk(message.clone()),
                ]);
                receivers += s.deliver(msg) as usize;
            }
        }
        receivers
    }

    /// Active channels (with at least one subscriber) matching `pattern`.
    pub fn channels(&self, pattern: Option<&[u8]>) -> Vec<Bytes> {
        self.channels
            .keys()
            .filter(|c| pattern.is_none_or(|p| kvasir_core::glob::matches(p, c, false)))
            .cloned()
            .collect()
    }

    pub fn numsub(&self, channel: &[u8]) -> usize {
        self.channels.get(channel).map_or(0, |s| s.len())
    }

    /// Number of distinct patterns subscribed to.
    pub fn numpat(&self) -> usize {
        self.patterns.len()
    }

    pub fn channel_count(&self) -> usize {
        self.channels.len()
    }
}

// ---------------------------------------------------------------------------
// The commands, run for a session
// ---------------------------------------------------------------------------

use crate::session::{Outcome, Session};
use kvasir_core::{CmdError, CommandSpec};
use kvasir_resp::Protocol;

type Resolved = Result<(&'static CommandSpec, Option<&'static CommandSpec>), CmdError>;

fn subscription_count(s: &Session) -> usize {
    s.channels.len() + s.patterns.len()
}

fn sync_counts(s: &Session) {
    s.info.subscriptions.set(s.channels.len());
    s.info.psubscriptions.set(s.patterns.len());
}

fn confirmation(kind: &'static str, name: Option<&Bytes>, count: usize) -> Reply {
    Reply::Push(vec![
        Reply::bulk_str(kind),
        name.map_or(Reply::Nil, |n| Reply::Bulk(n.clone())),
        Reply::Int(count as i64),
    ])
}

/// In RESP2 a subscribed connection may only (un)subscribe, PING, QUIT or
/// RESET; anything else gets Redis's error.
pub fn check_subscribed_mode(s: &Session, resolved: &Resolved) -> Option<Reply> {
    if s.proto != Protocol::Resp2 || subscription_count(s) == 0 {
        return None;
    }
    let Ok((spec, parent)) = resolved else {
        return None;
    };
    let top = parent.unwrap_or(spec);
    let allowed = matches!(
        top.name,
        "subscribe" | "unsubscribe" | "psubscribe" | "punsubscribe" | "ping" | "quit" | "reset"
    );
    if allowed {
        return None;
    }
    Some(Reply::Error(
        format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.full_name(*parent)
        )
        .into(),
    ))
}

/// Whether PING must answer in the subscribed-mode shape (RESP2 only).
pub fn ping_in_subscribed_mode(s: &Session) -> bool {
    s.proto == Protocol::Resp2 && subscription_count(s) > 0
}

fn subscriber(s: &Session) -> Subscriber {
    Subscriber {
        info: s.info.clone(),
        tx: s.push_tx.clone(),
    }
}

fn subscribe(s: &mut Session, names: &[Bytes], pattern: bool) -> Outcome {
    let sub = subscriber(s);
    let mut replies = Vec::with_capacity(names.len());
    for name in names {
        let mine = if pattern {
            &mut s.patterns
        } else {
            &mut s.channels
        };
        if mine.insert(name.clone()) {
            s.server.pubsub.borrow_mut().subscribe(name, &sub, pattern);
        }
        let kind = if pattern { "psubscribe" } else { "subscribe" };
        replies.push(confirmation(kind, Some(name), subscription_count(s)));
    }
    sync_counts(s);
    Outcome::Replies(replies)
}

fn unsubscribe(s: &mut Session, names: &[Bytes], pattern: bool) -> Outcome {
    let kind = if pattern {
        "punsubscribe"
    } else {
        "unsubscribe"
    };
    let targets: Vec<Bytes> = if names.is_empty() {
        let mine = if pattern { &s.patterns } else { &s.channels };
        mine.iter().cloned().collect()
    } else {
        names.to_vec()
    };
    if targets.is_empty() {
        return Outcome::Replies(vec![confirmation(kind, None, subscription_count(s))]);
    }
    let mut replies = Vec::with_capacity(targets.len());
    for name in &targets {
        let mine = if pattern {
            &mut s.patterns
        } else {
            &mut s.channels
        };
        if mine.remove(name) {
            s.server
                .pubsub
                .borrow_mut()
                .unsubscribe(name, s.info.id, pattern);
        }
        replies.push(confirmation(kind, Some(name), subscription_count(s)));
    }
    sync_counts(s);
    Outcome::Replies(replies)
}

/// Drops every subscription (RESET, disconnect).
pub fn unsubscribe_all(s: &mut Session) {
    let mut registry = s.server.pubsub.borrow_mut();
    for c in std::mem::take(&mut s.channels) {
        registry.unsubscribe(&c, s.info.id, false);
    }
    for p in std::mem::take(&mut s.patterns) {
        registry.unsubscribe(&p, s.info.id, true);
    }
    drop(registry);
    sync_counts(s);
}

fn pubsub_container(s: &Session, sub: &str, args: &[Bytes]) -> Result<Reply, CmdError> {
    let registry = s.server.pubsub.borrow();
    match sub {
        "channels" => {
            if args.len() > 3 {
                return Err(CmdError::WrongArity("pubsub|channels".into()));
            }
            let pattern = args.get(2).map(|p| p.as_ref());
            Ok(Reply::Array(
                registry
                    .channels(pattern)
                    .into_iter()
                    .map(Reply::Bulk)
                    .collect(),
            ))
        }
        "numsub" => Ok(Reply::Map(
            args[2..]
                .iter()
                .map(|c| {
                    (
                        Reply::Bulk(c.clone()),
                        Reply::Int(registry.numsub(c) as i64),
                    )
                })
                .collect(),
        )),
        "numpat" => Ok(Reply::Int(registry.numpat() as i64)),
        "help" => Ok(kvasir_core::table::help_reply(&[
            "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "HELP",
            "    Print this help.",
        ])),
        _ => Err(kvasir_core::error::unknown_command(args)),
    }
}

/// Runs a pub/sub command; None if `name` is not one.
pub fn run(s: &mut Session, parent: Option<&str>, name: &str, args: &[Bytes]) -> Option<Outcome> {
    Some(match (parent, name) {
        (None, "subscribe") => subscribe(s, &args[1..], false),
        (None, "psubscribe") => subscribe(s, &args[1..], true),
        (None, "unsubscribe") => unsubscribe(s, &args[1..], false),
        (None, "punsubscribe") => unsubscribe(s, &args[1..], true),
        (None, "publish") => {
            let n = s.server.pubsub.borrow().publish(&args[1], &args[2]);
            if let Some(node) = &s.server.cluster {
                // Subscribers on other nodes hear it too; the count is this
                // node's, as in Redis Cluster.
                node.publish(&args[1], &args[2]);
            }
            Outcome::Reply(Reply::Int(n as i64))
        }
        (Some("pubsub"), sub) => {
            Outcome::Reply(pubsub_container(s, sub, args).unwrap_or_else(|e| e.to_reply()))
        }
        _ => return None,
    })
}

//! Pub/Sub: channel and pattern subscriptions and message delivery.
//!
//! Each subscribed connection has a bounded queue of push messages; the
//! session writes them out as they arrive. A subscriber whose queue grows
//! past its `client-output-buffer-limit` (`crate::output_limits`) is
//! disconnected, as Redis does; [`QUEUE_LIMIT`] messages is a last bound
//! for when those limits are disabled.

use crate::clients::ClientInfo;
use bytes::Bytes;
use kvasir_resp::Reply;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Messages a connection may have waiting before it is disconnected,
/// whatever its output limits (0 disables them).
pub const QUEUE_LIMIT: usize = 1 << 20;

/// A subscriber's delivery handle: its connection's push queue.
#[derive(Clone)]
pub struct Subscriber {
    pub info: Rc<ClientInfo>,
}

impl Subscriber {
    /// Queues a message; a subscriber whose queue is full is killed
    /// ([`ClientInfo::push`]).
    fn deliver(&self, msg: Reply) -> bool {
        self.info.push(msg)
    }
}

/// Who listens to what. BTreeMaps keep delivery order deterministic
/// (by client id).
#[derive(Default)]
pub struct PubSub {
    channels: BTreeMap<Bytes, BTreeMap<u64, Subscriber>>,
    patterns: BTreeMap<Bytes, BTreeMap<u64, Subscriber>>,
    /// Shard channels (SSUBSCRIBE, Redis 7): a namespace of their own.
    shard_channels: BTreeMap<Bytes, BTreeMap<u64, Subscriber>>,
}

/// Which of the registry's namespaces a subscription is in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl PubSub {
    fn map_mut(&mut self, kind: Kind) -> &mut BTreeMap<Bytes, BTreeMap<u64, Subscriber>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard_channels,
        }
    }

    /// Every subscription of one client.
    pub fn subscriptions_of(&self, client: u64) -> Vec<(Kind, Bytes)> {
        let mut out = Vec::new();
        for (kind, map) in [
            (Kind::Channel, &self.channels),
            (Kind::Pattern, &self.patterns),
            (Kind::Shard, &self.shard_channels),
        ] {
            for (channel, subscribers) in map {
                if subscribers.contains_key(&client) {
                    out.push((kind, channel.clone()));
                }
            }
        }
        out
    }

    /// Adds a subscription; false if it already existed.
    pub fn subscribe(&mut self, channel: &Bytes, sub: &Subscriber, kind: Kind) -> bool {
        self.map_mut(kind)
            .entry(channel.clone())
            .or_default()
            .insert(sub.info.id, sub.clone())
            .is_none()
    }

    /// Removes a subscription; false if there was none.
    pub fn unsubscribe(&mut self, channel: &[u8], client: u64, kind: Kind) -> bool {
        let map = self.map_mut(kind);
        let Some(subs) = map.get_mut(channel) else {
            return false;
        };
        let removed = subs.remove(&client).is_some();
        if subs.is_empty() {
            map.remove(channel);
        }
        removed
    }

    /// Sends `message` to every subscriber of the shard channel `channel`;
    /// returns how many received it.
    pub fn spublish(&self, channel: &Bytes, message: &Bytes) -> usize {
        let Some(subs) = self.shard_channels.get(channel) else {
            return 0;
        };
        subs.values()
            .map(|s| {
                s.deliver(Reply::Push(vec![
                    Reply::bulk_str("smessage"),
                    Reply::Bulk(channel.clone()),
                    Reply::Bulk(message.clone()),
                ])) as usize
            })
            .sum()
    }

    /// Active shard channels matching `pattern`.
    pub fn shard_channels(&self, pattern: Option<&[u8]>) -> Vec<Bytes> {
        self.shard_channels
            .keys()
            .filter(|c| pattern.is_none_or(|p| kvasir_core::glob::matches(p, c, false)))
            .cloned()
            .collect()
    }

    pub fn shard_numsub(&self, channel: &[u8]) -> usize {
        self.shard_channels.get(channel).map_or(0, |s| s.len())
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

    /// Number of shard channels with a subscriber.
    pub fn shard_channel_count(&self) -> usize {
        self.shard_channels.len()
    }
}

// ---------------------------------------------------------------------------
// The commands, run for a session
// ---------------------------------------------------------------------------

use crate::session::{Outcome, Session};
use kvasir_core::connection::{PubsubCmd, SessionCmd};
use kvasir_core::{CmdError, CommandSpec, Handler};
use kvasir_resp::Protocol;

type Resolved = Result<(&'static CommandSpec, Option<&'static CommandSpec>), CmdError>;

fn subscription_count(s: &Session) -> usize {
    s.channels.len() + s.patterns.len()
}

fn sync_counts(s: &Session) {
    s.info.subscriptions.set(s.channels.len());
    s.info.psubscriptions.set(s.patterns.len());
    s.info.ssubscriptions.set(s.shard_channels.len());
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
    if s.proto != Protocol::Resp2 || subscription_count(s) + s.shard_channels.len() == 0 {
        return None;
    }
    let Ok((spec, parent)) = resolved else {
        return None;
    };
    let top = parent.unwrap_or(spec);
    let allowed = matches!(
        top.handler,
        Handler::Session(
            SessionCmd::Subscribe
                | SessionCmd::Unsubscribe
                | SessionCmd::Psubscribe
                | SessionCmd::Punsubscribe
                | SessionCmd::Ssubscribe
                | SessionCmd::Sunsubscribe
                | SessionCmd::Ping
                | SessionCmd::Quit
                | SessionCmd::Reset
        )
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
    s.proto == Protocol::Resp2 && subscription_count(s) + s.shard_channels.len() > 0
}

fn subscriber(s: &Session) -> Subscriber {
    Subscriber {
        info: s.info.clone(),
    }
}

fn subscribed_to(s: &mut Session, kind: Kind) -> &mut std::collections::BTreeSet<Bytes> {
    match kind {
        Kind::Channel => &mut s.channels,
        Kind::Pattern => &mut s.patterns,
        Kind::Shard => &mut s.shard_channels,
    }
}

/// The count a (un)subscribe confirmation carries: channels and patterns
/// together, shard channels on their own (as Redis 7 counts them).
fn confirmation_count(s: &Session, kind: Kind) -> usize {
    match kind {
        Kind::Shard => s.shard_channels.len(),
        _ => subscription_count(s),
    }
}

pub fn subscribe(s: &mut Session, names: &[Bytes], kind: Kind) -> Outcome {
    let sub = subscriber(s);
    let mut replies = Vec::with_capacity(names.len());
    for name in names {
        if subscribed_to(s, kind).insert(name.clone()) {
            s.server.pubsub.borrow_mut().subscribe(name, &sub, kind);
        }
        let verb = match kind {
            Kind::Channel => "subscribe",
            Kind::Pattern => "psubscribe",
            Kind::Shard => "ssubscribe",
        };
        replies.push(confirmation(verb, Some(name), confirmation_count(s, kind)));
    }
    sync_counts(s);
    Outcome::Replies(replies)
}

pub fn unsubscribe(s: &mut Session, names: &[Bytes], kind: Kind) -> Outcome {
    let verb = match kind {
        Kind::Channel => "unsubscribe",
        Kind::Pattern => "punsubscribe",
        Kind::Shard => "sunsubscribe",
    };
    let targets: Vec<Bytes> = if names.is_empty() {
        subscribed_to(s, kind).iter().cloned().collect()
    } else {
        names.to_vec()
    };
    if targets.is_empty() {
        return Outcome::Replies(vec![confirmation(verb, None, confirmation_count(s, kind))]);
    }
    let mut replies = Vec::with_capacity(targets.len());
    for name in &targets {
        if subscribed_to(s, kind).remove(name) {
            s.server
                .pubsub
                .borrow_mut()
                .unsubscribe(name, s.info.id, kind);
        }
        replies.push(confirmation(verb, Some(name), confirmation_count(s, kind)));
    }
    sync_counts(s);
    Outcome::Replies(replies)
}

/// Drops every subscription (RESET, disconnect).
pub fn unsubscribe_all(s: &mut Session) {
    let mut registry = s.server.pubsub.borrow_mut();
    for c in std::mem::take(&mut s.channels) {
        registry.unsubscribe(&c, s.info.id, Kind::Channel);
    }
    for p in std::mem::take(&mut s.patterns) {
        registry.unsubscribe(&p, s.info.id, Kind::Pattern);
    }
    for c in std::mem::take(&mut s.shard_channels) {
        registry.unsubscribe(&c, s.info.id, Kind::Shard);
    }
    drop(registry);
    sync_counts(s);
}

pub fn container(s: &Session, sub: PubsubCmd, args: &[Bytes]) -> Result<Reply, CmdError> {
    let registry = s.server.pubsub.borrow();
    match sub {
        PubsubCmd::Channels => {
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
        // A flat [channel, count, ...] array in RESP2 and RESP3 alike, as
        // Redis 7 answers it (not a map).
        PubsubCmd::Numsub => Ok(Reply::Array(
            args[2..]
                .iter()
                .flat_map(|c| [Reply::Bulk(c.clone()), Reply::Int(registry.numsub(c) as i64)])
                .collect(),
        )),
        PubsubCmd::Numpat => Ok(Reply::Int(registry.numpat() as i64)),
        PubsubCmd::Shardchannels => {
            if args.len() > 3 {
                return Err(CmdError::WrongArity("pubsub|shardchannels".into()));
            }
            let pattern = args.get(2).map(|p| p.as_ref());
            Ok(Reply::Array(
                registry
                    .shard_channels(pattern)
                    .into_iter()
                    .map(Reply::Bulk)
                    .collect(),
            ))
        }
        PubsubCmd::Shardnumsub => Ok(Reply::Array(
            args[2..]
                .iter()
                .flat_map(|c| {
                    [
                        Reply::Bulk(c.clone()),
                        Reply::Int(registry.shard_numsub(c) as i64),
                    ]
                })
                .collect(),
        )),
        PubsubCmd::Help => Ok(kvasir_core::table::help_reply(&[
            "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
            "HELP",
            "    Prints this help.",
        ])),
    }
}

/// Cluster mode: shard channels of one call must share a slot, and that
/// slot must be served here (its shard's leader, or a replica of it for a
/// READONLY subscriber); otherwise Redis Cluster's CROSSSLOT or MOVED.
fn shard_channel_check(s: &Session, channels: &[Bytes], publish: bool) -> Option<Reply> {
    let node = s.server.cluster.as_ref()?;
    let mut slot = None;
    for c in channels {
        let cs = kvasir_cluster::key_slot(c);
        if slot.is_some_and(|x| x != cs) {
            return Some(kvasir_cluster::RouteError::CrossSlot.reply());
        }
        slot = Some(cs);
    }
    let slot = slot?;
    match node.route(slot, publish, s.readonly) {
        crate::cluster::Route::Leader(_) | crate::cluster::Route::LocalReplica(_) => None,
        crate::cluster::Route::Redirect(r) => Some(r),
        crate::cluster::Route::NoLeader(_) => Some(crate::cluster::ClusterNode::no_leader_reply()),
    }
}

/// SSUBSCRIBE and SUNSUBSCRIBE: only for shard channels served here.
pub fn shard_subscription(s: &mut Session, channels: &[Bytes], subscribe_: bool) -> Outcome {
    match shard_channel_check(s, channels, false) {
        Some(refusal) => Outcome::Reply(refusal),
        None if subscribe_ => subscribe(s, channels, Kind::Shard),
        None => unsubscribe(s, channels, Kind::Shard),
    }
}

/// SPUBLISH channel message.
pub fn spublish(s: &Session, args: &[Bytes]) -> Reply {
    if let Some(refusal) = shard_channel_check(s, &args[1..2], true) {
        return refusal;
    }
    let n = s.server.pubsub.borrow().spublish(&args[1], &args[2]);
    if let Some(node) = &s.server.cluster {
        // READONLY subscribers on the shard's other replicas hear it too;
        // the count is this node's, as in Redis.
        node.spublish(&args[1], &args[2]);
    }
    Reply::Int(n as i64)
}

/// Standalone: PUBLISH and SPUBLISH called by scripts reach this server's
/// subscribers at once, as the commands do (scripts run on this thread).
pub fn deliver_script_publishes(server: &Rc<crate::listener::Server>) {
    let server = Rc::downgrade(server);
    kvasir_core::scripting::set_publish_hook(Some(Box::new(move |channel, message, shard| {
        let Some(server) = server.upgrade() else {
            return 0;
        };
        let pubsub = server.pubsub.borrow();
        let receivers = if shard {
            pubsub.spublish(channel, message)
        } else {
            pubsub.publish(channel, message)
        };
        receivers as i64
    })));
}

/// PUBLISH channel message.
pub fn publish(s: &Session, args: &[Bytes]) -> Reply {
    let n = s.server.pubsub.borrow().publish(&args[1], &args[2]);
    if let Some(node) = &s.server.cluster {
        // Subscribers on other nodes hear it too; the count is this node's,
        // as in Redis Cluster.
        node.publish(&args[1], &args[2]);
    }
    Reply::Int(n as i64)
}

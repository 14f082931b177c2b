//! Whether a user may run one invocation: the command (or subcommand, or
//! its first argument), each key with the read/write access the command
//! needs (the table's `KeyAccess`), and each pub/sub channel. A user is
//! allowed when its root selector or any other selector allows all three.

use super::commands::id_of;
use super::user::{Selector, User};
use crate::connection::SessionCmd;
use crate::glob;
use crate::table::{CommandSpec, Flags, Handler};
use bytes::Bytes;

/// What was refused, with the argument index of the key or channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    Command,
    Key(usize),
    Channel(usize),
}

impl Denied {
    /// Redis's order of relevance when every selector refuses: the last
    /// key or channel no selector matched beats a refused command.
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(i) => (2, i),
            Denied::Channel(i) => (4, i),
        }
    }

    /// The error a script's `redis.call` gets (Redis 7.0's texts).
    pub fn script_error(self) -> &'static str {
        match self {
            Denied::Command => {
                "ERR The user executing the script can't run this command or subcommand"
            }
            Denied::Key(_) => {
                "ERR The user executing the script can't access at least one of the keys \
                 mentioned in the command arguments"
            }
            Denied::Channel(_) => {
                "ERR The user executing the script can't publish to the channel mentioned in \
                 the command"
            }
        }
    }

    /// What was refused, as ACL LOG and ACL DRYRUN name it: the command's
    /// full name, or the key or channel.
    pub fn object(
        self,
        spec: &CommandSpec,
        parent: Option<&CommandSpec>,
        args: &[Bytes],
    ) -> String {
        match self {
            Denied::Command => spec.full_name(parent),
            Denied::Key(i) | Denied::Channel(i) => args
                .get(i)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .unwrap_or_default(),
        }
    }

    /// ACL LOG's reason.
    pub fn reason(self) -> &'static str {
        match self {
            Denied::Command => "command",
            Denied::Key(_) => "key",
            Denied::Channel(_) => "channel",
        }
    }
}

/// Checks `args` (resolved to `spec`, a subcommand when `parent` is set)
/// against every selector of `user`.
pub fn check(
    user: &User,
    spec: &CommandSpec,
    parent: Option<&CommandSpec>,
    args: &[Bytes],
) -> Result<(), Denied> {
    if user.unrestricted {
        return Ok(());
    }
    let mut relevant = Denied::Command;
    for selector in std::iter::once(&user.root).chain(&user.selectors) {
        match check_selector(selector, spec, parent, args) {
            Ok(()) => return Ok(()),
            Err(denied) if denied.rank() > relevant.rank() => relevant = denied,
            Err(_) => {}
        }
    }
    Err(relevant)
}

/// SORT's BY and GET patterns read keys the check above cannot see: as in
/// Redis, only a user with a selector that allows the command on every key
/// may use them. The error, if this invocation may not.
pub fn pattern_refusal(
    user: &User,
    spec: &CommandSpec,
    parent: Option<&CommandSpec>,
    args: &[Bytes],
) -> Option<String> {
    if user.unrestricted {
        return None;
    }
    let option = spec.pattern_reads.and_then(|find| find(args))?;
    let id = id_of(spec, parent)?;
    // Redis asks whether the user may read the key "*" taken as a
    // pattern: `allkeys`, or a read pattern that matches "*" (`%R~*`).
    let full = std::iter::once(&user.root).chain(&user.selectors).any(|s| {
        s.commands.allows(id)
            && (s.all_keys
                || s.keys
                    .iter()
                    .any(|p| p.read && glob::matches(&p.pattern, b"*", false)))
    });
    (!full)
        .then(|| format!("ERR {option} option of SORT denied due to insufficient ACL permissions."))
}

fn check_selector(
    selector: &Selector,
    spec: &CommandSpec,
    parent: Option<&CommandSpec>,
    args: &[Bytes],
) -> Result<(), Denied> {
    let top = parent.unwrap_or(spec);
    if !top.flags.contains(Flags::NO_AUTH) {
        let allowed = id_of(spec, parent).is_some_and(|id| {
            selector.commands.allows(id)
                || parent.is_none()
                    && selector
                        .commands
                        .allows_first_arg(id, args.get(1).map(|a| &a[..]))
        });
        if !allowed {
            return Err(Denied::Command);
        }
    }
    let channels = channel_args(spec);
    if !selector.all_keys && channels == Channels::Keys {
        for (nth, index) in spec.keys_of(args).into_iter().enumerate() {
            let (read, write) = spec.key_access.of_key(args, nth);
            let Some(key) = args.get(index) else {
                continue;
            };
            let matched = selector.keys.iter().any(|p| {
                (p.read || !read) && (p.write || !write) && glob::matches(&p.pattern, key, false)
            });
            if !matched {
                return Err(Denied::Key(index));
            }
        }
    }
    if !selector.all_channels {
        let (range, literal) = match channels {
            Channels::Keys | Channels::Released => return Ok(()),
            Channels::First => (1..2.min(args.len()), true),
            Channels::All => (1..args.len(), true),
            Channels::Patterns => (1..args.len(), false),
        };
        for index in range {
            if !selector.allows_channel(&args[index], !literal) {
                return Err(Denied::Channel(index));
            }
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Channels {
    /// Not a pub/sub command: its key arguments are keys, checked as such.
    Keys,
    /// SUNSUBSCRIBE: shard channels released, never granted (as
    /// UNSUBSCRIBE and PUNSUBSCRIBE, which have no key positions).
    Released,
    /// PUBLISH, SPUBLISH: the channel is the first argument.
    First,
    /// SUBSCRIBE, SSUBSCRIBE: every argument is a channel.
    All,
    /// PSUBSCRIBE: every argument is a pattern.
    Patterns,
}

/// The channel arguments of a command. Shard channels sit where keys do
/// (cluster routing), so they are checked as channels and not as keys.
fn channel_args(spec: &CommandSpec) -> Channels {
    match spec.handler {
        Handler::Session(SessionCmd::Publish | SessionCmd::Spublish) => Channels::First,
        Handler::Session(SessionCmd::Subscribe | SessionCmd::Ssubscribe) => Channels::All,
        Handler::Session(SessionCmd::Psubscribe) => Channels::Patterns,
        Handler::Session(SessionCmd::Sunsubscribe) => Channels::Released,
        _ => Channels::Keys,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::resolve;

    fn user(rules: &[&str]) -> User {
        let mut u = User::new("u", false);
        for r in rules {
            u.apply(r.as_bytes(), false).unwrap();
        }
        u.refresh();
        u
    }

    fn run(u: &User, cmd: &[&str]) -> Result<(), Denied> {
        let args: Vec<Bytes> = cmd.iter().map(|a| Bytes::from(a.to_string())).collect();
        let (spec, parent) = resolve(&args).unwrap();
        check(u, spec, parent, &args)
    }

    #[test]
    fn commands_subcommands_and_first_args() {
        let u = user(&["+get", "+config|get", "+select|0", "allkeys"]);
        assert_eq!(run(&u, &["get", "k"]), Ok(()));
        assert_eq!(run(&u, &["set", "k", "v"]), Err(Denied::Command));
        assert_eq!(run(&u, &["config", "get", "x"]), Ok(()));
        assert_eq!(run(&u, &["config", "set", "x", "y"]), Err(Denied::Command));
        assert_eq!(run(&u, &["select", "0"]), Ok(()));
        assert_eq!(run(&u, &["select", "1"]), Err(Denied::Command));
        assert_eq!(
            run(&u, &["auth", "a", "b"]),
            Ok(()),
            "AUTH is never refused"
        );
    }

    #[test]
    fn key_permissions_follow_the_commands_access() {
        let u = user(&["+@all", "%R~r*", "%W~w*", "~rw*"]);
        assert_eq!(run(&u, &["get", "r1"]), Ok(()));
        assert_eq!(run(&u, &["get", "w1"]), Err(Denied::Key(1)));
        assert_eq!(run(&u, &["set", "w1", "v"]), Ok(()));
        assert_eq!(run(&u, &["set", "w1", "v", "get"]), Err(Denied::Key(1)));
        assert_eq!(run(&u, &["incr", "w1"]), Err(Denied::Key(1)));
        assert_eq!(run(&u, &["incr", "rw1"]), Ok(()));
        assert_eq!(run(&u, &["sunionstore", "w1", "r1", "r2"]), Ok(()));
        assert_eq!(run(&u, &["sunionstore", "r1", "w1"]), Err(Denied::Key(1)));
        assert_eq!(run(&u, &["copy", "r1", "w1"]), Ok(()));
        assert_eq!(run(&u, &["mget", "r1", "rw", "x"]), Err(Denied::Key(3)));
    }

    #[test]
    fn channels_and_patterns() {
        let u = user(&["+@all", "allkeys", "&news.*"]);
        assert_eq!(run(&u, &["publish", "news.a", "m"]), Ok(()));
        assert_eq!(run(&u, &["publish", "sport", "m"]), Err(Denied::Channel(1)));
        assert_eq!(
            run(&u, &["subscribe", "news.a", "x"]),
            Err(Denied::Channel(2))
        );
        assert_eq!(run(&u, &["psubscribe", "news.*"]), Ok(()));
        assert_eq!(run(&u, &["psubscribe", "news.a*"]), Err(Denied::Channel(1)));
        assert_eq!(run(&u, &["spublish", "news.b", "m"]), Ok(()));
    }

    #[test]
    fn any_selector_may_allow_and_the_most_relevant_refusal_wins() {
        let u = user(&["+get", "~a*", "(+set ~b*)"]);
        assert_eq!(run(&u, &["get", "a1"]), Ok(()));
        assert_eq!(run(&u, &["set", "b1", "v"]), Ok(()));
        assert_eq!(run(&u, &["set", "a1", "v"]), Err(Denied::Key(1)));
        assert_eq!(run(&u, &["get", "b1"]), Err(Denied::Key(1)));
        assert_eq!(run(&u, &["del", "a1"]), Err(Denied::Command));
    }
}

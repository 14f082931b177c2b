//! An ACL user and its rules, as Redis 7 keeps them: flags, password
//! hashes, a root selector and any number of extra selectors, each with
//! the commands, key patterns and channel patterns it allows. Rules are
//! applied to a copy, so a failing ACL SETUSER changes nothing; command
//! rules are described back in the order they were given (Redis 7.2's
//! form: `-@all +@hash -hset`).

use super::commands::{self, CommandBits};
use sha2::{Digest, Sha256};
use std::fmt::Write;

/// Why a rule was refused; rendered by ACL SETUSER as
/// `ERR Error in ACL SETUSER modifier '<rule>': <text>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    Syntax,
    UnknownCommand,
    KeyAfterAllKeys,
    ChannelAfterAllChannels,
    NoSuchPassword,
    BadHash,
    FirstArgOfSubcommand,
}

impl RuleError {
    pub fn text(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::KeyAfterAllKeys => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAllChannels => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// A key pattern and the permissions it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    pub read: bool,
    pub write: bool,
}

impl KeyPattern {
    fn describe(&self, out: &mut String) {
        match (self.read, self.write) {
            (true, true) => out.push('~'),
            (true, false) => out.push_str("%R~"),
            _ => out.push_str("%W~"),
        }
        out.push_str(&String::from_utf8_lossy(&self.pattern));
    }
}

/// What one selector allows: a command is allowed by a user when its root
/// selector or any other selector allows the command, its keys and its
/// channels together.
#[derive(Debug, Clone)]
pub struct Selector {
    pub commands: CommandBits,
    /// Started from `+@all` (true) or `-@all`: what the rules below apply
    /// to, and whether commands added later would be allowed.
    all_commands_base: bool,
    /// The command rules after the base, lower-cased, in the order given;
    /// a rule replaces an earlier one on the same command or category.
    command_rules: Vec<String>,
    pub all_keys: bool,
    pub keys: Vec<KeyPattern>,
    pub all_channels: bool,
    pub channels: Vec<Vec<u8>>,
}

impl Selector {
    /// Nothing allowed; channels as `acl-pubsub-default` says.
    pub fn empty(all_channels: bool) -> Selector {
        Selector {
            commands: CommandBits::none(),
            all_commands_base: false,
            command_rules: Vec::new(),
            all_keys: false,
            keys: Vec::new(),
            all_channels,
            channels: Vec::new(),
        }
    }

    /// Everything allowed (the default user's `~* &* +@all`).
    pub fn everything() -> Selector {
        Selector {
            commands: CommandBits::all(),
            all_commands_base: true,
            command_rules: Vec::new(),
            all_keys: true,
            keys: Vec::new(),
            all_channels: true,
            channels: Vec::new(),
        }
    }

    /// Allows every command on every key and channel: permission checks
    /// can be skipped.
    pub fn unrestricted(&self) -> bool {
        self.all_keys && self.all_channels && self.commands.is_all()
    }

    /// Whether a channel (or, with `pattern`, a PSUBSCRIBE pattern, which
    /// only the very same pattern allows: a narrower grant must not widen)
    /// is allowed.
    pub fn allows_channel(&self, channel: &[u8], pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|p| {
                if pattern {
                    p[..] == channel[..]
                } else {
                    crate::glob::matches(p, channel, false)
                }
            })
    }

    /// Applies one selector rule (commands, keys, channels).
    pub fn apply(&mut self, rule: &[u8]) -> Result<(), RuleError> {
        let lower = rule.to_ascii_lowercase();
        match &lower[..] {
            b"allkeys" => return self.apply(b"~*"),
            b"resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
                return Ok(());
            }
            b"allchannels" => return self.apply(b"&*"),
            b"resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
                return Ok(());
            }
            b"allcommands" | b"+@all" => {
                self.commands = CommandBits::all();
                self.all_commands_base = true;
                self.command_rules.clear();
                return Ok(());
            }
            b"nocommands" | b"-@all" => {
                self.commands = CommandBits::none();
                self.all_commands_base = false;
                self.command_rules.clear();
                return Ok(());
            }
            _ => {}
        }
        match rule.first() {
            Some(b'~') | Some(b'%') => self.add_key_pattern(rule),
            Some(b'&') => self.add_channel(&rule[1..]),
            Some(b'+') | Some(b'-') => self.apply_command_rule(&lower),
            _ => Err(RuleError::Syntax),
        }
    }

    fn add_key_pattern(&mut self, rule: &[u8]) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::KeyAfterAllKeys);
        }
        let (read, write, pattern) = if rule[0] == b'%' {
            let tilde = rule
                .iter()
                .position(|&b| b == b'~')
                .ok_or(RuleError::Syntax)?;
            let (mut read, mut write) = (false, false);
            for &flag in &rule[1..tilde] {
                match flag.to_ascii_uppercase() {
                    b'R' => read = true,
                    b'W' => write = true,
                    _ => return Err(RuleError::Syntax),
                }
            }
            if !read && !write {
                return Err(RuleError::Syntax);
            }
            (read, write, &rule[tilde + 1..])
        } else {
            (true, true, &rule[1..])
        };
        if pattern == b"*" && read && write {
            self.all_keys = true;
            self.keys.clear();
            return Ok(());
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(existing) => {
                existing.read |= read;
                existing.write |= write;
            }
            None => self.keys.push(KeyPattern {
                pattern: pattern.to_vec(),
                read,
                write,
            }),
        }
        Ok(())
    }

    fn add_channel(&mut self, pattern: &[u8]) -> Result<(), RuleError> {
        // `&*` is `allchannels`, allowed again (a user of an ACL file under
        // `acl-pubsub-default allchannels` starts with it); another
        // pattern after it is refused, as Redis refuses it.
        if pattern == b"*" {
            self.all_channels = true;
            self.channels.clear();
            return Ok(());
        }
        if self.all_channels {
            return Err(RuleError::ChannelAfterAllChannels);
        }
        if !self.channels.iter().any(|c| c == pattern) {
            self.channels.push(pattern.to_vec());
        }
        Ok(())
    }

    /// `+cmd`, `-cmd`, `+@category`, `-@category`, `+cmd|sub`,
    /// `-cmd|sub`, `+cmd|first-arg`; `rule` is lower-cased.
    fn apply_command_rule(&mut self, rule: &[u8]) -> Result<(), RuleError> {
        let allow = rule[0] == b'+';
        let name = std::str::from_utf8(&rule[1..]).map_err(|_| RuleError::UnknownCommand)?;
        if let Some(category) = name.strip_prefix('@') {
            let ids = commands::in_category(category).ok_or(RuleError::UnknownCommand)?;
            for id in ids {
                self.commands.set(*id, allow);
            }
        } else if let Some((command, sub)) = name.split_once('|') {
            let parent = commands::command(command).ok_or(RuleError::UnknownCommand)?;
            match (parent.has_subcommands, sub.split_once('|')) {
                (true, None) => {
                    let id = commands::subcommand(command, sub).ok_or(RuleError::UnknownCommand)?;
                    if self.commands.allows(id) == allow {
                        // Already so (`+@all +client|id`): Redis keeps no
                        // rule for it, and neither does the description.
                        return Ok(());
                    }
                    self.commands.set(id, allow);
                }
                (true, Some((sub, _))) => {
                    commands::subcommand(command, sub).ok_or(RuleError::UnknownCommand)?;
                    return Err(RuleError::FirstArgOfSubcommand);
                }
                // Redis cannot take one first argument away from a command.
                (false, _) if !allow => return Err(RuleError::UnknownCommand),
                (false, Some(_)) => return Err(RuleError::UnknownCommand),
                (false, None) if sub.is_empty() => return Err(RuleError::Syntax),
                (false, None) => self.commands.allow_first_arg(parent.id, sub.as_bytes()),
            }
        } else {
            let found = commands::command(name).ok_or(RuleError::UnknownCommand)?;
            self.commands.set(found.id, allow);
            for id in found.subcommand_ids() {
                self.commands.set(id, allow);
            }
        }
        self.record_command_rule(allow, name);
        Ok(())
    }

    /// Drops earlier rules on the same command (and on its subcommands or
    /// first arguments when `name` is the whole command) or category, then
    /// appends this one.
    fn record_command_rule(&mut self, allow: bool, name: &str) {
        self.command_rules.retain(|existing| {
            let existing = &existing[1..];
            !(existing == name
                || existing
                    .strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('|')))
        });
        self.command_rules
            .push(format!("{}{name}", if allow { '+' } else { '-' }));
    }

    /// `+@all -get` / `-@all +@hash`: the command rules as given.
    pub fn describe_commands(&self) -> String {
        let mut out = String::from(if self.all_commands_base {
            "+@all"
        } else {
            "-@all"
        });
        for rule in &self.command_rules {
            out.push(' ');
            out.push_str(rule);
        }
        out
    }

    /// The key patterns as ACL GETUSER shows them (`~*`, `~a* %R~b*`).
    pub fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".to_string();
        }
        let mut out = String::new();
        for (i, k) in self.keys.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            k.describe(&mut out);
        }
        out
    }

    /// The channel patterns as ACL GETUSER shows them (`&*`, `&news.*`).
    pub fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".to_string();
        }
        let parts: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        parts.join(" ")
    }

    /// The selector as ACL LIST writes it: keys, channels, commands.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        let keys = self.describe_keys();
        if !keys.is_empty() {
            out.push_str(&keys);
            out.push(' ');
        }
        if self.all_channels {
            out.push_str("&* ");
        } else {
            out.push_str("resetchannels ");
            let channels = self.describe_channels();
            if !channels.is_empty() {
                out.push_str(&channels);
                out.push(' ');
            }
        }
        out.push_str(&self.describe_commands());
        out
    }
}

/// One user.
#[derive(Debug, Clone)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    pub nopass: bool,
    /// `Some(true)`: sanitize-payload, `Some(false)`: skip-sanitize-payload.
    pub sanitize_payload: Option<bool>,
    /// SHA-256 hex digests, in the order added.
    pub passwords: Vec<String>,
    pub root: Selector,
    pub selectors: Vec<Selector>,
    /// The root selector allows everything ([`User::refresh`] keeps it):
    /// commands run without a permission check.
    pub unrestricted: bool,
}

impl User {
    /// A new user as ACL SETUSER creates it: off, no password, nothing
    /// allowed.
    pub fn new(name: &str, all_channels: bool) -> User {
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            sanitize_payload: None,
            passwords: Vec::new(),
            root: Selector::empty(all_channels),
            selectors: Vec::new(),
            unrestricted: false,
        }
    }

    /// The `default` user of a fresh server: on, nopass, everything.
    pub fn default_user() -> User {
        User {
            name: "default".to_string(),
            enabled: true,
            nopass: true,
            sanitize_payload: None,
            passwords: Vec::new(),
            root: Selector::everything(),
            selectors: Vec::new(),
            unrestricted: true,
        }
    }

    /// Whether `password` opens this user (it must also be enabled).
    pub fn accepts(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let hash = password_hash(password);
        self.passwords.contains(&hash)
    }

    /// Whether any selector allows this channel (see
    /// [`Selector::allows_channel`]).
    pub fn allows_channel(&self, channel: &[u8], pattern: bool) -> bool {
        std::iter::once(&self.root)
            .chain(&self.selectors)
            .any(|s| s.allows_channel(channel, pattern))
    }

    /// Recomputes what is cached from the rules; call after applying them.
    pub fn refresh(&mut self) {
        self.unrestricted = self.root.unrestricted();
    }

    /// Applies one rule. `all_channels` is `acl-pubsub-default` (what
    /// `reset` and new selectors start from). Selector rules in
    /// parentheses arrive merged into one argument.
    pub fn apply(&mut self, rule: &[u8], all_channels: bool) -> Result<(), RuleError> {
        if rule.first() == Some(&b'(') && rule.last() == Some(&b')') && rule.len() >= 2 {
            let mut selector = Selector::empty(all_channels);
            for part in rule[1..rule.len() - 1]
                .split(|&b| b == b' ')
                .filter(|p| !p.is_empty())
            {
                selector.apply(part)?;
            }
            self.selectors.push(selector);
            return Ok(());
        }
        let lower = rule.to_ascii_lowercase();
        match &lower[..] {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"sanitize-payload" => self.sanitize_payload = Some(true),
            b"skip-sanitize-payload" => self.sanitize_payload = Some(false),
            b"clearselectors" => self.selectors.clear(),
            b"reset" => {
                for step in [
                    &b"resetpass"[..],
                    b"resetkeys",
                    b"resetchannels",
                    b"off",
                    b"sanitize-payload",
                    b"clearselectors",
                    b"-@all",
                ] {
                    self.apply(step, all_channels)?;
                }
                if all_channels {
                    self.apply(b"allchannels", all_channels)?;
                }
            }
            _ => match rule.first() {
                Some(b'>') => {
                    let hash = password_hash(&rule[1..]);
                    self.add_password(hash);
                }
                Some(b'#') => {
                    let hash = valid_hash(&rule[1..])?;
                    self.add_password(hash);
                }
                Some(b'<') => {
                    let hash = password_hash(&rule[1..]);
                    self.remove_password(&hash)?;
                }
                Some(b'!') => {
                    let hash = valid_hash(&rule[1..])?;
                    self.remove_password(&hash)?;
                }
                _ => self.root.apply(rule)?,
            },
        }
        Ok(())
    }

    fn add_password(&mut self, hash: String) {
        self.nopass = false;
        if !self.passwords.contains(&hash) {
            self.passwords.push(hash);
        }
    }

    fn remove_password(&mut self, hash: &str) -> Result<(), RuleError> {
        let before = self.passwords.len();
        self.passwords.retain(|p| p != hash);
        if self.passwords.len() == before {
            return Err(RuleError::NoSuchPassword);
        }
        Ok(())
    }

    /// What the user may do, as rules (no name, flags or passwords): the
    /// root selector's keys, channels and commands, then each selector in
    /// parentheses. [`User::from_permission_rules`] makes the same
    /// permissions from them (a script's caller carried in a log entry).
    pub fn permission_rules(&self) -> Vec<bytes::Bytes> {
        let mut rules: Vec<bytes::Bytes> = self
            .root
            .describe()
            .split(' ')
            .filter(|r| !r.is_empty())
            .map(|r| bytes::Bytes::copy_from_slice(r.as_bytes()))
            .collect();
        rules.extend(
            self.selectors
                .iter()
                .map(|s| bytes::Bytes::from(format!("({})", s.describe()))),
        );
        rules
    }

    /// A user with the permissions of [`User::permission_rules`]. Fails
    /// closed: if any rule is refused, the user may run nothing.
    pub fn from_permission_rules(rules: &[bytes::Bytes]) -> User {
        let mut user = User::new("", false);
        for rule in rules {
            if user.apply(rule, false).is_err() {
                user = User::new("", false);
                break;
            }
        }
        user.refresh();
        user
    }

    /// ACL GETUSER's flags.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        match self.sanitize_payload {
            Some(true) => flags.push("sanitize-payload"),
            Some(false) => flags.push("skip-sanitize-payload"),
            None => {}
        }
        flags
    }

    /// The user as an ACL LIST line (`user default on nopass ~* &* +@all`).
    pub fn describe(&self) -> String {
        let mut out = format!("user {}", self.name);
        for flag in self.flags() {
            out.push(' ');
            out.push_str(flag);
        }
        for p in &self.passwords {
            let _ = write!(out, " #{p}");
        }
        out.push(' ');
        out.push_str(&self.root.describe());
        for s in &self.selectors {
            let _ = write!(out, " ({})", s.describe());
        }
        out
    }
}

/// SHA-256 of a password, in lower-case hex.
pub fn password_hash(password: &[u8]) -> String {
    let digest = Sha256::digest(password);
    let mut hex = String::with_capacity(64);
    for b in digest {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

fn valid_hash(hash: &[u8]) -> Result<String, RuleError> {
    if hash.len() != 64 || !hash.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(RuleError::BadHash);
    }
    Ok(String::from_utf8_lossy(hash).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &[&str]) -> Result<User, RuleError> {
        let mut u = User::new("u", false);
        for r in rules {
            u.apply(r.as_bytes(), false)?;
        }
        Ok(u)
    }

    #[test]
    fn command_rules_are_described_in_order_and_replace_earlier_ones() {
        let u = user(&["+@hash", "-hset", "+get", "+config|get", "-config", "+GET"]).unwrap();
        assert_eq!(
            u.root.describe_commands(),
            "-@all +@hash -hset -config +get"
        );
        let u = user(&["+@all", "-@hash", "-hset", "+@hash"]).unwrap();
        assert_eq!(u.root.describe_commands(), "+@all -hset +@hash");
        let u = user(&["+get", "allcommands"]).unwrap();
        assert_eq!(u.root.describe_commands(), "+@all");
    }

    #[test]
    fn key_and_channel_patterns() {
        let u = user(&["~a*", "%R~r*", "%W~w*", "%RW~b", "~a*", "&ch*", "&ch*"]).unwrap();
        assert_eq!(u.root.describe_keys(), "~a* %R~r* %W~w* ~b");
        assert_eq!(u.root.describe_channels(), "&ch*");
        assert_eq!(
            user(&["allkeys", "~x"]).unwrap_err(),
            RuleError::KeyAfterAllKeys
        );
        assert_eq!(
            user(&["allchannels", "&x"]).unwrap_err(),
            RuleError::ChannelAfterAllChannels
        );
        assert_eq!(user(&["%X~a"]).unwrap_err(), RuleError::Syntax);
        assert_eq!(user(&["%~a"]).unwrap_err(), RuleError::Syntax);
    }

    #[test]
    fn passwords() {
        let u = user(&[">a", ">a", ">b", "<a"]).unwrap();
        assert_eq!(u.passwords, vec![password_hash(b"b")]);
        assert!(!u.accepts(b"b"), "off users accept nothing");
        let u = user(&["on", ">b"]).unwrap();
        assert!(u.accepts(b"b") && !u.accepts(b"a"));
        assert_eq!(user(&["<nope"]).unwrap_err(), RuleError::NoSuchPassword);
        assert_eq!(user(&["#abc"]).unwrap_err(), RuleError::BadHash);
        let u = user(&[">a", "nopass", "on"]).unwrap();
        assert!(u.passwords.is_empty() && u.accepts(b"anything"));
    }

    #[test]
    fn unknown_commands_and_categories_are_refused() {
        for rule in [
            "+nosuch",
            "+@nosuch",
            "+config|nosuch",
            "-select|1",
            "get",
            "+get|a|b",
        ] {
            assert_eq!(
                user(&[rule]).unwrap_err(),
                if rule == "get" {
                    RuleError::Syntax
                } else {
                    RuleError::UnknownCommand
                },
                "{rule}"
            );
        }
        assert_eq!(
            user(&["+config|get|x"]).unwrap_err(),
            RuleError::FirstArgOfSubcommand
        );
        assert!(user(&["+select|0"]).is_ok());
    }

    #[test]
    fn permission_rules_make_the_same_permissions() {
        let u = user(&[
            "on",
            ">pw",
            "~a*",
            "%R~r*",
            "&ch",
            "+@hash",
            "-hset",
            "(+set ~b*)",
        ])
        .unwrap();
        let rules = u.permission_rules();
        let copy = User::from_permission_rules(&rules);
        assert_eq!(copy.root.describe(), u.root.describe());
        assert_eq!(copy.selectors.len(), 1);
        assert_eq!(copy.selectors[0].describe(), u.selectors[0].describe());
        let everything = User::from_permission_rules(&User::default_user().permission_rules());
        assert!(everything.unrestricted);
        let refused = User::from_permission_rules(&[
            bytes::Bytes::from("+get"),
            bytes::Bytes::from("+nosuch"),
        ]);
        assert_eq!(refused.root.describe_commands(), "-@all");
    }

    /// Whatever rules made a user, the rules it describes (ACL LIST, the
    /// caller carried in a log entry) make the same permissions.
    #[test]
    fn described_rules_make_the_same_user() {
        let tokens = [
            "on",
            "off",
            "nopass",
            "reset",
            "allkeys",
            "resetkeys",
            "allchannels",
            "resetchannels",
            "allcommands",
            "nocommands",
            "clearselectors",
            "~*",
            "~k*",
            "%R~r*",
            "%W~w*",
            "&c*",
            "&*",
            "+@all",
            "-@all",
            "+@hash",
            "-@string",
            "+get",
            "-set",
            "+config|get",
            "-config|set",
            "+select|0",
            "+client",
            "-client|kill",
            "(+get ~a*)",
            "(~b* &d +@list -lpush)",
            "+debug|object",
            "-@dangerous",
        ];
        let mut seed: u64 = 7;
        let mut next = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        for _ in 0..2000 {
            let mut u = User::new("u", false);
            let count = next(7);
            for _ in 0..count {
                let _ = u.apply(tokens[next(tokens.len())].as_bytes(), false);
            }
            u.refresh();
            let rules = u.permission_rules();
            let copy = User::from_permission_rules(&rules);
            assert_eq!(copy.root.describe(), u.root.describe(), "{rules:?}");
            let described = |u: &User| {
                u.selectors
                    .iter()
                    .map(Selector::describe)
                    .collect::<Vec<_>>()
            };
            assert_eq!(described(&copy), described(&u), "{rules:?}");
            assert_eq!(copy.unrestricted, u.unrestricted, "{rules:?}");
        }
    }

    #[test]
    fn describe_matches_acl_list() {
        let u = user(&["reset"]).unwrap();
        assert_eq!(
            u.describe(),
            "user u off sanitize-payload resetchannels -@all"
        );
        assert_eq!(
            User::default_user().describe(),
            "user default on nopass ~* &* +@all"
        );
        let u = user(&["on", "~x*", "+get", "(+set %W~app*)"]).unwrap();
        assert_eq!(
            u.describe(),
            "user u on ~x* resetchannels -@all +get (%W~app* resetchannels -@all +set)"
        );
    }
}

//! ACL, as Redis 7 has it: users with passwords and rules (`user.rs`),
//! checked on every command (`check.rs`: commands, keys with read/write
//! access, channels; selectors), refusals and failed AUTHs logged
//! (`log.rs`), the ACL file (`file.rs`), and the ACL command. Users are
//! node-local, as in Redis Cluster. The `default` user's password is
//! `requirepass` (CONFIG SET requirepass resets it).

mod file;
mod log;

pub use kvasir_core::acl::{check, user, Denied, CATEGORIES};
pub use log::Context;

use crate::session::Session;
use bytes::Bytes;
use kvasir_core::args::parse_i64;
use kvasir_core::connection::AclCmd;
use kvasir_core::table::{all_commands, resolve, CommandSpec};
use kvasir_core::CmdError;
use kvasir_resp::Reply;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::rc::Rc;
use std::sync::Arc;
use user::User;

const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You \
     may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE \
     (assuming you have a Redis configuration file set) in order to store users in the Redis \
     configuration.";

/// A user, shared by the registry and the connections authenticated as it:
/// ACL SETUSER swaps in the changed user, so its connections see the new
/// rules at once; a script takes the current rules along (`Arc`).
pub type UserRef = Rc<RefCell<Arc<User>>>;

/// The node's users and ACL log.
pub struct Acl {
    users: BTreeMap<String, UserRef>,
    default: UserRef,
    log: log::AclLog,
}

impl Default for Acl {
    fn default() -> Acl {
        let default = Rc::new(RefCell::new(Arc::new(User::default_user())));
        let mut users = BTreeMap::new();
        users.insert("default".to_string(), default.clone());
        Acl {
            users,
            default,
            log: log::AclLog::default(),
        }
    }
}

impl Acl {
    pub fn default_user(&self) -> UserRef {
        self.default.clone()
    }

    /// The default user takes any password (`nopass`): protected mode's
    /// condition, as Redis's USER_FLAG_NOPASS.
    pub fn default_nopass(&self) -> bool {
        self.default.borrow().nopass
    }

    /// Whether a connection that has not authenticated must: the default
    /// user has a password or is off (Redis decides this per command, so
    /// CONFIG SET requirepass "" opens waiting connections).
    /// Whether no user is restricted in what it may run or touch.
    pub fn all_unrestricted(&self) -> bool {
        self.users.values().all(|u| u.borrow().unrestricted)
    }

    pub fn auth_required(&self) -> bool {
        let d = self.default.borrow();
        !(d.nopass && d.enabled)
    }

    /// The user `name` opens with `password`, if any.
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<UserRef> {
        let user = self.users.get(std::str::from_utf8(name).ok()?)?;
        user.borrow().accepts(password).then(|| user.clone())
    }

    pub fn user(&self, name: &str) -> Option<UserRef> {
        self.users.get(name).cloned()
    }

    /// The users a node starts with: `default` with `requirepass` as its
    /// password, then the ACL file's users (`aclfile`) or redis.conf's
    /// `user` lines; either may be given, not both (as Redis refuses).
    pub fn at_start(config: &crate::config::Config) -> Result<Acl, String> {
        let mut acl = Acl::default();
        acl.set_requirepass(config.requirepass.as_deref());
        let all_channels = config.stored.get("acl-pubsub-default") == Some("allchannels");
        match config.stored.get("aclfile").filter(|f| !f.is_empty()) {
            Some(_) if !config.acl_users.is_empty() => Err(BOTH_USERS_AND_FILE.to_string()),
            Some(path) => {
                acl.load_file(path, all_channels)
                    .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
                Ok(acl)
            }
            None => {
                acl.load_configured(&config.acl_users, all_channels)?;
                Ok(acl)
            }
        }
    }

    /// Replaces every user with the file's (a file without `default` gets
    /// the default one, allowed everything); nothing changes if any line is
    /// bad.
    pub fn load_file(&mut self, path: &str, all_channels: bool) -> Result<(), String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("Error loading ACLs, opening file '{path}': {e}"))?;
        let mut users = file::parse(&text, path, all_channels)?;
        if !users.iter().any(|u| u.name == "default") {
            users.push(User::default_user());
        }
        let mut gone: Vec<String> = self.users.keys().cloned().collect();
        for user in users {
            gone.retain(|n| *n != user.name);
            match self.users.get(&user.name) {
                // The default user's connections stay and see its new rules.
                Some(existing) => *existing.borrow_mut() = Arc::new(user),
                None => {
                    self.users
                        .insert(user.name.clone(), Rc::new(RefCell::new(Arc::new(user))));
                }
            }
        }
        for name in &gone {
            self.users.remove(name);
        }
        Ok(())
    }

    /// ACL LIST's lines.
    fn describe_all(&self) -> Vec<String> {
        self.users.values().map(|u| u.borrow().describe()).collect()
    }

    /// `requirepass`: the default user's only password, or nopass.
    pub fn set_requirepass(&self, password: Option<&str>) {
        let mut d = self.default.borrow_mut();
        let mut user = User::clone(&d);
        let rule = match password {
            Some(p) => format!(">{p}"),
            None => "nopass".to_string(),
        };
        // Neither rule can fail.
        let _ = user.apply(b"resetpass", false);
        let _ = user.apply(rule.as_bytes(), false);
        user.refresh();
        *d = Arc::new(user);
    }
}

/// The ACL error a refused command gets (Redis 7.0's texts).
fn refusal_error(denied: Denied, spec: &CommandSpec, parent: Option<&CommandSpec>) -> Reply {
    let text = match denied {
        Denied::Command => format!(
            "NOPERM this user has no permissions to run the '{}' command",
            spec.full_name(parent)
        ),
        Denied::Key(_) => {
            "NOPERM this user has no permissions to access one of the keys used as arguments"
                .to_string()
        }
        Denied::Channel(_) => {
            "NOPERM this user has no permissions to access one of the channels used as arguments"
                .to_string()
        }
    };
    Reply::error(text)
}

/// Checks the session's user may run `args`; a refusal is logged and
/// becomes the command's reply.
pub fn refuse(
    s: &Session,
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    args: &[Bytes],
    context: Context,
) -> Option<Reply> {
    let denied = denial(s, spec, parent, args, context)?;
    Some(refusal_error(denied, spec, parent))
}

/// A queued command checked again when EXEC runs it: Redis's error (and a
/// `multi` log entry) if the user's rules no longer allow it.
pub fn recheck_at_exec(
    s: &Session,
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    args: &[Bytes],
) -> Option<Reply> {
    let why = match denial(s, spec, parent, args, Context::Multi)? {
        Denied::Command => "no permission to execute the command or subcommand",
        Denied::Key(_) => "no permission to touch the specified keys",
        Denied::Channel(_) => "no permission to access one of the channels used as arguments",
    };
    Some(Reply::error(format!(
        "NOPERM ACLs rules changed between the moment the transaction was accumulated and the \
         EXEC call. This command is no longer allowed for the following reason: {why}"
    )))
}

/// Why the session's user may not run `args`, logged; None if it may.
fn denial(
    s: &Session,
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    args: &[Bytes],
    context: Context,
) -> Option<Denied> {
    let user = s.user.borrow();
    if user.unrestricted {
        return None;
    }
    let denied = check::check(&user, spec, parent, args).err()?;
    let refusal = log::Refusal {
        reason: denied.reason(),
        context,
        object: denied.object(spec, parent, args),
        username: user.name.clone(),
        client_info: s.info.line(),
    };
    drop(user);
    log_refusal(s, refusal);
    Some(denied)
}

/// For a script command (EVAL, FCALL...) of a restricted user: the user,
/// whose rules each `redis.call` of the script is checked against.
pub fn script_caller(s: &Session, spec: &CommandSpec) -> Option<Arc<User>> {
    if spec.group != "scripting" {
        return None;
    }
    let user = s.user.borrow();
    (!user.unrestricted).then(|| Arc::clone(&user))
}

/// SORT ... BY/GET of a user who may not read every key: Redis's error
/// (not an ACL refusal: not logged).
pub fn refuse_patterns(
    s: &Session,
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    args: &[Bytes],
) -> Option<Reply> {
    spec.pattern_reads?;
    kvasir_core::acl::pattern_refusal(&s.user.borrow(), spec, parent, args).map(Reply::error)
}

/// Logs a failed AUTH (or HELLO AUTH, `command` as sent) for `username`.
pub fn log_failed_auth(s: &Session, command: &[u8], username: &[u8]) {
    let refusal = log::Refusal {
        reason: "auth",
        context: if s.txn.in_multi() {
            Context::Multi
        } else {
            Context::Toplevel
        },
        object: String::from_utf8_lossy(command).into_owned(),
        username: String::from_utf8_lossy(username).into_owned(),
        client_info: s.info.line(),
    };
    log_refusal(s, refusal);
}

fn log_refusal(s: &Session, refusal: log::Refusal) {
    add_to_log(&s.server, refusal);
}

fn add_to_log(server: &crate::listener::Server, refusal: log::Refusal) {
    let max_len = server
        .config
        .borrow()
        .stored
        .get("acllog-max-len")
        .and_then(|v| v.parse().ok())
        .unwrap_or(128);
    server.acl.borrow_mut().log.add(refusal, max_len);
}

/// Logs the calls a script of client `client` had refused (context
/// `lua`), under the client's user and CLIENT LIST line.
pub fn log_script_refusals(server: &crate::listener::Server, client: u64) {
    let refused = server
        .local_store
        .borrow_mut()
        .with_store(|store| std::mem::take(&mut *store.script_refusals.borrow_mut()));
    if refused.is_empty() {
        return;
    }
    let info = server
        .clients
        .borrow()
        .iter()
        .find(|c| c.id == client)
        .cloned();
    let (username, client_info) = match &info {
        Some(c) => (c.user.borrow().clone(), c.line()),
        None => (String::new(), String::new()),
    };
    for (denied, object) in refused {
        let refusal = log::Refusal {
            reason: denied.reason(),
            context: Context::Lua,
            object,
            username: username.clone(),
            client_info: client_info.clone(),
        };
        add_to_log(server, refusal);
    }
}

fn stored_param(s: &Session, name: &str) -> Option<String> {
    s.server
        .config
        .borrow()
        .stored
        .get(name)
        .map(str::to_string)
}

/// The configured `aclfile`, or Redis's refusal without one.
fn acl_file(s: &Session) -> Result<String, CmdError> {
    stored_param(s, "aclfile")
        .filter(|f| !f.is_empty())
        .ok_or_else(|| CmdError::other(NO_ACL_FILE))
}

const BOTH_USERS_AND_FILE: &str = "Configuring Redis with users defined in redis.conf and at \
     the same setting an ACL file path is invalid. This setup is very likely to lead to \
     configuration errors and security holes, please define either an ACL file or declare \
     users directly in your redis.conf, but not both.";

/// `acl-pubsub-default`: new users and selectors start with every channel.
fn all_channels_by_default(s: &Session) -> bool {
    stored_param(s, "acl-pubsub-default").as_deref() == Some("allchannels")
}

pub fn run(s: &mut Session, sub: AclCmd, args: &[Bytes]) -> Result<Reply, CmdError> {
    match sub {
        AclCmd::Whoami => Ok(Reply::bulk_str(&s.user.borrow().name)),
        AclCmd::Users => Ok(Reply::Array(
            s.server
                .acl
                .borrow()
                .users
                .keys()
                .map(|n| Reply::bulk_str(n))
                .collect(),
        )),
        AclCmd::List => Ok(Reply::Array(
            s.server
                .acl
                .borrow()
                .describe_all()
                .into_iter()
                .map(|line| Reply::Bulk(Bytes::from(line)))
                .collect(),
        )),
        AclCmd::Getuser => Ok(getuser(s, &args[2])),
        AclCmd::Setuser => setuser(s, &args[2], &args[3..]),
        AclCmd::Deluser => deluser(s, &args[2..]),
        AclCmd::Cat if args.len() > 3 => Err(CmdError::other(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
            String::from_utf8_lossy(&args[1])
        ))),
        AclCmd::Cat => cat(args.get(2)),
        AclCmd::Genpass => genpass(args.get(2)),
        AclCmd::Dryrun => dryrun(s, &args[2], &args[3..]),
        AclCmd::Log => match args.get(2) {
            Some(a) if a.eq_ignore_ascii_case(b"reset") => {
                s.server.acl.borrow_mut().log.reset();
                Ok(Reply::ok())
            }
            Some(a) => {
                let count = parse_i64(a).map_err(|_| CmdError::NotInteger)?;
                Ok(s.server.acl.borrow().log.reply(count.max(0) as usize))
            }
            None => Ok(s.server.acl.borrow().log.reply(10)),
        },
        AclCmd::Load => {
            let path = acl_file(s)?;
            let all_channels = all_channels_by_default(s);
            // Redis 7.0 frees every user but `default` on a load and closes
            // their connections (this one after its reply), whether or not
            // the file changed them.
            let reloaded: Vec<String> = s
                .server
                .acl
                .borrow()
                .users
                .keys()
                .filter(|n| *n != "default")
                .cloned()
                .collect();
            s.server
                .acl
                .borrow_mut()
                .load_file(&path, all_channels)
                .map_err(|e| CmdError::other(format!("ERR {e}")))?;
            kill_clients_of(s, &reloaded);
            kill_revoked_subscribers(s, "default");
            Ok(Reply::ok())
        }
        AclCmd::Save => {
            let path = acl_file(s)?;
            let lines = s.server.acl.borrow().describe_all();
            file::save(std::path::Path::new(&path), &lines).map_err(|e| {
                tracing::warn!("Opening temp ACL file for ACL SAVE: {e}");
                CmdError::other(
                    "ERR There was an error trying to save the ACLs. Please check the server \
                     logs for more information",
                )
            })?;
            Ok(Reply::ok())
        }
        AclCmd::Help => Ok(kvasir_core::table::help_reply(HELP)),
    }
}

/// ACL SETUSER name [rule ...].
fn setuser(s: &mut Session, name: &[u8], rules: &[Bytes]) -> Result<Reply, CmdError> {
    let all_channels = all_channels_by_default(s);
    s.server
        .acl
        .borrow_mut()
        .set_user(name, rules, all_channels, false)?;
    kill_revoked_subscribers(s, &String::from_utf8_lossy(name));
    Ok(Reply::ok())
}

/// Closes the connections of `name` subscribed to a channel or pattern the
/// user may no longer use, as Redis does when channel permissions shrink.
fn kill_revoked_subscribers(s: &mut Session, name: &str) {
    let Some(user) = s.server.acl.borrow().user(name) else {
        return;
    };
    let user = user.borrow();
    let targets: Vec<_> = s
        .server
        .clients
        .borrow()
        .iter()
        .filter(|c| c.subscribed() && *c.user.borrow() == name)
        .cloned()
        .collect();
    for c in targets {
        let revoked =
            s.server
                .pubsub
                .borrow()
                .subscriptions_of(c.id)
                .iter()
                .any(|(kind, channel)| {
                    !user.allows_channel(channel, *kind == crate::pubsub::Kind::Pattern)
                });
        if revoked {
            crate::clients::Clients::kill(&c);
            if c.id == s.info.id {
                s.close = true;
            }
        }
    }
}

impl Acl {
    /// Applies `rules` to a copy of user `name` (a new user, or with
    /// `fresh` any, starts off and allowed nothing), which replaces it only
    /// when every rule was accepted; connections authenticated as it see
    /// the change at once.
    pub fn set_user(
        &mut self,
        name: &[u8],
        rules: &[Bytes],
        all_channels: bool,
        fresh: bool,
    ) -> Result<(), CmdError> {
        if name.iter().any(|&b| b == b' ' || b == 0) {
            return Err(CmdError::other(
                "ERR Usernames can't contain spaces or null characters",
            ));
        }
        let name = String::from_utf8_lossy(name).into_owned();
        let rules = merge_selectors(rules)?;
        let existing = self.user(&name);
        let mut user = match &existing {
            Some(u) if !fresh => User::clone(&u.borrow()),
            _ => User::new(&name, all_channels),
        };
        for rule in &rules {
            if let Err(e) = user.apply(rule, all_channels) {
                return Err(CmdError::other(format!(
                    "ERR Error in ACL SETUSER modifier '{}': {}",
                    String::from_utf8_lossy(rule),
                    e.text()
                )));
            }
        }
        user.refresh();
        match existing {
            Some(u) => *u.borrow_mut() = Arc::new(user),
            None => {
                self.users
                    .insert(name, Rc::new(RefCell::new(Arc::new(user))));
            }
        }
        Ok(())
    }

    /// The users of redis.conf's `user <name> <rule> ...` lines, each
    /// made new from its rules as Redis loads them.
    pub fn load_configured(
        &mut self,
        declarations: &[Vec<String>],
        all_channels: bool,
    ) -> Result<(), String> {
        for declaration in declarations {
            let Some((name, rules)) = declaration.split_first() else {
                continue;
            };
            let rules: Vec<Bytes> = rules.iter().map(|r| Bytes::from(r.clone())).collect();
            self.set_user(name.as_bytes(), &rules, all_channels, true)
                .map_err(|e| {
                    let text = e.to_reply();
                    let text = match &text {
                        Reply::Error(t) => t.trim_start_matches("ERR ").to_string(),
                        _ => String::new(),
                    };
                    format!("Error in user declaration '{name}': {text}")
                })?;
        }
        Ok(())
    }
}

/// Joins `(+get ~a*)` given over several arguments into one rule.
fn merge_selectors(rules: &[Bytes]) -> Result<Vec<Vec<u8>>, CmdError> {
    let mut merged = Vec::with_capacity(rules.len());
    // The selector being joined, and the argument that opened it.
    let mut open: Option<(Vec<u8>, &Bytes)> = None;
    for rule in rules {
        match open.as_mut() {
            Some((selector, _)) => {
                selector.push(b' ');
                selector.extend_from_slice(rule);
                if rule.ends_with(b")") {
                    merged.extend(open.take().map(|(s, _)| s));
                }
            }
            None if rule.starts_with(b"(") && !rule.ends_with(b")") => {
                open = Some((rule.to_vec(), rule));
            }
            None => merged.push(rule.to_vec()),
        }
    }
    if let Some((_, first)) = open {
        return Err(CmdError::other(format!(
            "ERR Unmatched parenthesis in acl selector starting at '{}'.",
            String::from_utf8_lossy(first)
        )));
    }
    Ok(merged)
}

/// ACL DELUSER name...: removes the users and closes their connections.
fn deluser(s: &mut Session, names: &[Bytes]) -> Result<Reply, CmdError> {
    if names.iter().any(|u| &u[..] == b"default") {
        return Err(CmdError::other("ERR The 'default' user cannot be removed"));
    }
    let mut removed = Vec::new();
    {
        let mut acl = s.server.acl.borrow_mut();
        for name in names {
            let name = String::from_utf8_lossy(name).into_owned();
            if acl.users.remove(&name).is_some() {
                removed.push(name);
            }
        }
    }
    kill_clients_of(s, &removed);
    Ok(Reply::Int(removed.len() as i64))
}

/// Closes every connection authenticated as one of `names`.
pub fn kill_clients_of(s: &mut Session, names: &[String]) -> usize {
    if names.is_empty() {
        return 0;
    }
    let targets: Vec<_> = s
        .server
        .clients
        .borrow()
        .iter()
        .filter(|c| names.contains(&c.user.borrow()))
        .cloned()
        .collect();
    for c in &targets {
        crate::clients::Clients::kill(c);
        if c.id == s.info.id {
            s.close = true;
        }
    }
    targets.len()
}

fn getuser(s: &Session, name: &[u8]) -> Reply {
    let Some(user) = s.server.acl.borrow().user(&String::from_utf8_lossy(name)) else {
        return Reply::Nil;
    };
    let u = user.borrow();
    let selector_fields = |sel: &user::Selector| {
        vec![
            (
                Reply::bulk_str("commands"),
                Reply::Bulk(Bytes::from(sel.describe_commands())),
            ),
            (
                Reply::bulk_str("keys"),
                Reply::Bulk(Bytes::from(sel.describe_keys())),
            ),
            (
                Reply::bulk_str("channels"),
                Reply::Bulk(Bytes::from(sel.describe_channels())),
            ),
        ]
    };
    let mut fields = vec![
        (
            Reply::bulk_str("flags"),
            Reply::Array(u.flags().into_iter().map(Reply::bulk_str).collect()),
        ),
        (
            Reply::bulk_str("passwords"),
            Reply::Array(
                u.passwords
                    .iter()
                    .map(|p| Reply::Bulk(Bytes::from(p.clone())))
                    .collect(),
            ),
        ),
    ];
    fields.extend(selector_fields(&u.root));
    fields.push((
        Reply::bulk_str("selectors"),
        Reply::Array(
            u.selectors
                .iter()
                .map(|sel| Reply::Map(selector_fields(sel)))
                .collect(),
        ),
    ));
    Reply::Map(fields)
}

/// ACL CAT: the categories, or the commands (and `parent|sub`
/// subcommands) of one.
fn cat(category: Option<&Bytes>) -> Result<Reply, CmdError> {
    let Some(category) = category else {
        return Ok(Reply::Array(
            CATEGORIES.iter().map(|c| Reply::bulk_str(c)).collect(),
        ));
    };
    let lowered = String::from_utf8_lossy(category).to_ascii_lowercase();
    let Some(&category) = CATEGORIES.iter().find(|c| **c == lowered) else {
        return Err(CmdError::other(format!(
            "ERR Unknown category '{}'",
            String::from_utf8_lossy(category)
        )));
    };
    let mut names = Vec::new();
    for spec in all_commands() {
        if spec.acl.contains(&category) {
            names.push(Reply::bulk_str(spec.name));
        }
        for sub in spec.subcommands {
            if sub.acl.contains(&category) {
                names.push(Reply::Bulk(Bytes::from(format!(
                    "{}|{}",
                    spec.name, sub.name
                ))));
            }
        }
    }
    Ok(Reply::Array(names))
}

/// ACL GENPASS [bits]: random hex, 256 bits unless told.
fn genpass(bits: Option<&Bytes>) -> Result<Reply, CmdError> {
    let bits = match bits {
        None => 256,
        Some(b) => match parse_i64(b) {
            Ok(n) if (1..=4096).contains(&n) => n as usize,
            _ => {
                return Err(CmdError::other(
                    "ERR ACL GENPASS argument must be the number of bits for the output \
                     password, a positive number up to 4096",
                ))
            }
        },
    };
    let chars = bits.div_ceil(4);
    let mut random = vec![0u8; chars.div_ceil(2)];
    getrandom::fill(&mut random).map_err(|e| CmdError::other(format!("ERR {e}")))?;
    let mut hex = String::with_capacity(chars + 1);
    for b in random {
        let _ = write!(hex, "{b:02x}");
    }
    hex.truncate(chars);
    Ok(Reply::Bulk(Bytes::from(hex)))
}

/// ACL DRYRUN user command [arg ...]: OK when the user may run it, or
/// why not (a bulk reply, not an error, as Redis answers).
fn dryrun(s: &Session, user: &[u8], command: &[Bytes]) -> Result<Reply, CmdError> {
    let Some(user_ref) = s.server.acl.borrow().user(&String::from_utf8_lossy(user)) else {
        return Err(CmdError::other(format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(user)
        )));
    };
    // The command by the name clients use (rename-command), as Redis's
    // DRYRUN looks it up; the rules themselves name commands by their own.
    let mut command = command.to_vec();
    if s.server
        .config
        .borrow()
        .renames
        .apply(&mut command)
        .is_err()
        || kvasir_core::table::lookup(&command[0]).is_none()
    {
        return Err(CmdError::other(format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(&command[0])
        )));
    }
    let command = &command[..];
    let (spec, parent) = resolve(command)?;
    let user = user_ref.borrow();
    let denied = match check::check(&user, spec, parent, command) {
        Ok(()) => return Ok(Reply::ok()),
        Err(denied) => denied,
    };
    let object = denied.object(spec, parent, command);
    let text = match denied {
        Denied::Command => format!("This user has no permissions to run the '{object}' command"),
        Denied::Key(_) => format!("This user has no permissions to access the '{object}' key"),
        Denied::Channel(_) => {
            format!("This user has no permissions to access the '{object}' channel")
        }
    };
    Ok(Reply::Bulk(Bytes::from(text)))
}

const HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Prints this help.",
];

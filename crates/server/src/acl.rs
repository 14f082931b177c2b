//! ACL, as Redis 7.0 answers it for a server with only the `default` user:
//! on, with `requirepass` as its password (nopass without one), every key,
//! channel and command allowed. WHOAMI, USERS, LIST, GETUSER, CAT (from the
//! command table's ACL categories), GENPASS, DRYRUN, LOG and the refusals of
//! DELUSER, LOAD and SAVE give Redis's replies and texts. Creating users or
//! changing rules (SETUSER) is not built: it is refused with an error.

use crate::session::Session;
use bytes::Bytes;
use kvasir_core::args::parse_i64;
use kvasir_core::connection::AclCmd;
use kvasir_core::table::{all_commands, resolve};
use kvasir_core::CmdError;
use kvasir_resp::Reply;
use sha2::{Digest, Sha256};
use std::fmt::Write;

/// Redis 7.0's ACL categories, in its order.
const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You \
     may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE \
     (assuming you have a Redis configuration file set) in order to store users in the Redis \
     configuration.";

pub fn run(s: &Session, sub: AclCmd, args: &[Bytes]) -> Result<Reply, CmdError> {
    match sub {
        AclCmd::Whoami => Ok(Reply::bulk_str("default")),
        AclCmd::Users => Ok(Reply::Array(vec![Reply::bulk_str("default")])),
        AclCmd::List => Ok(Reply::Array(vec![Reply::Bulk(Bytes::from(
            default_user_line(s),
        ))])),
        AclCmd::Getuser => Ok(getuser(s, &args[2])),
        AclCmd::Cat => cat(args.get(2)),
        AclCmd::Genpass => genpass(args.get(2)),
        AclCmd::Dryrun => dryrun(&args[2], &args[3..]),
        // Nothing is logged: with one user allowed everything, only failed
        // AUTHs could be, and they are not recorded.
        AclCmd::Log => match args.get(2) {
            Some(a) if a.eq_ignore_ascii_case(b"reset") => Ok(Reply::ok()),
            Some(a) => parse_i64(a)
                .ok()
                .filter(|n| *n >= 0)
                .map(|_| Reply::Array(Vec::new()))
                .ok_or(CmdError::NotInteger),
            None => Ok(Reply::Array(Vec::new())),
        },
        AclCmd::Deluser => {
            if args[2..].iter().any(|u| &u[..] == b"default") {
                return Err(CmdError::other("ERR The 'default' user cannot be removed"));
            }
            Ok(Reply::Int(0))
        }
        AclCmd::Setuser => Err(CmdError::other(
            "ERR ACL SETUSER is not supported: Kvasir has only the default user (its password \
             is requirepass)",
        )),
        AclCmd::Load | AclCmd::Save => Err(CmdError::other(NO_ACL_FILE)),
        AclCmd::Help => Ok(kvasir_core::table::help_reply(HELP)),
    }
}

fn password_hash(s: &Session) -> Option<String> {
    let config = s.server.config.borrow();
    let pass = config.requirepass.as_ref()?;
    let digest = Sha256::digest(pass.as_bytes());
    let mut hex = String::with_capacity(64);
    for b in digest {
        let _ = write!(hex, "{b:02x}");
    }
    Some(hex)
}

/// `user default on nopass ~* &* +@all`, or `#<sha256>` with a password.
fn default_user_line(s: &Session) -> String {
    let pass = match password_hash(s) {
        Some(h) => format!("#{h}"),
        None => "nopass".to_string(),
    };
    format!("user default on {pass} ~* &* +@all")
}

fn getuser(s: &Session, name: &[u8]) -> Reply {
    if name != b"default" {
        return Reply::Nil;
    }
    let hash = password_hash(s);
    let mut flags = vec![Reply::bulk_str("on")];
    if hash.is_none() {
        flags.push(Reply::bulk_str("nopass"));
    }
    let passwords = hash
        .into_iter()
        .map(|h| Reply::Bulk(Bytes::from(h)))
        .collect();
    Reply::Map(vec![
        (Reply::bulk_str("flags"), Reply::Array(flags)),
        (Reply::bulk_str("passwords"), Reply::Array(passwords)),
        (Reply::bulk_str("commands"), Reply::bulk_str("+@all")),
        (Reply::bulk_str("keys"), Reply::bulk_str("~*")),
        (Reply::bulk_str("channels"), Reply::bulk_str("&*")),
        (Reply::bulk_str("selectors"), Reply::Array(Vec::new())),
    ])
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

/// ACL DRYRUN user command [arg ...]: OK when the default user may run it
/// (it may run everything that exists, with the right arity).
fn dryrun(user: &[u8], command: &[Bytes]) -> Result<Reply, CmdError> {
    if user != b"default" {
        return Err(CmdError::other(format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(user)
        )));
    }
    if kvasir_core::table::lookup(&command[0]).is_none() {
        return Err(CmdError::other(format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(&command[0])
        )));
    }
    resolve(command)?;
    Ok(Reply::ok())
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

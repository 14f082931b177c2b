//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT.

use super::vm::{self, Access, Program, Run};
use super::{sha1_hex, ScriptFlags};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::Keyspace;
use crate::store::{Ctx, Store};
use crate::table::{cmd, container, help_reply, CommandSpec, Flags, Keyless};
use bytes::Bytes;
use kvasir_resp::Reply;

const SCRIPTING: &str = "scripting";
const EVAL_FLAGS: Flags = Flags::WRITE
    .union(Flags::NOSCRIPT)
    .union(Flags::STALE)
    .union(Flags::SKIP_MONITOR)
    .union(Flags::MAY_REPLICATE)
    .union(Flags::MOVABLEKEYS);
const EVAL_RO_FLAGS: Flags = Flags::READONLY
    .union(Flags::NOSCRIPT)
    .union(Flags::STALE)
    .union(Flags::SKIP_MONITOR)
    .union(Flags::MOVABLEKEYS);

pub const COMMANDS: &[CommandSpec] = &[
    super::with_script_keys(cmd(
        "eval",
        -3,
        EVAL_FLAGS,
        (0, 0, 0),
        &["slow", "scripting"],
        SCRIPTING,
        "2.6.0",
        "Executes a server-side Lua script.",
        crate::write_handler!(eval),
    ))
    .reaching(Keyless::AnyShard),
    super::with_script_keys(cmd(
        "evalsha",
        -3,
        EVAL_FLAGS,
        (0, 0, 0),
        &["slow", "scripting"],
        SCRIPTING,
        "2.6.0",
        "Executes a server-side Lua script by SHA1 digest.",
        crate::write_handler!(evalsha),
    ))
    .reaching(Keyless::AnyShard),
    super::with_script_keys(cmd(
        "eval_ro",
        -3,
        EVAL_RO_FLAGS,
        (0, 0, 0),
        &["slow", "scripting"],
        SCRIPTING,
        "7.0.0",
        "Executes a read-only server-side Lua script.",
        crate::read_handler!(eval_ro),
    ))
    .reaching(Keyless::AnyShard),
    super::with_script_keys(cmd(
        "evalsha_ro",
        -3,
        EVAL_RO_FLAGS,
        (0, 0, 0),
        &["slow", "scripting"],
        SCRIPTING,
        "7.0.0",
        "Executes a read-only server-side Lua script by SHA1 digest.",
        crate::read_handler!(evalsha_ro),
    ))
    .reaching(Keyless::AnyShard),
    container(
        "script",
        -2,
        &["slow"],
        SCRIPTING,
        "2.6.0",
        "A container for Lua scripts management commands.",
        SCRIPT_SUBCOMMANDS,
    ),
];

const SCRIPT_SUBCOMMANDS: &[CommandSpec] = &[
    cmd(
        "load",
        3,
        Flags::WRITE.union(Flags::NOSCRIPT).union(Flags::STALE),
        (0, 0, 0),
        &["slow", "scripting"],
        SCRIPTING,
        "2.6.0",
        "Loads a server-side Lua script to the script cache.",
        crate::write_handler!(script_load),
    )
    .reaching(Keyless::EveryShard)
    .with_tips(&["request_policy:all_nodes", "response_policy:all_succeeded"]),
    cmd(
        "exists",
        -3,
        Flags::NOSCRIPT,
        (0, 0, 0),
        &["slow", "scripting"],
        SCRIPTING,
        "2.6.0",
        "Determines whether server-side Lua scripts exist in the script cache.",
        crate::read_handler!(script_exists),
    )
    .reaching(Keyless::AnyShard)
    .with_tips(&[
        "request_policy:all_shards",
        "response_policy:agg_logical_and",
    ]),
    cmd(
        "flush",
        -2,
        Flags::WRITE.union(Flags::NOSCRIPT),
        (0, 0, 0),
        &["slow", "scripting"],
        SCRIPTING,
        "2.6.0",
        "Removes all server-side Lua scripts from the script cache.",
        crate::write_handler!(script_flush),
    )
    .reaching(Keyless::EveryShard)
    .with_tips(&["request_policy:all_nodes", "response_policy:all_succeeded"]),
    cmd(
        "kill",
        2,
        Flags::NOSCRIPT.union(Flags::ALLOW_BUSY),
        (0, 0, 0),
        &["slow", "scripting"],
        SCRIPTING,
        "2.6.0",
        "Terminates a server-side Lua script during execution.",
        crate::read_handler!(super::kill),
    )
    .reaching(Keyless::AnyShard)
    .with_tips(&["request_policy:all_shards", "response_policy:one_succeeded"]),
    cmd(
        "help",
        2,
        Flags::LOADING.union(Flags::STALE),
        (0, 0, 0),
        &["slow", "scripting"],
        SCRIPTING,
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        crate::read_handler!(script_help),
    ),
];

/// KEYS and ARGV of `CMD body-or-name numkeys key... arg...`.
pub fn split_keys(args: &[Bytes]) -> Result<(&[Bytes], &[Bytes]), CmdError> {
    let n = crate::args::parse_i64(&args[2])?;
    if n < 0 {
        return Err(CmdError::other("ERR Number of keys can't be negative"));
    }
    if n as usize > args.len() - 3 {
        return Err(CmdError::other(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let rest = &args[3..];
    Ok(rest.split_at(n as usize))
}

/// The flags of a `#!lua flags=...` first line; `None` without a shebang
/// (an old-style script: it may write).
pub fn shebang_flags(body: &[u8]) -> Result<Option<ScriptFlags>, CmdError> {
    if !body.starts_with(b"#!") {
        return Ok(None);
    }
    let line_end = body.iter().position(|&c| c == b'\n').unwrap_or(body.len());
    let line = String::from_utf8_lossy(&body[2..line_end]);
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if engine != "lua" {
        return Err(CmdError::other(format!(
            "ERR Unexpected engine in script shebang: {engine}"
        )));
    }
    let mut flags = ScriptFlags::default();
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(CmdError::other(format!(
                "ERR Unknown lua shebang option: {part}"
            )));
        };
        for name in list.split(',').filter(|n| !n.is_empty()) {
            match ScriptFlags::from_name(name) {
                Some(f) => flags.0 |= f.0,
                None => {
                    return Err(CmdError::other(format!(
                        "ERR Unexpected flag in script shebang: {name}"
                    )))
                }
            }
        }
    }
    Ok(Some(flags))
}

fn eval<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let body = args[1].clone();
    let sha = sha1_hex(&body);
    run_body(store, db, args, ctx, &sha, body, true)
}

fn evalsha<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let sha = sha_arg(&args[1]);
    let body = store
        .scripts
        .bodies
        .get(sha.as_ref())
        .cloned()
        .ok_or_else(no_script)?;
    // The body is cached already.
    run_body(store, db, args, ctx, &sha, body, false)
}

/// An EVALSHA digest as the lower-case key of `bodies`, borrowed when it
/// is one already (as clients send it), so the common case allocates
/// nothing.
fn sha_arg(arg: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(arg) {
        Ok(s) if !s.bytes().any(|c| c.is_ascii_uppercase()) => std::borrow::Cow::Borrowed(s),
        _ => std::borrow::Cow::Owned(String::from_utf8_lossy(arg).to_ascii_lowercase()),
    }
}

fn run_body<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
    sha: &str,
    body: Bytes,
    cache: bool,
) -> CmdResult {
    let (keys, argv) = split_keys(args)?;
    let flags = shebang_flags(&body)?;
    let read_only = flags.is_some_and(|f| f.contains(ScriptFlags::NO_WRITES));
    if flags.is_some_and(|f| f.contains(ScriptFlags::ALLOW_OOM)) {
        // `allow-oom` runs any command over maxmemory (Redis's
        // scriptVerifyOOM).
        store.script_oom.set(false);
    }
    let run = Run {
        db,
        ctx: *ctx,
        read_only,
        keys,
        argv,
        command: args,
    };
    let (outcome, compiled) = vm::run(
        Access::Write(store),
        Program::Eval { sha, body: &body },
        run,
    );
    // EVAL caches its body as SCRIPT LOAD would (Redis does too).
    if cache && compiled && !store.scripts.bodies.contains_key(sha) {
        store.scripts.bodies.insert(sha.to_string(), body);
    }
    outcome.into_result()
}

fn eval_ro<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let body = args[1].clone();
    let sha = sha1_hex(&body);
    run_read_only(store, db, args, ctx, &sha, &body)
}

fn evalsha_ro<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let sha = sha_arg(&args[1]);
    let body = store
        .scripts
        .bodies
        .get(sha.as_ref())
        .cloned()
        .ok_or_else(no_script)?;
    run_read_only(store, db, args, ctx, &sha, &body)
}

fn run_read_only<K: Keyspace>(
    store: &Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
    sha: &str,
    body: &[u8],
) -> CmdResult {
    let (keys, argv) = split_keys(args)?;
    if let Some(flags) = shebang_flags(body)? {
        if !flags.contains(ScriptFlags::NO_WRITES) {
            return Err(super::ro_write_flag_error());
        }
    }
    let run = Run {
        db,
        ctx: *ctx,
        read_only: true,
        keys,
        argv,
        command: args,
    };
    vm::run(Access::Read(store), Program::Eval { sha, body }, run)
        .0
        .into_result()
}

fn no_script() -> CmdError {
    CmdError::other("NOSCRIPT No matching script. Please use EVAL.")
}

fn script_load<K: Keyspace>(
    store: &mut Store<K>,
    _db: usize,
    args: &[Bytes],
    _ctx: &Ctx,
) -> CmdResult {
    let body = args[2].clone();
    shebang_flags(&body)?;
    let sha = sha1_hex(&body);
    if !store.scripts.bodies.contains_key(&sha) {
        let mut vm = store
            .scripts
            .take_vm()
            .map_err(|e| CmdError::other(format!("ERR {e}")))?;
        let compiled = vm.compile(&sha, &body);
        store.scripts.put_vm(vm);
        compiled?;
        store.scripts.bodies.insert(sha.clone(), body);
    }
    Ok(Reply::bulk_str(&sha))
}

fn script_exists<K: Keyspace>(
    store: &Store<K>,
    _db: usize,
    args: &[Bytes],
    _ctx: &Ctx,
) -> CmdResult {
    Ok(Reply::Array(
        args[2..]
            .iter()
            .map(|sha| {
                let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                Reply::Int(store.scripts.bodies.contains_key(&sha) as i64)
            })
            .collect(),
    ))
}

/// SCRIPT FLUSH [ASYNC|SYNC]; both empty the cache at once.
fn script_flush<K: Keyspace>(
    store: &mut Store<K>,
    _db: usize,
    args: &[Bytes],
    _ctx: &Ctx,
) -> CmdResult {
    super::check_flush_mode(args, "ERR SCRIPT FLUSH only support SYNC|ASYNC option")?;
    store.scripts.flush_bodies();
    Ok(Reply::ok())
}

fn script_help<K: Keyspace>(
    _store: &Store<K>,
    _db: usize,
    _args: &[Bytes],
    _ctx: &Ctx,
) -> CmdResult {
    Ok(help_reply(&[
        "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DEBUG (YES|SYNC|NO)",
        "    Set the debug mode for subsequent scripts executed.",
        "EXISTS <sha1> [<sha1> ...]",
        "    Return information about the existence of the scripts in the script cache.",
        "FLUSH [ASYNC|SYNC]",
        "    Flush the Lua scripts cache. Very dangerous on replicas.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the scripts cache.",
        "    * SYNC: Synchronously flush the scripts cache.",
        "KILL",
        "    Kill the currently executing Lua script.",
        "LOAD <script>",
        "    Load a script into the scripts cache without executing it.",
        "HELP",
        "    Prints this help.",
    ]))
}

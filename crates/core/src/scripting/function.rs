//! FUNCTION and FCALL: libraries of named Lua functions, replicated shard
//! state like the keys (FUNCTION LOAD is a write every shard applies).

use super::vm::{self, Access, Program, Run};
use super::{Library, ScriptFlags};
use crate::args::eq_ic;
use crate::error::{CmdError, CmdResult};
use crate::glob::matches as glob_match;
use crate::keyspace::Keyspace;
use crate::store::{Ctx, Store};
use crate::table::{cmd, container, help_reply, CommandSpec, Flags, Keyless};
use bytes::Bytes;
use kvasir_resp::Reply;

const SCRIPTING: &str = "scripting";

pub const COMMANDS: &[CommandSpec] = &[
    super::with_script_keys(cmd(
        "fcall",
        -3,
        Flags::WRITE
            .union(Flags::NOSCRIPT)
            .union(Flags::STALE)
            .union(Flags::SKIP_MONITOR)
            .union(Flags::MAY_REPLICATE)
            .union(Flags::MOVABLEKEYS),
        (0, 0, 0),
        &["slow", "scripting"],
        SCRIPTING,
        "7.0.0",
        "Invokes a function.",
        crate::write_handler!(fcall),
    ))
    .reaching(Keyless::AnyShard),
    super::with_script_keys(cmd(
        "fcall_ro",
        -3,
        Flags::READONLY
            .union(Flags::NOSCRIPT)
            .union(Flags::STALE)
            .union(Flags::SKIP_MONITOR)
            .union(Flags::MOVABLEKEYS),
        (0, 0, 0),
        &["slow", "scripting"],
        SCRIPTING,
        "7.0.0",
        "Invokes a read-only function.",
        crate::read_handler!(fcall_ro),
    ))
    .reaching(Keyless::AnyShard),
    container(
        "function",
        -2,
        &["slow"],
        SCRIPTING,
        "7.0.0",
        "A container for function commands.",
        FUNCTION_SUBCOMMANDS,
    ),
];

const ADMIN_WRITE: Flags = Flags::WRITE.union(Flags::DENYOOM).union(Flags::NOSCRIPT);

const FUNCTION_SUBCOMMANDS: &[CommandSpec] = &[
    cmd(
        "load",
        -3,
        ADMIN_WRITE,
        (0, 0, 0),
        &["write", "slow", "scripting"],
        SCRIPTING,
        "7.0.0",
        "Creates a library.",
        crate::write_handler!(function_load),
    )
    .reaching(Keyless::EveryShard)
    .with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    cmd(
        "delete",
        3,
        Flags::WRITE.union(Flags::NOSCRIPT),
        (0, 0, 0),
        &["write", "slow", "scripting"],
        SCRIPTING,
        "7.0.0",
        "Deletes a library and its functions.",
        crate::write_handler!(function_delete),
    )
    .reaching(Keyless::EveryShard)
    .with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    cmd(
        "flush",
        -2,
        Flags::WRITE.union(Flags::NOSCRIPT),
        (0, 0, 0),
        &["write", "slow", "scripting"],
        SCRIPTING,
        "7.0.0",
        "Deletes all libraries and functions.",
        crate::write_handler!(function_flush),
    )
    .reaching(Keyless::EveryShard)
    .with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    cmd(
        "restore",
        -3,
        ADMIN_WRITE,
        (0, 0, 0),
        &["write", "slow", "scripting"],
        SCRIPTING,
        "7.0.0",
        "Restores all libraries from a payload.",
        crate::write_handler!(function_restore),
    )
    .reaching(Keyless::EveryShard)
    .with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    cmd(
        "list",
        -2,
        Flags::NOSCRIPT,
        (0, 0, 0),
        &["slow", "scripting"],
        SCRIPTING,
        "7.0.0",
        "Returns information about all libraries.",
        crate::read_handler!(function_list),
    )
    .reaching(Keyless::AnyShard)
    .with_tips(&["nondeterministic_output_order"]),
    cmd(
        "dump",
        2,
        Flags::NOSCRIPT,
        (0, 0, 0),
        &["slow", "scripting"],
        SCRIPTING,
        "7.0.0",
        "Dumps all libraries into a serialized binary payload.",
        crate::read_handler!(function_dump),
    )
    .reaching(Keyless::AnyShard),
    cmd(
        "stats",
        2,
        Flags::NOSCRIPT.union(Flags::ALLOW_BUSY),
        (0, 0, 0),
        &["slow", "scripting"],
        SCRIPTING,
        "7.0.0",
        "Returns information about a function during execution.",
        crate::read_handler!(function_stats),
    )
    .reaching(Keyless::AnyShard)
    .with_tips(&[
        "nondeterministic_output",
        "request_policy:all_shards",
        "response_policy:special",
    ]),
    cmd(
        "kill",
        2,
        Flags::NOSCRIPT.union(Flags::ALLOW_BUSY),
        (0, 0, 0),
        &["slow", "scripting"],
        SCRIPTING,
        "7.0.0",
        "Terminates a function during execution.",
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
        "7.0.0",
        "Returns helpful text about the different subcommands.",
        crate::read_handler!(function_help),
    ),
];

/// FCALL's KEYS and ARGV, checked after the function is found (Redis's
/// order and its text for a numkeys that is not a number).
fn function_keys(args: &[Bytes]) -> Result<(&[Bytes], &[Bytes]), CmdError> {
    crate::args::parse_i64(&args[2])
        .map_err(|_| CmdError::other("ERR Bad number of keys provided"))?;
    super::eval::split_keys(args)
}

fn fcall<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let name = String::from_utf8_lossy(&args[1]).into_owned();
    let flags = match store.scripts.function(&name) {
        Some((_, f)) => f.flags,
        None => return Err(CmdError::other("ERR Function not found")),
    };
    let (keys, argv) = function_keys(args)?;
    if flags.contains(ScriptFlags::ALLOW_OOM) {
        // `allow-oom` runs any command over maxmemory (Redis's
        // scriptVerifyOOM).
        store.script_oom.set(false);
    }
    let run = Run {
        db,
        ctx: *ctx,
        read_only: flags.contains(ScriptFlags::NO_WRITES),
        keys,
        argv,
        command: args,
    };
    vm::run(Access::Write(store), Program::Function { name: &name }, run)
        .0
        .into_result()
}

fn fcall_ro<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let name = String::from_utf8_lossy(&args[1]).into_owned();
    let Some((_, function)) = store.scripts.function(&name) else {
        return Err(CmdError::other("ERR Function not found"));
    };
    let read_only = function.flags.contains(ScriptFlags::NO_WRITES);
    let (keys, argv) = function_keys(args)?;
    if !read_only {
        return Err(super::ro_write_flag_error());
    }
    let run = Run {
        db,
        ctx: *ctx,
        read_only: true,
        keys,
        argv,
        command: args,
    };
    vm::run(Access::Read(store), Program::Function { name: &name }, run)
        .0
        .into_result()
}

/// The library name of a `#!lua name=<lib>` first line, split and
/// checked as Redis 7.0's functionExtractLibMetaData (quotes as in
/// redis.conf: `name="foo"` is foo).
fn library_name(code: &[u8]) -> Result<String, CmdError> {
    if !code.starts_with(b"#!") {
        return Err(CmdError::other("ERR Missing library metadata"));
    }
    let invalid = || CmdError::other("ERR Invalid library metadata");
    let end = code.iter().position(|&c| c == b'\n').ok_or_else(invalid)?;
    let parts = kvasir_resp::parse::split_args(&code[..end]).ok_or_else(invalid)?;
    let (engine, metadata) = parts.split_first().ok_or_else(invalid)?;
    let engine = String::from_utf8_lossy(engine.get(2..).unwrap_or_default());
    let mut name = None;
    for part in metadata {
        match part.get(..5) {
            Some(prefix) if prefix.eq_ignore_ascii_case(b"name=") => {
                if name.is_some() {
                    return Err(CmdError::other(
                        "ERR Invalid metadata value, name argument was given multiple times",
                    ));
                }
                name = Some(String::from_utf8_lossy(&part[5..]).into_owned());
            }
            _ => {
                return Err(CmdError::other(format!(
                    "ERR Invalid metadata value given: {}",
                    String::from_utf8_lossy(part)
                )))
            }
        }
    }
    let name = name.ok_or_else(|| CmdError::other("ERR Library name was not given"))?;
    if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        return Err(CmdError::other("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"));
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(CmdError::other(format!("ERR Engine '{engine}' not found")));
    }
    Ok(name)
}

/// Checks `code` and adds its library to `libraries` (replacing one of
/// the same name only if `replace`).
fn add_library<K: Keyspace>(
    store: &Store<K>,
    libraries: &mut std::collections::BTreeMap<String, Library>,
    code: Bytes,
    replace: bool,
) -> Result<String, CmdError> {
    let name = library_name(&code)?;
    if libraries.contains_key(&name) && !replace {
        return Err(CmdError::other(format!(
            "ERR Library '{name}' already exists"
        )));
    }
    let vm = store
        .scripts
        .take_vm()
        .map_err(|e| CmdError::other(format!("ERR {e}")))?;
    let loaded = vm.load_library(&code);
    store.scripts.put_vm(vm);
    let functions = loaded?;
    for fname in functions.keys() {
        if let Some(other) = libraries
            .values()
            .find(|l| l.name != name && l.functions.keys().any(|k| k.eq_ignore_ascii_case(fname)))
        {
            let _ = other;
            return Err(CmdError::other(format!(
                "ERR Function {fname} already exists"
            )));
        }
    }
    libraries.insert(
        name.clone(),
        Library {
            name: name.clone(),
            code,
            functions: functions
                .into_iter()
                .map(|(n, (_, info))| (n, info))
                .collect(),
        },
    );
    Ok(name)
}

/// Loads libraries from their code (a snapshot's), replacing the store's.
pub fn restore_libraries<K: Keyspace>(
    store: &mut Store<K>,
    codes: Vec<Bytes>,
) -> Result<(), CmdError> {
    let mut libraries = Default::default();
    for code in codes {
        add_library(store, &mut libraries, code, false)?;
    }
    store.scripts.set_libraries(libraries);
    Ok(())
}

/// Adds `codes`' libraries to the store's (a library of the same name is
/// replaced if `replace`, else the whole merge fails and nothing changes).
pub fn merge_libraries<K: Keyspace>(
    store: &mut Store<K>,
    codes: Vec<Bytes>,
    replace: bool,
) -> Result<(), CmdError> {
    let mut libraries = store.scripts.libraries.clone();
    for code in codes {
        add_library(store, &mut libraries, code, replace)?;
    }
    store.scripts.set_libraries(libraries);
    Ok(())
}

fn function_load<K: Keyspace>(
    store: &mut Store<K>,
    _db: usize,
    args: &[Bytes],
    _ctx: &Ctx,
) -> CmdResult {
    let mut replace = false;
    let mut i = 2;
    while i < args.len() - 1 {
        if eq_ic(&args[i], "replace") {
            replace = true;
        } else {
            return Err(CmdError::other(format!(
                "ERR Unknown option given: {}",
                String::from_utf8_lossy(&args[i])
            )));
        }
        i += 1;
    }
    let code = args[args.len() - 1].clone();
    let mut libraries = store.scripts.libraries.clone();
    let name = add_library(store, &mut libraries, code, replace)?;
    store.scripts.set_libraries(libraries);
    Ok(Reply::bulk_str(&name))
}

fn function_delete<K: Keyspace>(
    store: &mut Store<K>,
    _db: usize,
    args: &[Bytes],
    _ctx: &Ctx,
) -> CmdResult {
    let name = String::from_utf8_lossy(&args[2]).into_owned();
    let mut libraries = store.scripts.libraries.clone();
    if libraries.remove(&name).is_none() {
        return Err(CmdError::other("ERR Library not found"));
    }
    store.scripts.set_libraries(libraries);
    Ok(Reply::ok())
}

fn function_flush<K: Keyspace>(
    store: &mut Store<K>,
    _db: usize,
    args: &[Bytes],
    _ctx: &Ctx,
) -> CmdResult {
    if args.len() > 3 {
        return Err(crate::error::subcommand_syntax("FUNCTION", &args[1]));
    }
    super::check_flush_mode(args, "ERR FUNCTION FLUSH only supports SYNC|ASYNC option")?;
    store.scripts.set_libraries(Default::default());
    Ok(Reply::ok())
}

fn function_list<K: Keyspace>(
    store: &Store<K>,
    _db: usize,
    args: &[Bytes],
    _ctx: &Ctx,
) -> CmdResult {
    let mut pattern: Option<&[u8]> = None;
    let mut with_code = false;
    let mut i = 2;
    while i < args.len() {
        if eq_ic(&args[i], "withcode") && !with_code {
            with_code = true;
        } else if eq_ic(&args[i], "libraryname") && pattern.is_none() {
            let Some(p) = args.get(i + 1) else {
                return Err(CmdError::other("ERR library name argument was not given"));
            };
            pattern = Some(p);
            i += 1;
        } else {
            return Err(CmdError::other(format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(&args[i])
            )));
        }
        i += 1;
    }
    let libs = store
        .scripts
        .libraries
        .values()
        .filter(|l| pattern.is_none_or(|p| glob_match(p, l.name.as_bytes(), false)))
        .map(|l| {
            let functions = l
                .functions
                .iter()
                .map(|(name, f)| {
                    Reply::Map(vec![
                        (Reply::bulk_str("name"), Reply::bulk_str(name)),
                        (
                            Reply::bulk_str("description"),
                            f.description
                                .as_deref()
                                .map(Reply::bulk_str)
                                .unwrap_or(Reply::Nil),
                        ),
                        (
                            Reply::bulk_str("flags"),
                            Reply::Set(f.flags.names().into_iter().map(Reply::simple).collect()),
                        ),
                    ])
                })
                .collect();
            let mut fields = vec![
                (Reply::bulk_str("library_name"), Reply::bulk_str(&l.name)),
                (Reply::bulk_str("engine"), Reply::bulk_str("LUA")),
                (Reply::bulk_str("functions"), Reply::Array(functions)),
            ];
            if with_code {
                fields.push((Reply::bulk_str("library_code"), Reply::Bulk(l.code.clone())));
            }
            Reply::Map(fields)
        })
        .collect();
    Ok(Reply::Array(libs))
}

/// FUNCTION STATS's `running_script`: the busy run, if one paused.
fn running_script<K: Keyspace>(store: &Store<K>) -> Reply {
    let Some(busy) = store.scripts.busy() else {
        return Reply::Nil;
    };
    Reply::Map(vec![
        (Reply::bulk_str("name"), Reply::bulk_str(&busy.name)),
        (
            Reply::bulk_str("command"),
            Reply::Array(busy.command.into_iter().map(Reply::Bulk).collect()),
        ),
        (
            Reply::bulk_str("duration_ms"),
            Reply::Int(busy.started.elapsed().as_millis() as i64),
        ),
    ])
}

fn function_stats<K: Keyspace>(
    store: &Store<K>,
    _db: usize,
    _args: &[Bytes],
    _ctx: &Ctx,
) -> CmdResult {
    let functions: usize = store
        .scripts
        .libraries
        .values()
        .map(|l| l.functions.len())
        .sum();
    Ok(Reply::Map(vec![
        (Reply::bulk_str("running_script"), running_script(store)),
        (
            Reply::bulk_str("engines"),
            Reply::Map(vec![(
                Reply::bulk_str("LUA"),
                Reply::Map(vec![
                    (
                        Reply::bulk_str("libraries_count"),
                        Reply::Int(store.scripts.libraries.len() as i64),
                    ),
                    (
                        Reply::bulk_str("functions_count"),
                        Reply::Int(functions as i64),
                    ),
                ]),
            )]),
        ),
    ]))
}

fn function_dump<K: Keyspace>(
    store: &Store<K>,
    _db: usize,
    _args: &[Bytes],
    _ctx: &Ctx,
) -> CmdResult {
    let codes: Vec<&[u8]> = store
        .scripts
        .libraries
        .values()
        .map(|l| l.code.as_ref())
        .collect();
    Ok(Reply::Bulk(Bytes::from(super::dump::encode(&codes))))
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE].
fn function_restore<K: Keyspace>(
    store: &mut Store<K>,
    _db: usize,
    args: &[Bytes],
    _ctx: &Ctx,
) -> CmdResult {
    if args.len() > 4 {
        return Err(crate::error::subcommand_syntax("FUNCTION", &args[1]));
    }
    #[derive(PartialEq)]
    enum Policy {
        Flush,
        Append,
        Replace,
    }
    let policy =
        match args.get(3) {
            None => Policy::Append,
            Some(a) if args.len() == 4 && eq_ic(a, "flush") => Policy::Flush,
            Some(a) if args.len() == 4 && eq_ic(a, "append") => Policy::Append,
            Some(a) if args.len() == 4 && eq_ic(a, "replace") => Policy::Replace,
            Some(_) => return Err(CmdError::other(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            )),
        };
    let codes = super::dump::decode(&args[2])?;
    let mut libraries = match policy {
        Policy::Flush => Default::default(),
        _ => store.scripts.libraries.clone(),
    };
    for code in codes {
        let name = library_name(&code)?;
        if policy == Policy::Append && libraries.contains_key(&name) {
            return Err(CmdError::other(format!(
                "ERR Library {name} already exists"
            )));
        }
        add_library(store, &mut libraries, code, policy != Policy::Append)?;
    }
    store.scripts.set_libraries(libraries);
    Ok(Reply::ok())
}

fn function_help<K: Keyspace>(
    _store: &Store<K>,
    _db: usize,
    _args: &[Bytes],
    _ctx: &Ctx,
) -> CmdResult {
    Ok(help_reply(&[
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Create a new library with the given library name and code.",
        "DELETE <LIBRARY NAME>",
        "    Delete the given library.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Return general information on all the libraries:",
        "    * Library name",
        "    * The engine used to run the Library",
        "    * Library description",
        "    * Functions list",
        "    * Library code (if WITHCODE is given)",
        "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
        "STATS",
        "    Return information about the current function running:",
        "    * Function name",
        "    * Command used to run the function",
        "    * Duration in MS that the function is running",
        "    If no function is running, return nil",
        "    In addition, returns a list of available engines.",
        "KILL",
        "    Kill the current running function.",
        "FLUSH [ASYNC|SYNC]",
        "    Delete all the libraries.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the libraries.",
        "    * SYNC: Synchronously flush the libraries.",
        "DUMP",
        "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
        "    control how to handle existing libraries (default APPEND):",
        "    * FLUSH: delete all existing libraries.",
        "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
        "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
        "      libraries with the new libraries (notice that even on this option there is a chance of failure",
        "      in case of functions name collision with another library).",
        "HELP",
        "    Prints this help.",
    ]))
}

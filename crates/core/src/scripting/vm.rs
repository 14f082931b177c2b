//! The Lua interpreter of a shard and one script run.
//!
//! The sandbox is Redis 7.0's: the base, `string`, `table` and `math`
//! libraries plus `cjson`, `cmsgpack`, `bit` and `struct`; no `io`, `os`,
//! `dofile`, `loadfile`, `require`, `print`; `loadstring` and `load`
//! refuse precompiled bytecode; globals and library tables are read-only
//! (`Attempt to modify a readonly table`), reading an unknown global is an
//! error. `math.random` draws from the entry's seed, so replicas agree.

use super::convert::{self, RespVersion};
use super::{libs, FunctionInfo, Library, ScriptFlags};
use crate::error::CmdError;
use crate::keyspace::Keyspace;
use crate::store::{Ctx, Store};
use crate::table::{resolve, Handler};
use bytes::Bytes;
use kvasir_resp::encode::format_double;
use kvasir_resp::Reply;
use mlua::chunk::ChunkMode;
use mlua::{ffi, BString, Either, Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

/// Memory one script run may allocate beyond what the interpreter holds
/// when it starts; past it the script fails with "not enough memory".
pub const SCRIPT_MEMORY_LIMIT: usize = 256 << 20;

/// Nesting accepted when converting a script's reply (a table holding
/// itself would otherwise never end).
const MAX_REPLY_DEPTH: usize = 200;

/// The Lua side of the sandbox, run once per interpreter. `hidden` holds
/// what Rust sets per run (`call`, `resp`) out of the scripts' reach.
const PRELUDE: &str = r#"
local hidden = ...
-- Every global ends up in G0, behind an empty _G (see the end).
local G0 = {}
local rawpcall, rawerror, rawtype, rawsetmeta, rawtostring = pcall, error, type, setmetatable, tostring
local rawloadstring, concat, rawset_ = loadstring, table.concat, rawset
hidden.redis_real = redis

-- Redis hands error tables to scripts' pcall as their text.
local rawxpcall = xpcall
local function fix(ok, ...)
  if not ok then
    if hidden.stopped() then rawerror((...), 0) end
    local e = ...
    if rawtype(e) == 'userdata' then return false, hidden.error_text(e) end
    if rawtype(e) == 'table' and e.err then return false, e.err end
  end
  return ok, ...
end
pcall = function(...) return fix(rawpcall(...)) end
xpcall = function(f, h) return fix(rawxpcall(f, h)) end
local rawresume = coroutine.resume
coroutine.resume = function(...) return fix(rawresume(...)) end
-- Coroutines are created from Rust so that the step limit covers them.
coroutine.create = hidden.create_thread
coroutine.wrap = function(f)
  local co = hidden.create_thread(f)
  local function pass(ok, ...)
    if not ok then rawerror((...), 0) end
    return ...
  end
  return function(...) return pass(rawresume(co, ...)) end
end

loadstring = function(s, name)
  if rawtype(s) == 'string' and s:byte(1) == 27 then
    return nil, 'attempt to load a binary chunk'
  end
  return rawloadstring(s, name)
end
load = function(f, name)
  local parts = {}
  while true do
    local p = f()
    if p == nil or p == '' then break end
    if rawtype(p) ~= 'string' then return nil, 'reader function must return a string' end
    parts[#parts + 1] = p
  end
  return loadstring(concat(parts), name)
end
rawset = function(t, k, v)
  if t == _G then rawerror('Attempt to modify a readonly table', 2) end
  return rawset_(t, k, v)
end

local function readonly(t)
  return rawsetmeta({}, {
    __index = t,
    __newindex = function() rawerror('Attempt to modify a readonly table', 2) end,
    __metatable = false,
  })
end
for _, name in ipairs({'string', 'table', 'math', 'redis', 'cjson', 'cmsgpack', 'bit', 'struct', 'coroutine'}) do
  local t = _G[name]
  if t then rawset_(_G, name, readonly(t)) end
end
getmetatable('').__metatable = false
-- One run, called from Rust with the run's keys and arguments: either
-- `nkeys, n, key..., arg...` (n of them; building the tables here costs
-- less than one mlua call per table and per element) or, for many of
-- them, the two tables made in Rust. Written out in each entry point, as
-- every Lua or C call here is paid on every run.
hidden.run_script = function(f, handler, nkeys, n, ...)
  local keys, argv = nkeys, n
  if rawtype(nkeys) ~= 'table' then
    keys, argv = {...}, {}
    for i = nkeys + 1, n do
      argv[i - nkeys] = keys[i]
      keys[i] = nil
    end
  end
  rawset_(G0, 'KEYS', keys)
  rawset_(G0, 'ARGV', argv)
  return rawxpcall(f, handler)
end
-- Lua 5.1's xpcall passes no arguments: the runner reads a function's
-- from upvalues set per run, so no closure is created per run.
local run_f, run_keys, run_argv
local function runner() return run_f(run_keys, run_argv) end
local function finish(...)
  run_f, run_keys, run_argv = nil, nil, nil
  return ...
end
hidden.run_function = function(f, handler, nkeys, n, ...)
  rawset_(G0, 'KEYS', nil)
  rawset_(G0, 'ARGV', nil)
  local keys, argv = nkeys, n
  if rawtype(nkeys) ~= 'table' then
    keys, argv = {...}, {}
    for i = nkeys + 1, n do
      argv[i - nkeys] = keys[i]
      keys[i] = nil
    end
  end
  run_f, run_keys, run_argv = f, keys, argv
  return finish(rawxpcall(runner, handler))
end
-- The globals move to G0 and _G stays empty: Lua calls __newindex only
-- for keys a table lacks, so with the globals in _G itself a script could
-- replace `string` or `KEYS` (and the change would outlive the run on this
-- replica only). Reads fall through to G0; every write is refused, as
-- Redis 7.0's read-only globals table refuses it.
local G = _G
for k, v in next, G do G0[k] = v end
for k in next, G0 do rawset_(G, k, nil) end
rawsetmeta(G0, {
  __index = function(_, n)
    rawerror("Script attempted to access nonexistent global variable '" .. rawtostring(n) .. "'", 2)
  end,
  __metatable = false,
})
rawsetmeta(G, {
  __index = G0,
  __newindex = function() rawerror('Attempt to modify a readonly table', 2) end,
  __metatable = false,
})
"#;

/// A shard's interpreter with its compiled scripts. Its `redis.call` and
/// `redis.pcall` run the command table's handlers for the engine `K`, the
/// one of the store it serves.
pub struct ScriptVm<K: Keyspace> {
    lua: Lua,
    /// Compiled EVAL bodies by SHA1.
    compiled: HashMap<String, Function>,
    /// FCALL's functions, as loaded from the libraries of `generation`.
    functions: HashMap<String, Function>,
    generation: Option<u64>,
    rng: Arc<AtomicU64>,
    /// Instructions run in this run, in units of [`HOOK_EVERY`], and the
    /// limit in the same units.
    steps: Arc<AtomicU64>,
    step_limit: Arc<AtomicU64>,
    /// The run's `redis.setresp` choice: 2 or 3.
    resp: Arc<AtomicU64>,
    /// The real `redis` table (scripts see a read-only proxy) and its
    /// `call` and `pcall`, which library loading hides.
    redis: Table,
    call: Function,
    pcall: Function,
    /// The run in progress (a `RefCell<CallState>`), null between runs;
    /// see [`with_current_run`].
    current: Arc<AtomicPtr<()>>,
    /// The prelude's `xpcall` runner and the message handler that notes
    /// the script line of an error.
    run_script: Function,
    run_function: Function,
    handler: Function,
    /// Runs since the last garbage-collection step.
    runs_since_gc: u32,
    /// The engine `call` and `pcall` were made for (a `fn` type, so the
    /// interpreter is `Send` whatever the engine).
    engine: PhantomData<fn() -> K>,
}

/// Runs between two incremental garbage-collection steps (Redis's
/// LUA_GC_CYCLE_PERIOD).
const GC_EVERY: u32 = 50;

/// Keys and arguments up to this many are passed to the run's Lua entry
/// point on the stack; more go in tables made from Rust (Lua 5.1's C
/// stack holds about 8000 values).
const MAX_PUSHED_ARGS: usize = 64;

/// How often (in Lua instructions) the step hook runs.
const HOOK_EVERY: u32 = 10_000;

/// The error of a script stopped by `script-max-instructions`.
const STEP_LIMIT_ERROR: &str =
    "Script killed: it ran more Lua instructions than script-max-instructions allows";

/// How a run may touch the store.
pub enum Access<'a, K: Keyspace> {
    Write(&'a mut Store<K>),
    Read(&'a Store<K>),
}

impl<K: Keyspace> Access<'_, K> {
    fn store(&self) -> &Store<K> {
        match self {
            Access::Write(s) => s,
            Access::Read(s) => s,
        }
    }
}

/// What to run.
pub enum Program<'a> {
    Eval { sha: &'a str, body: &'a [u8] },
    Function { name: &'a str },
}

/// One run's inputs.
pub struct Run<'a> {
    pub db: usize,
    pub ctx: Ctx,
    /// Writes are refused (EVAL_RO, `no-writes`).
    pub read_only: bool,
    pub keys: &'a [Bytes],
    pub argv: &'a [Bytes],
}

/// What the commands a script issues share during one run.
struct CallState<'s, K: Keyspace> {
    access: Access<'s, K>,
    db: usize,
    ctx: Ctx,
    read_only: bool,
    calls: u64,
    /// The slot every key must be in (cluster mode).
    slot: Option<u16>,
}

impl<K: Keyspace> ScriptVm<K> {
    pub fn new() -> mlua::Result<ScriptVm<K>> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        let g = lua.globals();
        for name in [
            "dofile",
            "loadfile",
            "print",
            "setfenv",
            "getfenv",
            "module",
            "require",
            "gcinfo",
            "collectgarbage",
            "newproxy",
        ] {
            g.raw_set(name, Value::Nil)?;
        }
        libs::register_all(&lua)?;
        let rng = Arc::new(AtomicU64::new(0));
        install_random(&lua, &g, rng.clone())?;
        g.raw_set("redis", redis_table(&lua)?)?;
        let hidden = lua.create_table()?;
        hidden.raw_set(
            "error_text",
            lua.create_function(|_, e: Value| {
                Ok(match &e {
                    Value::Error(err) => match err.downcast_ref::<CallError>() {
                        Some(CallError(text)) => text.clone(),
                        None => lua_error_text(err),
                    },
                    other => value_text(other),
                })
            })?,
        )?;
        let steps = Arc::new(AtomicU64::new(0));
        let step_limit = Arc::new(AtomicU64::new(u64::MAX));
        install_step_limit(&lua, &hidden, steps.clone(), step_limit.clone())?;
        let resp = Arc::new(AtomicU64::new(2));
        install_setresp(&lua, &g, resp.clone())?;
        lua.load(PRELUDE)
            .set_name("=prelude")
            .set_mode(ChunkMode::Text)
            .call::<()>(hidden.clone())?;
        let redis: Table = hidden.raw_get("redis_real")?;
        // redis.call and redis.pcall are made once: a function made per run
        // (an mlua scope) costs allocations and garbage on every EVALSHA.
        // They reach the run through `current`.
        let current = Arc::new(AtomicPtr::new(std::ptr::null_mut()));
        let (cur, rsp) = (current.clone(), resp.clone());
        let call = counting_args(
            &lua,
            lua.create_function(move |lua, args: CallArgs| {
                script_call::<K>(lua, &cur, &rsp, args, true)
            })?,
        )?;
        let (cur, rsp) = (current.clone(), resp.clone());
        let pcall = counting_args(
            &lua,
            lua.create_function(move |lua, args: CallArgs| {
                script_call::<K>(lua, &cur, &rsp, args, false)
            })?,
        )?;
        redis.raw_set("call", &call)?;
        redis.raw_set("pcall", &pcall)?;
        let run_script: Function = hidden.raw_get("run_script")?;
        let run_function: Function = hidden.raw_get("run_function")?;
        let handler = lua.create_function(|lua, err: Value| {
            // The message handler runs where the error was raised: note the
            // script's line for the reply.
            let info = lua.create_table()?;
            info.raw_set("e", err)?;
            info.raw_set("line", script_line(lua))?;
            Ok(info)
        })?;
        Ok(ScriptVm {
            lua,
            compiled: HashMap::new(),
            functions: HashMap::new(),
            generation: None,
            rng,
            steps,
            step_limit,
            resp,
            redis,
            call,
            pcall,
            current,
            run_script,
            run_function,
            handler,
            runs_since_gc: 0,
            engine: PhantomData,
        })
    }

    /// Compiles an EVAL body (or finds it compiled); the error is Redis's
    /// `Error compiling script` reply.
    pub fn compile(&mut self, sha: &str, body: &[u8]) -> Result<Function, CmdError> {
        if let Some(f) = self.compiled.get(sha) {
            return Ok(f.clone());
        }
        let f = compile_chunk(&self.lua, &strip_shebang(body), "@user_script").map_err(|e| {
            CmdError::other(format!(
                "ERR Error compiling script (new function): {}",
                lua_error_text(&e)
            ))
        })?;
        self.compiled.insert(sha.to_string(), f.clone());
        Ok(f)
    }

    /// Loads `libraries` if they changed since the last run.
    fn sync_libraries(&mut self, libraries: &BTreeMap<String, Library>, generation: u64) {
        if self.generation == Some(generation) {
            return;
        }
        self.functions.clear();
        for lib in libraries.values() {
            // Every stored library loaded once already, when FUNCTION LOAD
            // checked it.
            if let Ok(fs) = self.load_library(&lib.code) {
                self.functions
                    .extend(fs.into_iter().map(|(name, (f, _))| (name, f)));
            }
        }
        self.generation = Some(generation);
    }

    /// Runs a library's code with `redis.register_function` available and
    /// returns what it registered.
    pub fn load_library(
        &self,
        code: &[u8],
    ) -> Result<BTreeMap<String, (Function, FunctionInfo)>, CmdError> {
        let body = strip_shebang(code);
        let chunk = compile_chunk(&self.lua, &body, "@user_function").map_err(|e| {
            CmdError::other(format!(
                "ERR Error compiling function: {}",
                lua_error_text(&e)
            ))
        })?;
        let registered = RefCell::new(BTreeMap::new());
        let problem: RefCell<Option<String>> = RefCell::new(None);
        let redis = &self.redis;
        let result = self.lua.scope(|scope| {
            let register = scope.create_function(|_, args: MultiValue| {
                match register_args(args) {
                    Ok((name, f, info)) => {
                        let mut reg = registered.borrow_mut();
                        match reg.entry(name) {
                            std::collections::btree_map::Entry::Occupied(e) => {
                                *problem.borrow_mut() =
                                    Some(format!("Function {} already exists", e.key()));
                            }
                            std::collections::btree_map::Entry::Vacant(e) => {
                                e.insert((f, info));
                            }
                        }
                    }
                    Err(text) => *problem.borrow_mut() = Some(text),
                }
                match problem.borrow().as_ref() {
                    Some(text) => Err(mlua::Error::RuntimeError(text.clone())),
                    None => Ok(()),
                }
            })?;
            redis.raw_set("register_function", register)?;
            // A library's code runs outside any script run: there is no
            // redis.call there (Redis's load-time `redis` lacks it too).
            redis.raw_set("call", Value::Nil)?;
            redis.raw_set("pcall", Value::Nil)?;
            let r = chunk.call::<()>(());
            redis.raw_set("register_function", Value::Nil)?;
            redis.raw_set("call", &self.call)?;
            redis.raw_set("pcall", &self.pcall)?;
            Ok(r)
        });
        let outcome = result.and_then(|r| r);
        if let Some(text) = problem.into_inner() {
            return Err(CmdError::other(format!("ERR {text}")));
        }
        if let Err(e) = outcome {
            return Err(CmdError::other(format!(
                "ERR Error registering functions: {}",
                lua_error_text(&e)
            )));
        }
        let registered = registered.into_inner();
        if registered.is_empty() {
            return Err(CmdError::other("ERR No functions registered"));
        }
        Ok(registered)
    }
}

/// Runs `program` against the store: the one entry point of EVAL, EVALSHA,
/// FCALL and their read-only forms. Returns the reply (a script error is an
/// error reply) and whether an EVAL body compiled (so it may be cached).
pub fn run<K: Keyspace>(
    access: Access<'_, K>,
    program: Program<'_>,
    run: Run<'_>,
) -> (Reply, bool) {
    let scripts = &access.store().scripts;
    let mut vm = match scripts.take_vm() {
        Ok(vm) => vm,
        Err(e) => return (Reply::Error(format!("ERR {e}").into()), false),
    };
    let (func, name, source) = match program {
        Program::Eval { sha, body } => match vm.compile(sha, body) {
            Ok(f) => (f, sha, "@user_script"),
            Err(e) => {
                access.store().scripts.put_vm(vm);
                return (e.to_reply(), false);
            }
        },
        Program::Function { name } => {
            let store = access.store();
            vm.sync_libraries(&store.scripts.libraries, store.scripts.generation);
            match vm.functions.get(name) {
                Some(f) => (f.clone(), name, "@user_function"),
                None => {
                    store.scripts.put_vm(vm);
                    return (Reply::error("ERR Function not found"), true);
                }
            }
        }
    };
    let is_function = source == "@user_function";
    let slot = match (access.store().key_slot, run.keys.first()) {
        (Some(slot_of), Some(k)) => Some(slot_of(k)),
        _ => None,
    };
    vm.rng.store(run.ctx.seed, Ordering::Relaxed);
    vm.steps.store(0, Ordering::Relaxed);
    restart_step_count(&vm.lua);
    vm.step_limit.store(
        access.store().limits.script_max_instructions / HOOK_EVERY as u64,
        Ordering::Relaxed,
    );
    vm.resp.store(2, Ordering::Relaxed);
    let state = RefCell::new(CallState {
        access,
        db: run.db,
        ctx: run.ctx,
        read_only: run.read_only,
        calls: 0,
        slot,
    });
    let reply = with_current_run(&vm.current, &state, || {
        execute(&vm, &func, name, is_function, &run)
    })
    .unwrap_or_else(|e| script_error(&lua_error_text(&e), name, source, None));
    vm.runs_since_gc += 1;
    if vm.runs_since_gc >= GC_EVERY {
        vm.runs_since_gc = 0;
        let _ = vm.lua.gc_step();
    }
    let access = state.into_inner().access;
    access.store().scripts.put_vm(vm);
    (reply, true)
}

/// Makes `state` the run that `redis.call` and `redis.pcall` reach while
/// `f` runs, and only then: the pointer is cleared when `f` returns or
/// unwinds, before `state` can go away.
fn with_current_run<K: Keyspace, R>(
    current: &AtomicPtr<()>,
    state: &RefCell<CallState<'_, K>>,
    f: impl FnOnce() -> R,
) -> R {
    struct Clear<'a>(&'a AtomicPtr<()>);
    impl Drop for Clear<'_> {
        fn drop(&mut self) {
            self.0.store(std::ptr::null_mut(), Ordering::Relaxed);
        }
    }
    current.store(
        state as *const RefCell<CallState<'_, K>> as *mut (),
        Ordering::Relaxed,
    );
    let _clear = Clear(current);
    f()
}

/// Calls `f` with the run in progress, or returns `None` outside a run.
/// `K` is the engine of the interpreter that owns `current`.
fn current_run<K: Keyspace, R>(
    current: &AtomicPtr<()>,
    f: impl for<'s> FnOnce(&RefCell<CallState<'s, K>>) -> R,
) -> Option<R> {
    let ptr = current.load(Ordering::Relaxed) as *const RefCell<CallState<'_, K>>;
    if ptr.is_null() {
        return None;
    }
    // SAFETY: a non-null pointer was stored by `with_current_run` from a
    // live `&RefCell<CallState>` and is cleared (also on unwind) before
    // that borrow ends, so it points to a live value. Only the interpreter
    // this pointer belongs to calls here, synchronously from inside
    // `with_current_run`'s `f`, on the thread that stored it (the
    // interpreter is taken out of `Scripts` for the run), so the `RefCell`
    // is never shared across threads. The state's engine is `K`: the
    // pointer belongs to a `ScriptVm<K>` (whose `call` and `pcall` are
    // the only callers, with its `K`), and only `run::<K>`, given a
    // `Store<K>`, stores one there. `f` is generic over the state's
    // lifetime, so it cannot keep the reference or anything borrowed from
    // it beyond this call.
    Some(f(unsafe { &*ptr }))
}

/// `redis.call` (`raise`) or `redis.pcall`: runs one command of the
/// current run and gives its reply to the script.
fn script_call<K: Keyspace>(
    lua: &Lua,
    current: &AtomicPtr<()>,
    resp: &AtomicU64,
    args: CallArgs,
    raise: bool,
) -> mlua::Result<Value> {
    let reply = command_args(args).and_then(|argv| {
        current_run::<K, _>(current, |state| state.borrow_mut().call(argv))
            .unwrap_or_else(|| Err(not_allowed()))
    });
    if matches!(reply, Ok(Reply::Int(_) | Reply::Nil)) {
        // No Lua allocation: nothing to protect.
        return convert_call_reply(lua, resp, reply, raise);
    }
    // While the per-run memory limit is set mlua runs every allocating API
    // call under a protected call, which in Lua 5.1 allocates two C
    // closures each time: lifted here, the conversion of the reply runs
    // unprotected and the limit is checked once after.
    let limit = lua.set_memory_limit(0).unwrap_or(0);
    let result = convert_call_reply(lua, resp, reply, raise);
    if limit != 0 {
        let over = lua.used_memory() > limit;
        let _ = lua.set_memory_limit(limit);
        if over {
            return Err(mlua::Error::MemoryError("not enough memory".into()));
        }
    }
    result
}

fn convert_call_reply(
    lua: &Lua,
    resp: &AtomicU64,
    reply: Result<Reply, CmdError>,
    raise: bool,
) -> mlua::Result<Value> {
    let resp = match resp.load(Ordering::Relaxed) {
        3 => RespVersion::Resp3,
        _ => RespVersion::Resp2,
    };
    match (reply, raise) {
        (Ok(Reply::Error(text)), true) => {
            Err(mlua::Error::external(CallError(convert::error_text(&text))))
        }
        (Err(e), true) => Err(mlua::Error::external(CallError(convert::error_text(
            &e.text(),
        )))),
        (Ok(r), _) => convert::reply_to_lua(lua, r, resp),
        (Err(e), false) => convert::reply_to_lua(lua, e.to_reply(), resp),
    }
}

fn execute<K: Keyspace>(
    vm: &ScriptVm<K>,
    func: &Function,
    name: &str,
    is_function: bool,
    run: &Run<'_>,
) -> mlua::Result<Reply> {
    let lua = &vm.lua;
    let runner = if is_function {
        &vm.run_function
    } else {
        &vm.run_script
    };
    let source = if is_function {
        "@user_function"
    } else {
        "@user_script"
    };
    // The limit counts from the use before the run's keys and arguments
    // are made (so they count too), but is set only after they are pushed:
    // with a limit mlua protects each allocating call (see script_call).
    let base = lua.used_memory();
    let unlimit = |out: mlua::Result<(bool, Value)>| {
        let _ = lua.set_memory_limit(0);
        out
    };
    let limit = base.saturating_add(SCRIPT_MEMORY_LIMIT);
    // redis.call and redis.pcall are C functions (see counting_args)
    // called straight from the script, so the script's frame (and line) is
    // still on the stack when a call fails, even in `return redis.call(...)`.
    let out = if run.keys.len() + run.argv.len() <= MAX_PUSHED_ARGS {
        let mut args = Vec::with_capacity(run.keys.len() + run.argv.len());
        for b in run.keys.iter().chain(run.argv) {
            args.push(lua.create_string(b)?);
        }
        let _ = lua.set_memory_limit(limit);
        unlimit(runner.call((
            func,
            &vm.handler,
            run.keys.len(),
            args.len(),
            mlua::Variadic::from_iter(args),
        )))
    } else {
        let keys = bytes_table(lua, run.keys)?;
        let argv = bytes_table(lua, run.argv)?;
        let _ = lua.set_memory_limit(limit);
        unlimit(runner.call((func, &vm.handler, keys, argv)))
    };
    let (ok, value) = out?;
    if vm.steps.load(Ordering::Relaxed) >= vm.step_limit.load(Ordering::Relaxed) {
        return Ok(script_error(STEP_LIMIT_ERROR, name, source, None));
    }
    if ok {
        return Ok(convert::lua_to_reply(&value, MAX_REPLY_DEPTH)
            .unwrap_or_else(|| Reply::error("ERR reached lua stack limit")));
    }
    Ok(raised_error_reply(&value, name, source))
}

/// The reply for an error a script raised and did not catch.
fn raised_error_reply(info: &Value, name: &str, source: &str) -> Reply {
    let Value::Table(info) = info else {
        return script_error(&value_text(info), name, source, None);
    };
    let line: Option<i64> = info.raw_get("line").ok();
    let err: Value = info.raw_get("e").unwrap_or(Value::Nil);
    match &err {
        Value::Error(e) => match e.downcast_ref::<CallError>() {
            Some(CallError(text)) => {
                Reply::Error(format!("{text} script: {name}{}", location(source, line)).into())
            }
            None => script_error(&lua_error_text(e), name, source, line),
        },
        Value::Table(t) => match t.raw_get::<Value>("err") {
            Ok(Value::String(s)) => {
                let text = s.to_string_lossy();
                let line = t.raw_get::<i64>("line").ok().or(line);
                Reply::Error(format!("{text} script: {name}{}", location(source, line)).into())
            }
            _ => script_error("unknown error", name, source, line),
        },
        other => script_error(&value_text(other), name, source, line),
    }
}

fn location(source: &str, line: Option<i64>) -> String {
    match line {
        Some(l) if l > 0 => format!(", on {source}:{l}."),
        _ => format!(", on {source}:?."),
    }
}

/// `ERR <text> script: <name>, on @user_script:<line>.`
fn script_error(text: &str, name: &str, source: &str, line: Option<i64>) -> Reply {
    Reply::Error(format!("ERR {text} script: {name}{}", location(source, line)).into())
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string_lossy(),
        Value::Integer(i) => i.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Nil => "nil".into(),
        other => other
            .to_string()
            .unwrap_or_else(|_| other.type_name().to_string()),
    }
}

/// The current line of the innermost script frame on the stack.
fn script_line(lua: &Lua) -> Option<i64> {
    (0..16).find_map(|level| {
        lua.inspect_stack(level, |d| {
            let src = d.source();
            matches!(
                src.source.as_deref(),
                Some("@user_script" | "@user_function")
            )
            .then(|| d.current_line())
            .flatten()
        })
        .flatten()
        .map(|l| l as i64)
    })
}

/// The error a failed `redis.call` raises: Redis's error text
/// (`CODE message`), which a script's `pcall` receives as a string.
#[derive(Debug)]
struct CallError(String);

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CallError {}

fn bytes_table(lua: &Lua, items: &[Bytes]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, b) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(b)?)?;
    }
    Ok(t)
}

/// What the Rust side of `redis.call` receives: how many arguments the
/// script passed (see [`counting_args`]), the first five of them and the
/// rest (five cover most commands; each slot costs a little on every
/// call, used or not). The first ones are read as `BString`, which mlua copies
/// straight off the Lua stack; a `Value` holds an mlua reference, and
/// reading a string's bytes through it clones that reference (an
/// allocation and several atomic operations per argument).
type CallArgs = (
    i64,
    StackArg,
    StackArg,
    StackArg,
    StackArg,
    StackArg,
    MultiValue,
);

/// One of the first arguments of a call: `None` for nil (or past the
/// last argument), a string as bytes (numbers arrive as their %.17g
/// text, see [`counting_args`]), anything else as is.
type StackArg = Option<Either<BString, Value>>;

/// A call's arguments as a command line; Redis's errors for none and for
/// one that is not a string or a number.
fn command_args(args: CallArgs) -> Result<Vec<Bytes>, CmdError> {
    let (n, a1, a2, a3, a4, a5, rest) = args;
    let n = usize::try_from(n).unwrap_or(0);
    if n == 0 {
        return Err(CmdError::other(
            "ERR Please specify at least one argument for this redis lib call",
        ));
    }
    let mut argv = Vec::with_capacity(n);
    for a in [a1, a2, a3, a4, a5].into_iter().take(n) {
        argv.push(match a {
            Some(Either::Left(b)) => Bytes::from(Vec::from(b)),
            Some(Either::Right(v)) => value_arg(v)?,
            None => return Err(bad_argument()),
        });
    }
    for v in rest {
        argv.push(value_arg(v)?);
    }
    Ok(argv)
}

/// An argument past the ones read off the stack. Numbers never get here:
/// [`counting_args`] turned them into their %.17g text already.
fn value_arg(v: Value) -> Result<Bytes, CmdError> {
    match v {
        Value::String(s) => Ok(Bytes::copy_from_slice(&s.as_bytes())),
        _ => Err(bad_argument()),
    }
}

/// Wraps `inner` (taking [`CallArgs`]) in a C function that passes it the
/// number of arguments first: mlua gives a callback's missing arguments as
/// nil, but a nil argument is an error (Redis checks each of
/// `lua_gettop` arguments). It is a C function, not a Lua one, so that a
/// script's `return redis.call(...)` keeps the script's frame (and line
/// for errors) on the stack: Lua 5.1 replaces the frame only in a tail
/// call of a Lua function.
fn counting_args(lua: &Lua, inner: Function) -> mlua::Result<Function> {
    unsafe extern "C-unwind" fn count(state: *mut ffi::lua_State) -> c_int {
        // SAFETY: Lua calls this as a C closure with one upvalue (set
        // below) and at least LUA_MINSTACK free stack slots, of which two
        // are used. An error raised by `inner` unwinds through this frame
        // by longjmp, which is sound as it holds nothing to drop.
        unsafe {
            let n = ffi::lua_gettop(state);
            // Number arguments become their %.17g text, as Redis 7.0
            // formats them (mlua would coerce them with Lua's %.14g). A
            // memory error raised by lua_pushlstring leaks `text` (a few
            // bytes), which is all a longjmp over it can do.
            for i in 1..=n {
                if ffi::lua_type(state, i) == ffi::LUA_TNUMBER {
                    let text = format_double(ffi::lua_tonumber(state, i));
                    ffi::lua_pushlstring(state, text.as_ptr().cast(), text.len());
                    ffi::lua_replace(state, i);
                }
            }
            ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
            ffi::lua_insert(state, 1);
            ffi::lua_pushinteger(state, n as ffi::lua_Integer);
            ffi::lua_insert(state, 2);
            ffi::lua_call(state, n + 1, ffi::LUA_MULTRET);
            ffi::lua_gettop(state)
        }
    }
    // SAFETY: `exec_raw` runs the closure protected, with `inner` pushed
    // as its one argument; lua_pushcclosure pops it as the closure's
    // upvalue and pushes the closure, the one value returned.
    unsafe { lua.exec_raw::<Function>(&inner, |state| ffi::lua_pushcclosure(state, count, 1)) }
}

impl<K: Keyspace> CallState<'_, K> {
    /// One `redis.call`: the command's reply, or the error it raises.
    fn call(&mut self, argv: Vec<Bytes>) -> Result<Reply, CmdError> {
        let spec = match resolve(&argv) {
            Ok((spec, _)) => spec,
            Err(CmdError::UnknownCommand(_)) => {
                return Err(CmdError::other(
                    "ERR Unknown Redis command called from script",
                ))
            }
            Err(CmdError::WrongArity(_)) => {
                return Err(CmdError::other(
                    "ERR Wrong number of args calling Redis command from script",
                ))
            }
            Err(e) => return Err(e),
        };
        if spec.flags.contains(crate::table::Flags::NOSCRIPT)
            || spec.flags.contains(crate::table::Flags::BLOCKING)
        {
            return Err(not_allowed());
        }
        if spec.is_write() && self.read_only {
            return Err(CmdError::other(
                "ERR Write commands are not allowed from read-only scripts.",
            ));
        }
        self.check_slots(spec, &argv)?;
        self.calls += 1;
        let ctx = Ctx {
            now_ms: self.ctx.now_ms,
            seed: self.ctx.seed.wrapping_add(self.calls),
        };
        if let Handler::Session(cmd) = spec.handler {
            return self.session_command(cmd, &argv);
        }
        let was_in_script = self.access.store().script_call.replace(true);
        let result = match (spec.handler, &mut self.access) {
            (Handler::Session(_), _) => Err(not_allowed()),
            (Handler::Write(f), Access::Write(store)) => {
                crate::notify::write(store, spec, K::write_fn(&f), self.db, &argv, &ctx)
            }
            (Handler::Read(f), Access::Write(store)) => K::read_fn(&f)(store, self.db, &argv, &ctx),
            (Handler::Read(f), Access::Read(store)) => K::read_fn(&f)(store, self.db, &argv, &ctx),
            (Handler::Write(_), Access::Read(_)) => Err(CmdError::other(
                "ERR Write commands are not allowed from read-only scripts.",
            )),
            (Handler::Container, _) => Err(not_allowed()),
        };
        self.access.store().script_call.set(was_in_script);
        match result {
            Ok(r) => Ok(r),
            // A script never blocks: a blocking command that finds nothing
            // answers as at its timeout, as in MULTI.
            Err(CmdError::WouldBlock(on)) => Ok(on.on_timeout),
            Err(e) => Ok(e.to_reply()),
        }
    }

    /// In cluster mode every key must be in the slot of the script's
    /// first key (the slot whose leader runs it).
    fn check_slots(
        &mut self,
        spec: &crate::table::CommandSpec,
        argv: &[Bytes],
    ) -> Result<(), CmdError> {
        let Some(slot_of) = self.access.store().key_slot else {
            return Ok(());
        };
        for i in spec.keys_of(argv) {
            let Some(key) = argv.get(i) else { continue };
            let s = slot_of(key);
            match self.slot {
                None => self.slot = Some(s),
                Some(own) if own != s => {
                    return Err(CmdError::other(
                        "ERR Script attempted to access a non local key in a cluster node",
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The few connection commands a script may call.
    fn session_command(
        &mut self,
        cmd: crate::connection::SessionCmd,
        argv: &[Bytes],
    ) -> Result<Reply, CmdError> {
        use crate::connection::SessionCmd;
        match cmd {
            SessionCmd::Ping => Ok(match argv.get(1) {
                Some(msg) => Reply::Bulk(msg.clone()),
                None => Reply::simple("PONG"),
            }),
            SessionCmd::Echo => Ok(Reply::Bulk(argv[1].clone())),
            SessionCmd::Time => {
                let ms = self.ctx.now_ms;
                Ok(Reply::Array(vec![
                    Reply::bulk_str(&(ms / 1000).to_string()),
                    Reply::bulk_str(&((ms % 1000) * 1000).to_string()),
                ]))
            }
            SessionCmd::Select => {
                let db = self.access.store().check_db_index(&argv[1])?;
                self.db = db;
                Ok(Reply::ok())
            }
            _ => Err(not_allowed()),
        }
    }
}

fn not_allowed() -> CmdError {
    CmdError::other("ERR This Redis command is not allowed from script")
}

fn bad_argument() -> CmdError {
    CmdError::other("ERR Lua redis lib command arguments must be strings or integers")
}

/// Compiles source text only (never bytecode) under `name`.
fn compile_chunk(lua: &Lua, body: &[u8], name: &str) -> mlua::Result<Function> {
    lua.load(body)
        .set_name(name)
        .set_mode(ChunkMode::Text)
        .into_function()
}

/// The first line of a `#!lua ...` body blanked (its line count kept), as
/// Lua would otherwise not parse it.
pub fn strip_shebang(body: &[u8]) -> Vec<u8> {
    if !body.starts_with(b"#!") {
        return body.to_vec();
    }
    match body.iter().position(|&c| c == b'\n') {
        Some(nl) => body[nl..].to_vec(),
        None => Vec::new(),
    }
}

/// An mlua error as the Lua message Redis shows.
pub fn lua_error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::MemoryError(_) => "not enough memory".into(),
        mlua::Error::CallbackError { cause, .. } => lua_error_text(cause),
        other => other.to_string(),
    }
}

/// `redis.register_function('name', f)` or
/// `redis.register_function{function_name=, callback=, flags=, description=}`.
fn register_args(args: MultiValue) -> Result<(String, Function, FunctionInfo), String> {
    let mut it = args.into_iter();
    let first = it.next().unwrap_or(Value::Nil);
    let (name, callback, flags, description) = match first {
        Value::String(name) => {
            let f = match it.next() {
                Some(Value::Function(f)) => f,
                _ => {
                    return Err(
                        "callback argument given to redis.register_function must be a function"
                            .into(),
                    )
                }
            };
            (name.to_string_lossy(), f, None, None)
        }
        Value::Table(t) => {
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, _) = pair.map_err(|e| e.to_string())?;
                let key = match &k {
                    Value::String(s) => s.to_string_lossy(),
                    _ => String::new(),
                };
                if !["function_name", "callback", "flags", "description"].contains(&key.as_str()) {
                    return Err("unknown argument given to redis.register_function".to_string());
                }
            }
            let name = match t.raw_get::<Value>("function_name") {
                Ok(Value::String(s)) => s.to_string_lossy(),
                _ => return Err("redis.register_function must get a function name argument".into()),
            };
            let f = match t.raw_get::<Value>("callback") {
                Ok(Value::Function(f)) => f,
                _ => return Err("redis.register_function must get a callback argument".into()),
            };
            let flags = match t.raw_get::<Value>("flags") {
                Ok(Value::Table(fl)) => Some(fl),
                Ok(Value::Nil) => None,
                _ => return Err("flags argument to redis.register_function must be a table representing function flags".into()),
            };
            let description =
                match t.raw_get::<Value>("description") {
                    Ok(Value::String(s)) => Some(s.to_string_lossy()),
                    Ok(Value::Nil) => None,
                    _ => return Err(
                        "description argument given to redis.register_function must be a string"
                            .into(),
                    ),
                };
            (name, f, flags, description)
        }
        _ => return Err("wrong number of arguments to redis.register_function".into()),
    };
    if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        return Err("Function names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    let mut parsed = ScriptFlags::default();
    if let Some(fl) = flags {
        for v in fl.sequence_values::<Value>() {
            let v = v.map_err(|e| e.to_string())?;
            let flag = match &v {
                Value::String(s) => ScriptFlags::from_name(&s.to_string_lossy()),
                _ => None,
            };
            match flag {
                Some(f) => parsed.0 |= f.0,
                None => return Err("unknown flag given".into()),
            }
        }
    }
    Ok((
        name,
        callback,
        FunctionInfo {
            description,
            flags: parsed,
        },
    ))
}

/// Stops a script past its instruction budget: the hook raises an error
/// every time it runs once the budget is spent, and `hidden.stopped` tells
/// the prelude's `pcall`/`xpcall` not to swallow it. The count is the same
/// on every replica, so every replica stops the script at the same point;
/// its writes until then stay, as they would after a crash in Redis.
fn install_step_limit(
    lua: &Lua,
    hidden: &Table,
    steps: Arc<AtomicU64>,
    limit: Arc<AtomicU64>,
) -> mlua::Result<()> {
    let (s, l) = (steps.clone(), limit.clone());
    hidden.raw_set(
        "stopped",
        lua.create_function(move |_, ()| {
            Ok(s.load(Ordering::Relaxed) >= l.load(Ordering::Relaxed))
        })?,
    )?;
    let hook = step_hook(steps, limit);
    let for_threads = hook.clone();
    hidden.raw_set(
        "create_thread",
        lua.create_function(move |lua, f: Function| {
            let thread = lua.create_thread(f)?;
            let hook = for_threads.clone();
            thread.set_hook(
                mlua::HookTriggers::new().every_nth_instruction(HOOK_EVERY),
                move |lua, debug| hook(lua, debug),
            )?;
            Ok(thread)
        })?,
    )?;
    lua.set_hook(
        mlua::HookTriggers::new().every_nth_instruction(HOOK_EVERY),
        move |lua, debug| hook(lua, debug),
    )
}

/// Restarts the main thread's instruction count: Lua counts down to the
/// next hook call across runs, so without this a run's first hook call
/// (and the point where the limit stops it) would depend on how many
/// instructions earlier runs left over, which differs between a replica
/// that ran them and one restarted from a snapshot.
fn restart_step_count(lua: &Lua) {
    // SAFETY: reads the hook lua_sethook installed (mlua's) and installs it
    // again with the same mask and count on the same state, which only
    // resets the countdown; no value is pushed or popped.
    unsafe {
        lua.exec_raw::<()>((), |state| {
            let hook = ffi::lua_gethook(state);
            let mask = ffi::lua_gethookmask(state);
            let count = ffi::lua_gethookcount(state);
            ffi::lua_sethook(state, hook, mask, count);
        })
        .ok();
    }
}

/// The instruction-count hook of the main thread and of every coroutine
/// (Lua 5.1 coroutines do not inherit mlua's hook).
type StepHook = Arc<dyn Fn(&Lua, &mlua::debug::Debug) -> mlua::Result<mlua::VmState> + Send + Sync>;

fn step_hook(steps: Arc<AtomicU64>, limit: Arc<AtomicU64>) -> StepHook {
    Arc::new(move |_, _| {
        let n = steps.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= limit.load(Ordering::Relaxed) {
            return Err(mlua::Error::RuntimeError(STEP_LIMIT_ERROR.into()));
        }
        Ok(mlua::VmState::Continue)
    })
}

/// `redis.setresp(2|3)`: the protocol the script's calls answer in.
fn install_setresp(lua: &Lua, g: &Table, resp: Arc<AtomicU64>) -> mlua::Result<()> {
    let redis: Table = g.raw_get("redis")?;
    let setresp = lua.create_function(move |_, v: Value| {
        let n = match v {
            Value::Integer(n @ (2 | 3)) => n as u64,
            Value::Number(2.0) => 2,
            Value::Number(3.0) => 3,
            _ => {
                return Err(mlua::Error::external(CallError(
                    "ERR RESP version must be 2 or 3.".into(),
                )))
            }
        };
        resp.store(n, Ordering::Relaxed);
        Ok(())
    })?;
    redis.raw_set("setresp", setresp)
}

/// `math.random` and `math.randomseed` over the run's seed.
fn install_random(lua: &Lua, g: &Table, rng: Arc<AtomicU64>) -> mlua::Result<()> {
    let math: Table = g.raw_get("math")?;
    let state = rng.clone();
    let random = lua.create_function(move |_, (m, n): (Option<f64>, Option<f64>)| {
        let s = state
            .load(Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        state.store(s, Ordering::Relaxed);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let r = (z >> 11) as f64 / (1u64 << 53) as f64;
        let empty =
            || mlua::Error::RuntimeError("bad argument #1 to 'random' (interval is empty)".into());
        match (m, n) {
            (None, _) => Ok(r),
            (Some(m), None) => {
                let m = m.floor();
                if m < 1.0 {
                    return Err(empty());
                }
                Ok((r * m).floor() + 1.0)
            }
            (Some(m), Some(n)) => {
                let (m, n) = (m.floor(), n.floor());
                if m > n {
                    return Err(mlua::Error::RuntimeError(
                        "bad argument #2 to 'random' (interval is empty)".into(),
                    ));
                }
                Ok((r * (n - m + 1.0)).floor() + m)
            }
        }
    })?;
    math.raw_set("random", random)?;
    let randomseed = lua.create_function(move |_, seed: f64| {
        rng.store(seed as i64 as u64, Ordering::Relaxed);
        Ok(())
    })?;
    math.raw_set("randomseed", randomseed)?;
    Ok(())
}

/// The `redis` table's functions that need no run state.
fn redis_table(lua: &Lua) -> mlua::Result<Table> {
    let redis = lua.create_table()?;
    redis.raw_set(
        "error_reply",
        lua.create_function(|lua, msg: mlua::LuaString| {
            let t = lua.create_table()?;
            t.raw_set("err", convert::error_text(&msg.to_string_lossy()))?;
            Ok(t)
        })?,
    )?;
    redis.raw_set(
        "status_reply",
        lua.create_function(|lua, msg: mlua::LuaString| {
            let t = lua.create_table()?;
            t.raw_set("ok", msg)?;
            Ok(t)
        })?,
    )?;
    redis.raw_set(
        "sha1hex",
        lua.create_function(|_, s: mlua::LuaString| Ok(super::sha1_hex(&s.as_bytes())))?,
    )?;
    // Logging goes nowhere: a replica's log is not the place for a
    // client's script output, and the state machine does no I/O.
    redis.raw_set("log", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    redis.raw_set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    redis.raw_set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    // Raft replicates the script itself: these are accepted and change
    // nothing.
    redis.raw_set("set_repl", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    redis.raw_set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    redis.raw_set(
        "acl_check_cmd",
        lua.create_function(|_, args: MultiValue| {
            let argv: Vec<Bytes> = args
                .into_iter()
                .filter_map(|v| match v {
                    Value::String(s) => Some(Bytes::copy_from_slice(&s.as_bytes())),
                    _ => None,
                })
                .collect();
            match resolve(&argv) {
                Ok(_) => Ok(true),
                Err(_) => Err(mlua::Error::RuntimeError(
                    "Invalid command passed to redis.acl_check_cmd()".into(),
                )),
            }
        })?,
    )?;
    redis.raw_set("REDIS_VERSION", crate::server::REDIS_VERSION)?;
    redis.raw_set("REDIS_VERSION_NUM", redis_version_num())?;
    for (name, v) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        redis.raw_set(name, v)?;
    }
    Ok(redis)
}

fn redis_version_num() -> i64 {
    crate::server::REDIS_VERSION
        .split('.')
        .take(3)
        .fold(0, |acc, p| (acc << 8) | p.parse::<i64>().unwrap_or(0))
}

//! The Lua interpreter of a shard and one script run.
//!
//! The sandbox is Redis 7.0's: the base, `string`, `table` and `math`
//! libraries plus `cjson`, `cmsgpack`, `bit` and `struct`; no `io`, `os`,
//! `dofile`, `loadfile`, `require`, `print`; `loadstring` and `load`
//! refuse precompiled bytecode; globals and library tables are read-only
//! (`Attempt to modify a readonly table`), reading an unknown global is an
//! error. `math.random` draws from the entry's seed, so replicas agree.

use super::convert::{self, RespVersion};
use super::hook::{self, HookGuard, HookState, FUNCTION_SOURCE, SCRIPT_SOURCE};
use super::{libs, FunctionInfo, Library, ScriptFlags};
use crate::error::CmdError;
use crate::keyspace::Keyspace;
use crate::store::{Ctx, Store};
use crate::table::{resolve, Handler};
use bytes::Bytes;
use kvasir_resp::encode::format_double;
use kvasir_resp::Reply;
use mlua::chunk::ChunkMode;
use mlua::{
    ffi, BString, Either, Function, Lua, LuaOptions, MultiValue, RegistryKey, StdLib, Table, Value,
};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
-- pcall, xpcall and coroutines run their function in a coroutine through
-- `relay` (hook.rs): unlike Lua 5.1's C-call pcall it lets the step hook
-- pause the run inside, and once resumed it answers nothing, which means
-- "go on". A yield of the script's own inside pcall is refused as Lua 5.1
-- refuses it.
local relay, newco, is_c = hidden.resume, hidden.create_thread, hidden.is_c_function
local no_yield = 'attempt to yield across metamethod/C-call boundary'
local function pcall_end(co, ok, ...)
  if ok == nil then return pcall_end(co, relay(co)) end
  if ok == 'yield' then return fix(false, no_yield) end
  return fix(ok, ...)
end
pcall = function(f, ...)
  if rawtype(f) ~= 'function' or is_c(f) then return fix(rawpcall(f, ...)) end
  local co = newco(f)
  return pcall_end(co, relay(co, ...))
end
local function handled(h, e)
  local ok, v = rawpcall(h, e)
  if ok then return v end
  return 'error in error handling'
end
local function xpcall_end(co, h, ok, ...)
  if ok == nil then return xpcall_end(co, h, relay(co)) end
  if ok == true then return true, ... end
  if ok == 'yield' then return fix(false, handled(h, no_yield)) end
  return fix(false, handled(h, (...)))
end
xpcall = function(f, h)
  if rawtype(f) ~= 'function' or is_c(f) then return fix(rawxpcall(f, h)) end
  local co = newco(f)
  return xpcall_end(co, h, relay(co))
end
local function resume_end(co, ok, ...)
  if ok == nil then return resume_end(co, relay(co)) end
  if ok == 'yield' then return true, ... end
  return fix(ok, ...)
end
coroutine.resume = function(co, ...) return resume_end(co, relay(co, ...)) end
-- Coroutines are created from Rust so that the step hook covers them.
-- The script's own ones are remembered, so that `coroutine.running`
-- answers nil outside them (in the run's or pcall's coroutine), as at
-- Lua 5.1's top level.
local own = rawsetmeta({}, {__mode = 'k'})
local rawrunning = coroutine.running
coroutine.create = function(f)
  local co = newco(f)
  own[co] = true
  return co
end
coroutine.running = function()
  local co = rawrunning()
  if co and own[co] then return co end
  return nil
end
local function pack(...) return {n = select('#', ...), ...} end
coroutine.wrap = function(f)
  local co = coroutine.create(f)
  -- Not a tail call: Lua 5.1's wrap gives a string error the position of
  -- the function that called it (level 2 here), and a tail call would
  -- leave a level of its own in between.
  return function(...)
    local r = pack(relay(co, ...))
    while r.n == 0 do r = pack(relay(co)) end
    if r[1] == false then rawerror(r[2], 2) end
    return unpack(r, 2, r.n)
  end
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
-- Tables no script may change, as Redis 7.0's read-only tables: the
-- globals, the library tables and the metatables getmetatable shows of
-- them. A change would outlive the run and reach every later script of
-- this interpreter. rawset and setmetatable on them fail without a
-- position, as Redis's C functions fail; an assignment fails at the line.
local locked = rawsetmeta({}, {__mode = 'k'})
local function refused() rawerror('Attempt to modify a readonly table', 0) end
-- Lua 5.1's argument errors of the C functions, at the caller's line.
local rawselect = select
local function check_table(name, n, t)
  if rawtype(t) ~= 'table' then
    local got = n == 0 and 'no value' or rawtype(t)
    rawerror("bad argument #1 to '" .. name .. "' (table expected, got " .. got .. ")", 3)
  end
end
-- An error of the C function itself: luaL_error's at the caller's line
-- (setmetatable's "cannot change a protected metatable"), a table
-- error without a line (rawset's "table index is nil").
local function raised(level, ok, ...)
  if not ok then rawerror((...), level) end
  return ...
end
rawset = function(...)
  local n, t, k, v = rawselect('#', ...), ...
  check_table('rawset', n, t)
  if n < 3 then rawerror("bad argument #" .. (n + 1) .. " to 'rawset' (value expected)", 2) end
  if locked[t] then refused() end
  return raised(0, rawpcall(rawset_, t, k, v))
end
setmetatable = function(...)
  local n, t, mt = rawselect('#', ...), ...
  check_table('setmetatable', n, t)
  if mt ~= nil and rawtype(mt) ~= 'table' then
    rawerror("bad argument #2 to 'setmetatable' (nil or table expected)", 2)
  end
  if locked[t] then refused() end
  return raised(3, rawpcall(rawsetmeta, t, mt))
end

local function readonly(t)
  local proxy = rawsetmeta({}, {
    __index = t,
    __newindex = function() rawerror('Attempt to modify a readonly table', 2) end,
    __metatable = false,
  })
  locked[proxy] = true
  return proxy
end
for _, name in ipairs({'string', 'table', 'math', 'redis', 'cjson', 'cmsgpack', 'bit', 'struct', 'coroutine'}) do
  local t = _G[name]
  if t then rawset_(_G, name, readonly(t)) end
end
getmetatable('').__metatable = false
-- The body of a run's coroutine, called from Rust with the run's keys and
-- arguments: either `nkeys, n, key..., arg...` (n of them; building the
-- tables here costs less than one mlua call per table and per element) or,
-- for many of them, the two tables made in Rust. The script is called in a
-- tail call, so its frame is the coroutine's first and the step hook may
-- pause it wherever Lua 5.1 lets a hook yield (see hook.rs).
hidden.script_body = function(f, nkeys, n, ...)
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
  return f()
end
hidden.function_body = function(f, nkeys, n, ...)
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
  return f(keys, argv)
end
-- The globals move to G0 and _G stays empty: Lua calls __newindex only
-- for keys a table lacks, so with the globals in _G itself a script could
-- replace `string` or `KEYS` (and the change would outlive the run on this
-- replica only). Reads fall through to G0; every write is refused, as
-- Redis 7.0's read-only globals table refuses it.
local G = _G
for k, v in next, G do G0[k] = v end
for k in next, G0 do rawset_(G, k, nil) end
local function unknown_global(_, n)
  rawerror("Script attempted to access nonexistent global variable '" .. rawtostring(n) .. "'", 2)
end
rawsetmeta(G0, {__index = unknown_global, __metatable = false})
local gmeta = {
  __index = G0,
  __newindex = function() rawerror('Attempt to modify a readonly table', 2) end,
  __metatable = false,
}
rawsetmeta(G, gmeta)
locked[G] = true
locked[G0] = true
-- What getmetatable shows, as in Redis: the globals' metatable with its
-- __index that refuses unknown names, the strings' with the string
-- library, nothing for a library table; all read-only.
local rawgetmeta = getmetatable
local string_meta = readonly({__index = G0.string})
local shown_meta = {[G] = readonly({__index = unknown_global})}
rawset_(G0, 'getmetatable', function(v)
  local t = rawtype(v)
  if t == 'string' then return string_meta end
  if t == 'table' and locked[v] then return shown_meta[v] end
  return rawgetmeta(v)
end)
-- A library's code (FUNCTION LOAD) sees Redis 7.0's library API instead
-- of the globals: a `redis` with register_function, log and the version
-- only; reading anything else is an error. Functions it defines see the
-- globals when they run. Rust sets `register_function` in `load_redis`
-- during a load.
local function strict(t)
  return rawsetmeta(t, {
    __index = function(_, n)
      rawerror("Script attempted to access nonexistent global variable '" .. rawtostring(n) .. "'", 2)
    end,
    __metatable = false,
  })
end
local real_redis = hidden.redis_real
local load_redis = strict({})
for _, k in ipairs({'log', 'LOG_DEBUG', 'LOG_VERBOSE', 'LOG_NOTICE', 'LOG_WARNING',
                    'REDIS_VERSION', 'REDIS_VERSION_NUM'}) do
  rawset_(load_redis, k, real_redis[k])
end
hidden.load_redis = load_redis
hidden.register_outside_load = function()
  rawerror('redis.register_function can only be called on FUNCTION LOAD command', 0)
end
rawset_(load_redis, 'register_function', hidden.register_outside_load)
local load_env = strict({redis = readonly(load_redis)})
hidden.library_env = function(on)
  if on then gmeta.__index = load_env else gmeta.__index = G0 end
end
"#;

/// A shard's interpreter with its compiled scripts. Its `redis.call` and
/// `redis.pcall` run the command table's handlers for the engine `K`, the
/// one of the store it serves.
pub struct ScriptVm<K: Keyspace> {
    lua: Lua,
    /// Compiled EVAL bodies by SHA1, in the registry (a run pushes them
    /// straight onto its coroutine).
    compiled: super::ScriptMap<RegistryKey>,
    /// FCALL's functions, as loaded from the libraries of `generation`.
    functions: super::ScriptMap<RegistryKey>,
    generation: Option<u64>,
    rng: Arc<AtomicU64>,
    /// What the step hook counts and checks during a run.
    hook: HookState,
    /// The run's `redis.setresp` choice: 2 or 3.
    resp: Arc<AtomicU64>,
    /// The `redis` a library's code sees while it loads (its
    /// `register_function` is set during a load), the function that
    /// switches the globals to that library API and back, and the
    /// `register_function` called outside a load.
    load_redis: Table,
    library_env: Function,
    register_outside_load: Function,
    /// The run in progress (a `RefCell<CallState>`), null between runs;
    /// see [`with_current_run`].
    current: Arc<AtomicPtr<()>>,
    /// The prelude's coroutine bodies of an EVAL script and of a
    /// function.
    script_body: RegistryKey,
    function_body: RegistryKey,
    /// The coroutine runs execute in: reused while runs end normally (a
    /// coroutine that raised an error is dead), made anew otherwise.
    run_thread: Option<mlua::Thread>,
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

/// How long a paused run runs on before it pauses again (the server
/// serves other clients between two slices).
pub const PAUSED_SLICE: Duration = Duration::from_millis(5);

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
    /// The whole command (FUNCTION STATS shows it while the run is busy).
    pub command: &'a [Bytes],
}

/// What the commands a script issues share during one run.
struct CallState<'s, K: Keyspace> {
    access: Access<'s, K>,
    db: usize,
    ctx: Ctx,
    read_only: bool,
    /// The ACL user every call is checked against (standalone, restricted
    /// users; see `Store::script_caller`).
    caller: Option<Arc<crate::acl::User>>,
    calls: u64,
    /// The slot every key must be in (cluster mode).
    slot: Option<u16>,
    /// A write command was called (SCRIPT KILL then refuses).
    wrote: bool,
}

impl<K: Keyspace> ScriptVm<K> {
    /// Bytes the interpreter has allocated.
    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

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
        install_hooks(&lua, &hidden)?;
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
        let call = call_function::<K>(&lua, &current, &resp, true)?;
        let pcall = call_function::<K>(&lua, &current, &resp, false)?;
        redis.raw_set("call", &call)?;
        redis.raw_set("pcall", &pcall)?;
        redis.raw_set("acl_check_cmd", acl_check_function::<K>(&lua, &current)?)?;
        let script_body = lua.create_registry_value(hidden.raw_get::<Function>("script_body")?)?;
        let function_body =
            lua.create_registry_value(hidden.raw_get::<Function>("function_body")?)?;
        // The prelude's garbage (its chunk, its set-up tables) goes before
        // the first run: INFO's used_memory_lua starts at what is kept.
        lua.gc_collect()?;
        Ok(ScriptVm {
            lua,
            compiled: Default::default(),
            functions: Default::default(),
            generation: None,
            rng,
            hook: HookState::default(),
            resp,
            load_redis: hidden.raw_get("load_redis")?,
            library_env: hidden.raw_get("library_env")?,
            register_outside_load: hidden.raw_get("register_outside_load")?,
            current,
            script_body,
            function_body,
            run_thread: None,
            runs_since_gc: 0,
            engine: PhantomData,
        })
    }

    /// Compiles an EVAL body (or finds it compiled); the error is Redis's
    /// `Error compiling script` reply.
    /// Returns the function's registry reference.
    pub fn compile(&mut self, sha: &str, body: &[u8]) -> Result<c_int, CmdError> {
        if let Some(f) = self.compiled.get(sha) {
            return Ok(f.id());
        }
        let compile_error = |e: mlua::Error| {
            CmdError::other(format!(
                "ERR Error compiling script (new function): {}",
                lua_error_text(&e)
            ))
        };
        let f =
            compile_chunk(&self.lua, &strip_shebang(body), SCRIPT_SOURCE).map_err(compile_error)?;
        let key = self.lua.create_registry_value(f).map_err(compile_error)?;
        let id = key.id();
        self.compiled.insert(sha.to_string(), key);
        Ok(id)
    }

    /// The coroutine the next run executes in.
    fn run_thread(&mut self) -> mlua::Result<*mut ffi::lua_State> {
        if let Some(t) = &self.run_thread {
            return Ok(t.state());
        }
        // SAFETY: `exec_raw` runs the closure on the interpreter's state;
        // lua_newthread pushes the new coroutine, the one value returned.
        let thread: mlua::Thread = unsafe {
            self.lua.exec_raw((), |state| {
                ffi::lua_newthread(state);
            })
        }?;
        let state = thread.state();
        self.run_thread = Some(thread);
        Ok(state)
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
                for (name, (f, _)) in fs {
                    if let Ok(key) = self.lua.create_registry_value(f) {
                        self.functions.insert(name.to_ascii_lowercase(), key);
                    }
                }
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
        let chunk = compile_chunk(&self.lua, &body, FUNCTION_SOURCE).map_err(|e| {
            CmdError::other(format!(
                "ERR Error compiling function: {}",
                lua_error_text(&e)
            ))
        })?;
        let registered: RefCell<BTreeMap<String, (Function, FunctionInfo)>> =
            RefCell::new(BTreeMap::new());
        let problem: RefCell<Option<String>> = RefCell::new(None);
        let (load_redis, library_env) = (&self.load_redis, &self.library_env);
        let result = self.lua.scope(|scope| {
            let register = scope.create_function(|_, args: MultiValue| {
                match register_args(args) {
                    Ok((name, f, info)) => {
                        let mut reg = registered.borrow_mut();
                        // Within one library names may differ by case
                        // alone, as Redis 7.0 lets them ('a' and 'A').
                        match reg.entry(name) {
                            std::collections::btree_map::Entry::Occupied(_) => {
                                *problem.borrow_mut() =
                                    Some("Function already exists in the library".to_string());
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
            load_redis.raw_set("register_function", register)?;
            library_env.call::<()>(true)?;
            // A library's code is never paused, and stopped by an
            // instruction count standing for Redis's 500 ms.
            self.hook
                .start(crate::store::LIBRARY_LOAD_MAX_INSTRUCTIONS, None);
            let r = {
                let _hook = HookGuard::set(&self.hook);
                chunk.call::<()>(())
            };
            library_env.call::<()>(false)?;
            load_redis.raw_set("register_function", &self.register_outside_load)?;
            Ok(r)
        });
        let outcome = result.and_then(|r| r);
        if let Some(text) = problem.into_inner() {
            return Err(CmdError::other(format!(
                "ERR Error registering functions: ERR {text}"
            )));
        }
        if let Err(e) = outcome {
            let text = match self.hook.stopped() {
                Some(_) => "ERR FUNCTION LOAD timeout".to_string(),
                // Redis shows the error without mlua's traceback.
                None => {
                    let text = lua_error_text(&e);
                    match text.split_once("\nstack traceback:") {
                        Some((message, _)) => message.to_string(),
                        None => text,
                    }
                }
            };
            return Err(CmdError::other(format!(
                "ERR Error registering functions: {text}"
            )));
        }
        let registered = registered.into_inner();
        if registered.is_empty() {
            return Err(CmdError::other("ERR No functions registered"));
        }
        Ok(registered)
    }
}

/// How a run ended, or that it paused (see [`super::hook`]): a paused run
/// waits in its shard's [`super::Scripts`] until [`resume`] runs it on.
pub enum RunOutcome {
    Done(Reply),
    Paused,
}

impl RunOutcome {
    /// A handler's result: the reply, or [`CmdError::ScriptPaused`].
    pub fn into_result(self) -> Result<Reply, CmdError> {
        match self {
            RunOutcome::Done(reply) => Ok(reply),
            RunOutcome::Paused => Err(CmdError::ScriptPaused),
        }
    }
}

/// What a run keeps across a pause: the interpreter itself (its run
/// coroutine suspended where the hook yielded) and the run's state.
pub struct PausedRun<K: Keyspace> {
    vm: Box<ScriptVm<K>>,
    meta: RunMeta,
    db: usize,
    calls: u64,
    slot: Option<u16>,
    /// The script called a write command (it can no longer be killed).
    pub(super) wrote: bool,
    /// SCRIPT KILL or FUNCTION KILL asked to stop it.
    pub(super) killed: bool,
}

impl<K: Keyspace> PausedRun<K> {
    pub(super) fn is_function(&self) -> bool {
        self.meta.source == FUNCTION_SOURCE
    }

    pub(super) fn name(&self) -> &str {
        &self.meta.name
    }

    pub(super) fn started(&self) -> Instant {
        self.meta.started
    }

    pub(super) fn command(&self) -> &[Bytes] {
        &self.meta.command
    }
}

/// The parts of a run that do not change while it runs.
struct RunMeta {
    /// Filled when the run first pauses.
    name: String,
    command: Vec<Bytes>,
    source: &'static str,
    ctx: Ctx,
    read_only: bool,
    caller: Option<Arc<crate::acl::User>>,
    /// The interpreter's memory limit during the run.
    mem_limit: usize,
    started: Instant,
}

/// How one resume of a run's coroutine ended.
enum Step {
    Returned(Value),
    /// A value that is not a table, converted straight off the stack.
    ReturnedScalar(Reply),
    Yielded,
    /// The error value and the script line it was raised at.
    Failed(Value, Option<i64>),
}

/// Runs `program` against the store: the one entry point of EVAL, EVALSHA,
/// FCALL and their read-only forms. Returns the outcome (a script error is
/// an error reply) and whether an EVAL body compiled (so it may be cached).
/// The run may pause only if the store allows it (`script_pause_after`).
pub fn run<K: Keyspace>(
    access: Access<'_, K>,
    program: Program<'_>,
    run: Run<'_>,
) -> (RunOutcome, bool) {
    let scripts = &access.store().scripts;
    let mut vm = match scripts.take_vm() {
        Ok(vm) => vm,
        Err(e) => {
            return (
                RunOutcome::Done(Reply::Error(format!("ERR {e}").into())),
                false,
            )
        }
    };
    let (func, name, source) = match program {
        Program::Eval { sha, body } => match vm.compile(sha, body) {
            Ok(id) => (id, sha, SCRIPT_SOURCE),
            Err(e) => {
                access.store().scripts.put_vm(vm);
                return (RunOutcome::Done(e.to_reply()), false);
            }
        },
        Program::Function { name } => {
            let store = access.store();
            vm.sync_libraries(&store.scripts.libraries, store.scripts.generation);
            // Keys are lower case: FCALL's name is case-insensitive.
            let found = match vm.functions.get(name) {
                Some(f) => Some(f),
                None => vm.functions.get(&name.to_ascii_lowercase()),
            };
            match found {
                Some(f) => (f.id(), name, FUNCTION_SOURCE),
                None => {
                    store.scripts.put_vm(vm);
                    return (
                        RunOutcome::Done(Reply::error("ERR Function not found")),
                        true,
                    );
                }
            }
        }
    };
    let thread = match vm.run_thread() {
        Ok(t) => t,
        Err(e) => {
            access.store().scripts.put_vm(vm);
            let reply = script_error(&lua_error_text(&e), name, source, None);
            return (RunOutcome::Done(reply), true);
        }
    };
    let slot = match (access.store().key_slot, run.keys.first()) {
        (Some(slot_of), Some(k)) => Some(slot_of(k)),
        _ => None,
    };
    let started = Instant::now();
    let pause_at = access
        .store()
        .script_pause_after
        .map(|after| (thread, started + after));
    vm.hook
        .start(access.store().limits.script_max_instructions, pause_at);
    // SAFETY: the run coroutine of this interpreter, alive in `vm`.
    unsafe { hook::install(thread) };
    vm.rng.store(run.ctx.seed, Ordering::Relaxed);
    vm.resp.store(2, Ordering::Relaxed);
    // The limit counts from the use before the run's keys and arguments
    // are made (so they count too).
    let meta = RunMeta {
        name: String::new(),
        command: Vec::new(),
        source,
        ctx: run.ctx,
        read_only: run.read_only,
        caller: access.store().script_caller.borrow().clone(),
        mem_limit: vm.lua.used_memory().saturating_add(SCRIPT_MEMORY_LIMIT),
        started,
    };
    let state = RefCell::new(CallState {
        caller: meta.caller.clone(),
        access,
        db: run.db,
        ctx: run.ctx,
        read_only: run.read_only,
        calls: 0,
        slot,
        wrote: false,
    });
    let step = {
        let _hook = HookGuard::set(&vm.hook);
        with_current_run(&vm.current, &state, || {
            start(
                &vm,
                thread,
                func,
                source == FUNCTION_SOURCE,
                &run,
                meta.mem_limit,
            )
        })
    };
    let outcome = finish(vm, state.into_inner(), step, meta, name, run.command);
    (outcome, true)
}

/// Runs the paused run of `access`'s store on for one more slice, or ends
/// it at once if it was killed. None if no run is paused.
pub fn resume<K: Keyspace>(access: Access<'_, K>) -> Option<RunOutcome> {
    let paused = access.store().scripts.take_paused()?;
    let PausedRun {
        mut vm,
        meta,
        db,
        calls,
        slot,
        wrote,
        killed,
    } = *paused;
    let Some(thread) = vm.run_thread.as_ref().map(mlua::Thread::state) else {
        let reply = script_error("the paused run was lost", &meta.name, meta.source, None);
        access.store().scripts.put_vm(vm);
        return Some(RunOutcome::Done(reply));
    };
    if killed {
        // Nothing of the script runs after SCRIPT KILL answered OK.
        let line = vm.hook.paused_line();
        vm.run_thread = None;
        let reply = script_error(hook::KILLED_ERROR, &meta.name, meta.source, line);
        access.store().scripts.put_vm(vm);
        return Some(RunOutcome::Done(reply));
    }
    vm.hook.pause_next_at(Instant::now() + PAUSED_SLICE);
    let state = RefCell::new(CallState {
        caller: meta.caller.clone(),
        access,
        db,
        ctx: meta.ctx,
        read_only: meta.read_only,
        calls,
        slot,
        wrote,
    });
    let step = {
        let _hook = HookGuard::set(&vm.hook);
        with_current_run(&vm.current, &state, || {
            let _ = vm.lua.set_memory_limit(meta.mem_limit);
            let out = resume_thread(&vm.lua, thread, 0);
            let _ = vm.lua.set_memory_limit(0);
            out
        })
    };
    let name = meta.name.clone();
    Some(finish(vm, state.into_inner(), step, meta, &name, &[]))
}

/// The reply of a run that ended, or the run parked in its store if it
/// paused.
fn finish<K: Keyspace>(
    mut vm: Box<ScriptVm<K>>,
    state: CallState<'_, K>,
    step: mlua::Result<Step>,
    mut meta: RunMeta,
    name: &str,
    command: &[Bytes],
) -> RunOutcome {
    let source = meta.source;
    let reply = match step {
        Ok(Step::Yielded) => {
            if meta.name.is_empty() {
                meta.name = name.to_string();
                meta.command = command.to_vec();
            }
            let scripts = &state.access.store().scripts;
            scripts.park(Box::new(PausedRun {
                vm,
                meta,
                db: state.db,
                calls: state.calls,
                slot: state.slot,
                wrote: state.wrote,
                killed: false,
            }));
            return RunOutcome::Paused;
        }
        Ok(Step::Returned(value)) => match vm.hook.stopped() {
            Some(text) => script_error(text, name, source, None),
            None => convert::lua_to_reply(&value, MAX_REPLY_DEPTH)
                .unwrap_or_else(|| Reply::error("ERR reached lua stack limit")),
        },
        Ok(Step::ReturnedScalar(reply)) => match vm.hook.stopped() {
            Some(text) => script_error(text, name, source, None),
            None => reply,
        },
        Ok(Step::Failed(value, line)) => {
            vm.run_thread = None;
            match vm.hook.stopped() {
                Some(text) => script_error(text, name, source, line),
                None => raised_error_reply(&value, line, name, source),
            }
        }
        Err(e) => {
            vm.run_thread = None;
            script_error(&lua_error_text(&e), name, source, None)
        }
    };
    vm.runs_since_gc += 1;
    if vm.runs_since_gc >= GC_EVERY {
        vm.runs_since_gc = 0;
        let _ = vm.lua.gc_step();
    }
    state.access.store().scripts.put_vm(vm);
    RunOutcome::Done(reply)
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

/// `redis.acl_check_cmd(command, arg...)`: whether the run's caller may
/// run the command (always, for an unrestricted caller); an error for a
/// command that does not exist.
fn acl_check_function<K: Keyspace>(
    lua: &Lua,
    current: &Arc<AtomicPtr<()>>,
) -> mlua::Result<Function> {
    let current = current.clone();
    lua.create_function(move |lua, args: MultiValue| {
        // Arguments as redis.call takes them: strings, numbers as Lua
        // writes them.
        if args.is_empty() {
            return Err(mlua::Error::RuntimeError(
                "Please specify at least one argument for this redis lib call".into(),
            ));
        }
        let mut argv: Vec<Bytes> = Vec::with_capacity(args.len());
        for v in args {
            let text = match v {
                v @ (Value::String(_) | Value::Integer(_) | Value::Number(_)) => {
                    lua.coerce_string(v)?
                }
                _ => None,
            };
            let Some(text) = text else {
                return Err(mlua::Error::RuntimeError(
                    "Lua redis lib command arguments must be strings or integers".into(),
                ));
            };
            argv.push(Bytes::copy_from_slice(&text.as_bytes()));
        }
        let Ok((spec, parent)) = resolve(&argv) else {
            return Err(mlua::Error::RuntimeError(
                "Invalid command passed to redis.acl_check_cmd()".into(),
            ));
        };
        let caller = current_run::<K, _>(&current, |state| state.borrow().caller.clone()).flatten();
        Ok(caller.is_none_or(|user| crate::acl::check(&user, spec, parent, &argv).is_ok()))
    })
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

/// `redis.call` (`raise`) or `redis.pcall` for the calls its fast path
/// leaves (see [`call_function`]): runs one command of the current run
/// and gives its reply to the script.
fn script_call<K: Keyspace>(
    lua: &Lua,
    current: &AtomicPtr<()>,
    resp: &AtomicU64,
    args: CallArgs,
    raise: bool,
) -> mlua::Result<Value> {
    let reply = command_args(args).and_then(|argv| run_call::<K>(current, argv));
    deliver_call_reply(lua, resp, reply, raise)
}

/// Runs one command of the current run (an error outside a run).
fn run_call<K: Keyspace>(current: &AtomicPtr<()>, argv: Vec<Bytes>) -> Result<Reply, CmdError> {
    current_run::<K, _>(current, |state| state.borrow_mut().call(argv))
        .unwrap_or_else(|| Err(not_allowed()))
}

/// A call's reply (or error) as the script sees it, under the run's
/// memory limit.
fn deliver_call_reply(
    lua: &Lua,
    resp: &AtomicU64,
    reply: Result<Reply, CmdError>,
    raise: bool,
) -> mlua::Result<Value> {
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

/// Starts a run in its coroutine: the prelude's body with the script and
/// the run's keys and arguments. `func` is the script's registry
/// reference.
fn start<K: Keyspace>(
    vm: &ScriptVm<K>,
    thread: *mut ffi::lua_State,
    func: c_int,
    is_function: bool,
    run: &Run<'_>,
    mem_limit: usize,
) -> mlua::Result<Step> {
    let lua = &vm.lua;
    let body = if is_function {
        vm.function_body.id()
    } else {
        vm.script_body.id()
    };
    let pushed = run.keys.len() + run.argv.len();
    // The values go straight onto the coroutine's stack, outside any
    // protected call: with no memory limit set (it is set only once they
    // are pushed) an allocation fails only when the process is out of
    // memory, which aborts whatever runs.
    // SAFETY: `thread` is the run coroutine of this interpreter, not
    // running and with an empty stack (runs do not nest, and a finished
    // run leaves nothing on it); lua_checkstack makes room for everything
    // pushed below; `body` and `func` are live registry references of
    // this interpreter (kept by `vm`).
    unsafe {
        let room = pushed.min(MAX_PUSHED_ARGS) as c_int + 4;
        if ffi::lua_checkstack(thread, room) == 0 {
            return Err(mlua::Error::MemoryError("not enough memory".into()));
        }
        ffi::lua_rawgeti(thread, ffi::LUA_REGISTRYINDEX, body as _);
        ffi::lua_rawgeti(thread, ffi::LUA_REGISTRYINDEX, func as _);
    }
    let nargs = if pushed <= MAX_PUSHED_ARGS {
        // SAFETY: as above; the room was checked for `pushed` + 4 values.
        unsafe {
            ffi::lua_pushinteger(thread, run.keys.len() as ffi::lua_Integer);
            ffi::lua_pushinteger(thread, pushed as ffi::lua_Integer);
            for b in run.keys.iter().chain(run.argv) {
                ffi::lua_pushlstring(thread, b.as_ptr().cast(), b.len());
            }
        }
        pushed as c_int + 3
    } else {
        let tables = bytes_table(lua, run.keys).and_then(|keys| {
            let argv = bytes_table(lua, run.argv)?;
            // SAFETY: `exec_raw` runs the closure protected with the two
            // tables as its only stack values; lua_xmove moves them onto
            // the coroutine, which has room for them (checked above).
            unsafe { lua.exec_raw::<()>((keys, argv), |state| ffi::lua_xmove(state, thread, 2)) }
        });
        if let Err(e) = tables {
            // SAFETY: the coroutine holds the two functions pushed above.
            unsafe { ffi::lua_settop(thread, 0) };
            return Err(e);
        }
        3
    };
    let _ = lua.set_memory_limit(mem_limit);
    let out = resume_thread(lua, thread, nargs);
    let _ = lua.set_memory_limit(0);
    out
}

/// Resumes the run coroutine `thread` with the `nargs` values on its stack
/// (the body and its arguments to start it, nothing to go on after a
/// pause).
fn resume_thread(lua: &Lua, thread: *mut ffi::lua_State, nargs: c_int) -> mlua::Result<Step> {
    // SAFETY: `thread` is a coroutine of this interpreter, kept alive by
    // the VM and not running (runs do not nest). lua_resume runs it
    // protected until it returns (its results left on its stack), yields
    // from the hook or fails (the error on top, its frames left in place,
    // which `script_line` reads).
    let mut nresults: c_int = 0;
    let status = unsafe { ffi::lua_resume(thread, std::ptr::null_mut(), nargs, &mut nresults) };
    match status {
        ffi::LUA_OK => {
            // SAFETY: the coroutine finished with `nresults` values on its
            // stack; the first is read in place (a string's bytes copied
            // before the stack is cleared).
            let scalar = unsafe {
                if nresults == 0 {
                    Some(Reply::Nil)
                } else {
                    let at = ffi::lua_gettop(thread) - nresults + 1;
                    convert::stack_scalar_to_reply(thread, at)
                }
            };
            let step = match scalar {
                Some(reply) => Step::ReturnedScalar(reply),
                None => Step::Returned(take_value(lua, thread, nresults)?),
            };
            // SAFETY: clears the finished coroutine's results.
            unsafe { ffi::lua_settop(thread, 0) };
            Ok(step)
        }
        ffi::LUA_YIELD => {
            // SAFETY: a suspended coroutine's frames are in place.
            let line = unsafe { hook::script_line(thread, hook::SOURCES) };
            Ok(if hook::take_pause() {
                Step::Yielded
            } else {
                // The script's own yield outside a coroutine: Redis runs
                // scripts inside a protected call, where Lua 5.1 refuses
                // it with this error. The run coroutine stays suspended
                // and is dropped.
                Step::Failed(
                    Value::String(
                        lua.create_string("attempt to yield across metamethod/C-call boundary")?,
                    ),
                    line,
                )
            })
        }
        _ => {
            // SAFETY: a failed coroutine keeps its frames and the error
            // value on top.
            let line = unsafe { hook::script_line(thread, hook::SOURCES) };
            Ok(Step::Failed(take_value(lua, thread, 1)?, line))
        }
    }
}

/// The first of the `n` values on top of the coroutine `thread`'s stack as
/// an mlua value (the rest are dropped).
fn take_value(lua: &Lua, thread: *mut ffi::lua_State, n: c_int) -> mlua::Result<Value> {
    // SAFETY: `exec_raw` runs the closure protected on the interpreter's
    // state (with room for 3 values), the coroutine being of the same
    // interpreter and not running; the first of its top `n` values is
    // moved there, the one value returned.
    unsafe {
        lua.exec_raw((), |state| {
            let top = ffi::lua_gettop(thread);
            ffi::lua_settop(thread, top - n + 1);
            ffi::lua_xmove(thread, state, 1);
        })
    }
}

/// The reply for an error a script raised and did not catch.
fn raised_error_reply(err: &Value, line: Option<i64>, name: &str, source: &str) -> Reply {
    match err {
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
/// Calls with more arguments than this pass them in one table.
const PACKED_ARGS: c_int = 64;

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
    if n < 0 {
        // Packed by `redis_call`: the arguments are the table's 1..=-n.
        let Some(Either::Right(Value::Table(packed))) = a1 else {
            return Err(bad_argument());
        };
        return (1..=n.unsigned_abs())
            .map(|i| value_arg(packed.raw_get(i).map_err(|_| bad_argument())?))
            .collect();
    }
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

/// What a `redis.call` or `redis.pcall` C function reaches through its
/// light-userdata upvalue (kept alive by its `finish` upvalue, which owns
/// a reference).
struct CallPath {
    current: Arc<AtomicPtr<()>>,
    resp: Arc<AtomicU64>,
    /// The outcome of the fast path's last call while it is handed to the
    /// script: its bytes while they are pushed, or all of it for `finish`.
    pending: RefCell<Option<Result<Reply, CmdError>>>,
}

// SAFETY: a `CallPath` is reached only from inside its interpreter (its
// `redis.call` C function and the `finish` callback), and an interpreter
// runs on one thread at a time: it is taken out of its `Scripts` for a run
// (so `pending` is never borrowed from two threads); mlua requires the
// callbacks of a `send` interpreter to be `Send`, hence the impl.
unsafe impl Sync for CallPath {}

/// How the fast path hands a call's outcome to the script.
#[derive(Clone, Copy)]
enum FastReply {
    Number(i64),
    False,
    Nil,
    /// `pending` holds a bulk string.
    Bulk,
    /// `pending` holds a status reply (an `{ok = ...}` table).
    Status,
    /// `pending` holds an outcome for `finish` (mlua) to convert.
    Other,
}

/// Calls of up to this many arguments, all strings, take the fast path.
const FAST_CALL_ARGS: c_int = 32;

/// `redis.call` (`raise`) or `redis.pcall`: a C function whose fast path
/// runs calls whose arguments are all strings and pushes the common
/// replies (integer, nil, bulk string, status) itself, with no mlua
/// callback; every other call goes through `script_call` as an mlua
/// function (upvalue 1), and every other reply through `finish` (upvalue
/// 2), so error texts and the conversion of errors, tables and RESP3
/// types have one implementation (the four scalar replies follow
/// `convert::reply_to_lua`'s rules, tested side by side with Redis). It is a
/// C function, not a Lua one, so that a script's `return redis.call(...)`
/// keeps the script's frame (and line for errors) on the stack: Lua 5.1
/// replaces the frame only in a tail call of a Lua function.
fn call_function<K: Keyspace>(
    lua: &Lua,
    current: &Arc<AtomicPtr<()>>,
    resp: &Arc<AtomicU64>,
    raise: bool,
) -> mlua::Result<Function> {
    let path = Arc::new(CallPath {
        current: current.clone(),
        resp: resp.clone(),
        pending: RefCell::new(None),
    });
    let general_path = path.clone();
    let general = lua.create_function(move |lua, args: CallArgs| {
        script_call::<K>(lua, &general_path.current, &general_path.resp, args, raise)
    })?;
    let finish_path = path.clone();
    let finish = lua.create_function(move |lua, ()| {
        let reply = finish_path
            .pending
            .borrow_mut()
            .take()
            .unwrap_or_else(|| Err(not_allowed()));
        deliver_call_reply(lua, &finish_path.resp, reply, raise)
    })?;
    let ptr = Arc::as_ptr(&path) as *mut std::ffi::c_void;
    // SAFETY: `exec_raw` runs the closure protected, with `general` and
    // `finish` pushed as its arguments; lua_pushcclosure pops them and the
    // light userdata as the closure's three upvalues and pushes the
    // closure, the one value returned. `ptr` stays valid while the
    // closure lives: `finish`, its upvalue, holds a reference to `path`.
    unsafe {
        lua.exec_raw::<Function>((general, finish), |state| {
            ffi::lua_pushlightuserdata(state, ptr);
            ffi::lua_pushcclosure(state, redis_call::<K>, 3);
        })
    }
}

unsafe extern "C-unwind" fn redis_call<K: Keyspace>(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua calls this as the C closure made by `call_function`,
    // with its three upvalues and at least LUA_MINSTACK free stack slots,
    // of which at most four are used. An error raised here (a memory
    // error while pushing, or one `finish` or `general` raises) unwinds
    // through this frame by longjmp, which is sound as it holds nothing
    // to drop: the outcome being pushed stays in `pending` (cleared by the
    // next call).
    unsafe {
        let n = ffi::lua_gettop(state);
        if (1..=FAST_CALL_ARGS).contains(&n)
            && (1..=n).all(|i| ffi::lua_type(state, i) == ffi::LUA_TSTRING)
        {
            let path = &*(ffi::lua_touserdata(state, ffi::lua_upvalueindex(3)) as *const CallPath);
            match fast_call::<K>(state, n, path) {
                FastReply::Number(i) => ffi::lua_pushnumber(state, i as ffi::lua_Number),
                FastReply::False => ffi::lua_pushboolean(state, 0),
                FastReply::Nil => ffi::lua_pushnil(state),
                FastReply::Bulk => {
                    let (ptr, len) = pending_text(path);
                    ffi::lua_pushlstring(state, ptr, len);
                    *path.pending.borrow_mut() = None;
                }
                FastReply::Status => {
                    ffi::lua_createtable(state, 0, 1);
                    ffi::lua_pushlstring(state, c"ok".as_ptr(), 2);
                    let (ptr, len) = pending_text(path);
                    ffi::lua_pushlstring(state, ptr, len);
                    ffi::lua_rawset(state, -3);
                    *path.pending.borrow_mut() = None;
                }
                FastReply::Other => {
                    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
                    ffi::lua_call(state, 0, 1);
                }
            }
            return 1;
        }
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
        if n > PACKED_ARGS {
            // Thousands of arguments (`unpack` of a big table, which Redis
            // takes up to Lua's 8000-slot stack) would not fit the stack
            // mlua needs to convert them: they travel in one table, the
            // count negated to say so.
            ffi::lua_createtable(state, n, 0);
            for i in 1..=n {
                ffi::lua_pushvalue(state, i);
                ffi::lua_rawseti(state, -2, i as ffi::lua_Integer);
            }
            ffi::lua_replace(state, 1);
            ffi::lua_settop(state, 1);
            ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
            ffi::lua_insert(state, 1);
            ffi::lua_pushinteger(state, -(n as ffi::lua_Integer));
            ffi::lua_insert(state, 2);
            ffi::lua_call(state, 2, ffi::LUA_MULTRET);
            return ffi::lua_gettop(state);
        }
        // mlua gives a callback's missing arguments as nil, but a nil
        // argument is an error (Redis checks each of `lua_gettop`
        // arguments): the count goes first.
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_insert(state, 1);
        ffi::lua_pushinteger(state, n as ffi::lua_Integer);
        ffi::lua_insert(state, 2);
        ffi::lua_call(state, n + 1, ffi::LUA_MULTRET);
        ffi::lua_gettop(state)
    }
}

/// Runs the call whose `n` string arguments are on `state`'s stack and
/// says how to hand over its outcome (left in `path.pending` unless it is
/// a number or nil).
///
/// # Safety
/// The stack's values 1..=n must be strings.
unsafe fn fast_call<K: Keyspace>(
    state: *mut ffi::lua_State,
    n: c_int,
    path: &CallPath,
) -> FastReply {
    let mut argv = Vec::with_capacity(n as usize);
    for i in 1..=n {
        let mut len = 0usize;
        // SAFETY: a string's bytes, valid while it is on the stack.
        let bytes = unsafe {
            let ptr = ffi::lua_tolstring(state, i, &mut len);
            std::slice::from_raw_parts(ptr.cast::<u8>(), len)
        };
        argv.push(Bytes::copy_from_slice(bytes));
    }
    let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_call::<K>(&path.current, argv)
    }))
    .unwrap_or_else(|_| Err(CmdError::other("ERR the command failed inside the server")));
    let resp3 = path.resp.load(Ordering::Relaxed) == 3;
    let how = match &reply {
        Ok(Reply::Int(i)) => return FastReply::Number(*i),
        Ok(Reply::Nil | Reply::NilArray) if resp3 => return FastReply::Nil,
        Ok(Reply::Nil | Reply::NilArray) => return FastReply::False,
        Ok(Reply::Bulk(_)) => FastReply::Bulk,
        Ok(Reply::Simple(_)) => FastReply::Status,
        _ => FastReply::Other,
    };
    *path.pending.borrow_mut() = Some(reply);
    how
}

/// The bytes of the bulk or status reply in `path.pending`, read with no
/// borrow guard alive (a longjmp may follow).
///
/// # Safety
/// `pending` must hold a bulk or status reply and not be borrowed; the
/// bytes live until `pending` changes.
unsafe fn pending_text(path: &CallPath) -> (*const std::ffi::c_char, usize) {
    // SAFETY: no borrow of `pending` is alive (see above).
    match unsafe { &*path.pending.as_ptr() } {
        Some(Ok(Reply::Bulk(b))) => (b.as_ptr().cast(), b.len()),
        Some(Ok(Reply::Simple(s))) => (s.as_ptr().cast(), s.len()),
        _ => (c"".as_ptr(), 0),
    }
}

impl<K: Keyspace> CallState<'_, K> {
    /// One `redis.call`: the command's reply, or the error it raises.
    fn call(&mut self, mut argv: Vec<Bytes>) -> Result<Reply, CmdError> {
        let renamed = self.access.store().renames.apply(&mut argv);
        let (spec, parent) = match renamed.and_then(|()| resolve(&argv)) {
            Ok(found) => found,
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
        // Blocking commands Redis allows in scripts (BLMPOP, BZMPOP, XREAD)
        // answer at once, as at their timeout; the rest are NOSCRIPT.
        if spec.flags.contains(crate::table::Flags::NOSCRIPT) {
            return Err(not_allowed());
        }
        if let Some(user) = &self.caller {
            if let Err(denied) = crate::acl::check(user, spec, parent, &argv) {
                let object = denied.object(spec, parent, &argv);
                self.access
                    .store()
                    .script_refusals
                    .borrow_mut()
                    .push((denied, object));
                return Err(CmdError::other(denied.script_error()));
            }
            if let Some(refused) = crate::acl::pattern_refusal(user, spec, parent, &argv) {
                return Err(CmdError::other(refused));
            }
        }
        // As Redis's scriptVerifyWriteCommandAllow, a read-only script may
        // not call what may replicate either (PUBLISH): it is what lets such
        // scripts run during CLIENT PAUSE WRITE.
        if self.read_only
            && (spec.is_write() || spec.flags.contains(crate::table::Flags::MAY_REPLICATE))
        {
            return Err(CmdError::other(
                "ERR Write commands are not allowed from read-only scripts.",
            ));
        }
        self.check_slots(spec, &argv)?;
        // Over maxmemory at the start, a script may not begin growing the
        // data (once it wrote, it runs to its end: a script is atomic).
        if !self.wrote
            && spec.flags.contains(crate::table::Flags::DENYOOM)
            && self.access.store().script_oom.get()
        {
            return Err(CmdError::other(
                "OOM command not allowed when used memory > 'maxmemory'.",
            ));
        }
        if spec.is_write() {
            if let Some(refusal) = self.access.store().script_write_refusal.borrow().as_ref() {
                return Err(CmdError::other(refusal.clone()));
            }
            self.wrote = true;
        } else if spec.flags.contains(crate::table::Flags::READONLY) {
            let store = self.access.store();
            store
                .script_read
                .set(Some(store.reported_writes.borrow().len()));
        }
        self.calls += 1;
        let ctx = Ctx {
            now_ms: self.ctx.now_ms,
            seed: self.ctx.seed.wrapping_add(self.calls),
        };
        let timer = self.access.store().record_script_stats.then(Instant::now);
        if let Handler::Session(cmd) = spec.handler {
            let result = self.session_command(cmd, &argv);
            self.note_stat(spec, parent, timer, &result);
            return result;
        }
        let store = self.access.store();
        if store.monitored.get() {
            store
                .script_calls
                .borrow_mut()
                .push((self.db, argv.clone()));
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
        self.note_stat(spec, parent, timer, &result);
        // A command that reports its own writes (SMOVE) already did.
        if let Ok(reply) = &result {
            if spec.is_write()
                && !spec.reports_writes
                && !self.access.store().changed_nothing(spec, &argv, reply)
            {
                self.access
                    .store()
                    .reported_writes
                    .borrow_mut()
                    .push((self.db, spec, argv));
            }
        }
        match result {
            Ok(r) => Ok(r),
            // A script never blocks: a blocking command that finds nothing
            // answers as at its timeout, as in MULTI.
            Err(CmdError::WouldBlock(on)) => Ok(on.on_timeout),
            Err(e) => Ok(e.to_reply()),
        }
    }

    /// Notes one command the script ran for INFO commandstats (when the
    /// server asked for it: `timer` is set).
    fn note_stat(
        &self,
        spec: &'static crate::table::CommandSpec,
        parent: Option<&'static crate::table::CommandSpec>,
        timer: Option<Instant>,
        result: &Result<Reply, CmdError>,
    ) {
        let Some(started) = timer else {
            return;
        };
        let failed = match result {
            Ok(Reply::Error(text)) => Some(text.to_string()),
            Ok(_) | Err(CmdError::WouldBlock(_)) => None,
            Err(e) => Some(e.text().into_owned()),
        };
        let micros = started.elapsed().as_micros() as u64;
        self.access
            .store()
            .script_stats
            .borrow_mut()
            .push((spec, parent, micros, failed));
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
            SessionCmd::Publish | SessionCmd::Spublish => {
                let shard = cmd == SessionCmd::Spublish;
                if let Some(receivers) = super::publish_from_script(&argv[1], &argv[2], shard) {
                    return Ok(Reply::Int(receivers));
                }
                // Under Raft every replica runs the script: the message goes
                // with the entry's events, for the shard's leader to publish
                // once; the script sees 0 receivers, the same on every
                // replica (a count that differed could make them diverge).
                let Access::Write(store) = &mut self.access else {
                    return Err(not_allowed());
                };
                store.events.push(crate::notify::Event {
                    class: if shard {
                        crate::notify::SCRIPT_SPUBLISH
                    } else {
                        crate::notify::SCRIPT_PUBLISH
                    },
                    db: self.db,
                    name: "",
                    key: argv[1].clone(),
                    message: argv[2].clone(),
                });
                Ok(Reply::Int(0))
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
/// `redis.register_function{function_name=, callback=, flags=, description=}`,
/// checked in Redis 7.0's order and with its texts.
fn register_args(args: MultiValue) -> Result<(String, Function, FunctionInfo), String> {
    // Lua's tostring of a string or a number (lua_isstring), as Redis reads
    // names and descriptions.
    fn text(v: &Value) -> Option<String> {
        match v {
            Value::String(s) => Some(s.to_string_lossy()),
            Value::Integer(n) => Some(n.to_string()),
            Value::Number(n) => Some(format_double(*n)),
            _ => None,
        }
    }
    let mut args: Vec<Value> = args.into_iter().collect();
    let (name, callback, flags, description) = match args.len() {
        1 => {
            let Value::Table(t) = args.remove(0) else {
                return Err(
                    "calling redis.register_function with a single argument is only \
                            applicable to Lua table (representing named arguments)."
                        .into(),
                );
            };
            let (mut name, mut callback, mut flags, mut description) = (None, None, None, None);
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair.map_err(|e| e.to_string())?;
                let Some(key) = text(&k) else {
                    return Err(
                        "named argument key given to redis.register_function is not a string"
                            .into(),
                    );
                };
                match key.to_ascii_lowercase().as_str() {
                    "function_name" => match text(&v) {
                        Some(n) => name = Some(n),
                        None => return Err("function_name argument given to redis.register_function must be a string".into()),
                    },
                    "description" => match text(&v) {
                        Some(d) => description = Some(d),
                        None => return Err("description argument given to redis.register_function must be a string".into()),
                    },
                    "callback" => match v {
                        Value::Function(f) => callback = Some(f),
                        _ => return Err("callback argument given to redis.register_function must be a function".into()),
                    },
                    "flags" => match v {
                        Value::Table(fl) => flags = Some(parse_function_flags(fl)?),
                        _ => return Err("flags argument to redis.register_function must be a table representing function flags".into()),
                    },
                    _ => return Err("unknown argument given to redis.register_function".into()),
                }
            }
            let Some(name) = name else {
                return Err("redis.register_function must get a function name argument".into());
            };
            let Some(callback) = callback else {
                return Err("redis.register_function must get a callback argument".into());
            };
            (name, callback, flags, description)
        }
        2 => {
            let Some(name) = text(&args[0]) else {
                return Err("first argument to redis.register_function must be a string".into());
            };
            let Value::Function(f) = args.remove(1) else {
                return Err("second argument to redis.register_function must be a function".into());
            };
            (name, f, None, None)
        }
        _ => return Err("wrong number of arguments to redis.register_function".into()),
    };
    if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        // Redis 7.0 says "Library" of a function's name too.
        return Err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    Ok((
        name,
        callback,
        FunctionInfo {
            description,
            flags: flags.unwrap_or_default(),
        },
    ))
}

/// register_function's `flags` table: names of script flags.
fn parse_function_flags(fl: Table) -> Result<ScriptFlags, String> {
    let mut parsed = ScriptFlags::default();
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
    Ok(parsed)
}

/// The step hook (see [`hook`]) on the main state, where libraries load,
/// and on every coroutine a script makes; `hidden.stopped` tells the
/// prelude's `pcall`/`xpcall` not to swallow the error of a stopped run.
fn install_hooks(lua: &Lua, hidden: &Table) -> mlua::Result<()> {
    hidden.raw_set(
        "stopped",
        lua.create_function(|_, ()| Ok(hook::current_run_stopped()))?,
    )?;
    for (name, f) in [
        ("create_thread", hook::new_coroutine as ffi::lua_CFunction),
        ("resume", hook::relay_resume),
        ("is_c_function", hook::is_c_function),
    ] {
        // SAFETY: `exec_raw` runs the closure protected on the
        // interpreter's state; it pushes one C function, the value
        // returned.
        let f: Function = unsafe { lua.exec_raw((), |state| ffi::lua_pushcfunction(state, f)) }?;
        hidden.raw_set(name, f)?;
    }
    // SAFETY: `exec_raw` hands the closure the interpreter's main state.
    unsafe { lua.exec_raw::<()>((), |state| hook::install(state)) }
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
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(mlua::Error::RuntimeError(
                    "wrong number of arguments".into(),
                ));
            }
            // As Redis's lua_tolstring: numbers as Lua prints them, any
            // other non-string as nothing.
            let text = match &args[0] {
                Value::String(s) => s.as_bytes().to_vec(),
                v @ (Value::Integer(_) | Value::Number(_)) => lua
                    .coerce_string(v.clone())?
                    .map(|s| s.as_bytes().to_vec())
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            Ok(super::sha1_hex(&text))
        })?,
    )?;
    // Logging goes nowhere: a replica's log is not the place for a
    // client's script output, and the state machine does no I/O.
    redis.raw_set("log", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    redis.raw_set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    redis.raw_set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    // Raft replicates the script itself: these are checked as Redis
    // checks them and change nothing.
    redis.raw_set(
        "set_repl",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(mlua::Error::external(CallError(
                    "ERR redis.set_repl() requires two arguments.".into(),
                )));
            }
            let flags = args.into_iter().next().unwrap_or(Value::Nil);
            // lua_tonumber: a number, or a string read as one, else 0.
            let flags = lua.coerce_number(flags)?.unwrap_or(0.0) as i64;
            // Redis's PROPAGATE_AOF | PROPAGATE_REPL.
            if flags & !3 != 0 {
                return Err(mlua::Error::external(CallError(
                    "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.".into(),
                )));
            }
            Ok(())
        })?,
    )?;
    redis.raw_set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
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

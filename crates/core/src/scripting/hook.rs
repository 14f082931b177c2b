//! The instruction-count hook of every Lua thread of an interpreter: it
//! stops a run past `script-max-instructions` or after SCRIPT KILL, and
//! pauses a run that may pause (a standalone server's, past
//! `busy-reply-threshold`) so that the server can answer other clients
//! `-BUSY` meanwhile, as Redis does from its own hook.
//!
//! A pause is a yield of the coroutine the run executes in, taken only
//! where Lua 5.1 allows one (not inside a C call such as `pcall`,
//! `table.sort` or a metamethod); the run is resumed later from where it
//! stopped. Runs under Raft never pause: replicas must run a script
//! through without outside influence, so they stop by instruction count.

use mlua::ffi;
use std::cell::{Cell, RefCell};
use std::os::raw::c_int;
use std::time::Instant;

/// How often (in Lua instructions) the hook runs.
pub const HOOK_EVERY: c_int = 10_000;

/// The error of a script stopped by `script-max-instructions`.
pub const STEP_LIMIT_ERROR: &str =
    "Script killed: it ran more Lua instructions than script-max-instructions allows";

/// The chunk names of EVAL scripts and of FUNCTION libraries, whose
/// frames give an error's line.
pub const SCRIPT_SOURCE: &str = "@user_script";
pub const FUNCTION_SOURCE: &str = "@user_function";
pub const SOURCES: &[&str] = &[SCRIPT_SOURCE, FUNCTION_SOURCE];

/// The error of a script stopped by SCRIPT KILL or FUNCTION KILL (Redis's
/// text for both).
pub const KILLED_ERROR: &str = "Script killed by user with SCRIPT KILL...";

/// What the hook reads and writes while Lua runs for one run (or one
/// library load): reached through [`HOOK`], which [`HookGuard`] sets only
/// for that time.
#[derive(Default)]
pub struct HookState {
    /// Hook calls counted against `limit`: since the run started or, for a
    /// run that may pause, since the last point where it could have
    /// paused (so only stretches that cannot pause are limited).
    steps: Cell<u64>,
    limit: Cell<u64>,
    /// Once set, the run stops with this error at every hook call.
    stop: Cell<Option<&'static str>>,
    /// The coroutine of a run that may pause (0: the run never pauses),
    /// and when it pauses next.
    run_thread: Cell<usize>,
    pause_at: Cell<Option<Instant>>,
    /// The hook yielded (a script's own `coroutine.yield` outside any
    /// coroutine of its own also ends a resume with a yield).
    paused: Cell<bool>,
    /// The script line the run last paused at (read in the hook: once
    /// yielded, Lua 5.1 reports the instruction before the current one).
    paused_line: Cell<Option<i64>>,
    /// The coroutines [`relay_resume`] is running now, innermost last,
    /// each with whether every coroutine from the run's own down to it
    /// could yield when it was resumed (only then may the hook pause it).
    relays: RefCell<Vec<(usize, bool)>>,
}

impl HookState {
    /// Prepares a run: at most `limit_instructions` where it cannot pause;
    /// `pausable` (its coroutine, and when to pause first) for a run that
    /// may pause.
    pub fn start(&self, limit_instructions: u64, pausable: Option<(*mut ffi::lua_State, Instant)>) {
        self.steps.set(0);
        self.limit
            .set((limit_instructions / HOOK_EVERY as u64).max(1));
        self.stop.set(None);
        self.paused.set(false);
        self.relays.borrow_mut().clear();
        match pausable {
            Some((thread, at)) => {
                self.run_thread.set(thread as usize);
                self.pause_at.set(Some(at));
            }
            None => {
                self.run_thread.set(0);
                self.pause_at.set(None);
            }
        }
    }

    /// The next pause of a resumed run.
    pub fn pause_next_at(&self, at: Instant) {
        self.pause_at.set(Some(at));
    }

    /// The script line where the run last paused.
    pub fn paused_line(&self) -> Option<i64> {
        self.paused_line.get()
    }

    /// The error the run was stopped with, if it was.
    pub fn stopped(&self) -> Option<&'static str> {
        self.stop.get()
    }

    /// Whether `state`, the run's coroutine or one a relay resumed from
    /// it, may yield now along with every coroutine between it and the
    /// run's (so a pause can travel up to the server).
    fn chain_can_yield(&self, state: *mut ffi::lua_State) -> bool {
        let chain = if self.run_thread.get() == state as usize {
            true
        } else {
            matches!(self.relays.borrow().last(), Some(&(t, ok)) if t == state as usize && ok)
        };
        chain && can_yield(state)
    }

    fn on_step(&self, state: *mut ffi::lua_State) -> Step {
        if let Some(text) = self.stop.get() {
            return Step::Stop(text);
        }
        if self.run_thread.get() != 0 && self.chain_can_yield(state) {
            self.steps.set(0);
            if self.pause_at.get().is_some_and(|at| Instant::now() >= at) {
                self.paused.set(true);
                // SAFETY: `state` is the thread the hook runs on.
                self.paused_line.set(unsafe { script_line(state, SOURCES) });
                return Step::Pause;
            }
            return Step::Continue;
        }
        let steps = self.steps.get() + 1;
        self.steps.set(steps);
        if steps >= self.limit.get() {
            self.stop.set(Some(STEP_LIMIT_ERROR));
            return Step::Stop(STEP_LIMIT_ERROR);
        }
        Step::Continue
    }
}

enum Step {
    Continue,
    Pause,
    Stop(&'static str),
}

thread_local! {
    /// The hook state of the run executing on this thread, null between
    /// runs. Each interpreter runs on one thread at a time (it is taken
    /// out of its shard for the run).
    static HOOK: Cell<*const HookState> = const { Cell::new(std::ptr::null()) };
}

/// Makes `state` the one the hook reads until dropped (which restores the
/// previous one, also on unwind).
pub struct HookGuard {
    previous: *const HookState,
}

impl HookGuard {
    pub fn set(state: &HookState) -> HookGuard {
        let previous = HOOK.with(|h| h.replace(state));
        HookGuard { previous }
    }
}

impl Drop for HookGuard {
    fn drop(&mut self) {
        HOOK.with(|h| h.set(self.previous));
    }
}

/// Whether the hook paused the run executing now (and forgets it): a
/// resume that ended in a yield the hook did not make was the script's own
/// `coroutine.yield` outside a coroutine.
pub fn take_pause() -> bool {
    with_current(|st| st.paused.replace(false)).unwrap_or(false)
}

/// Whether the run executing now was stopped (the prelude's `pcall` then
/// raises the error again instead of returning it to the script).
pub fn current_run_stopped() -> bool {
    with_current(|st| st.stop.get().is_some()).unwrap_or(false)
}

fn with_current<R>(f: impl FnOnce(&HookState) -> R) -> Option<R> {
    HOOK.with(|h| {
        let p = h.get();
        // SAFETY: a non-null pointer was set by `HookGuard::set` from a
        // live reference and is replaced when the guard drops, before the
        // reference can end; it is only read on this thread.
        (!p.is_null()).then(|| f(unsafe { &*p }))
    })
}

/// Installs the hook on `state` (a thread or the main state), which also
/// restarts its instruction countdown: without the restart a run's first
/// hook call would depend on what earlier runs left over, which differs
/// between a replica that ran them and one restarted from a snapshot.
///
/// # Safety
/// `state` must be a live Lua state of this interpreter.
pub unsafe fn install(state: *mut ffi::lua_State) {
    unsafe {
        ffi::lua_sethook(state, Some(step_hook), ffi::LUA_MASKCOUNT, HOOK_EVERY);
    }
}

unsafe extern "C-unwind" fn step_hook(state: *mut ffi::lua_State, _ar: *mut ffi::lua_Debug) {
    let step = with_current(|st| st.on_step(state)).unwrap_or(Step::Continue);
    // SAFETY: Lua calls the hook on `state`, which may yield from a count
    // hook when `can_yield` said so (Lua 5.1's manual, lua_Hook) or raise
    // an error; the longjmp of lua_error crosses only this frame, which
    // holds nothing to drop.
    unsafe {
        match step {
            Step::Continue => {}
            Step::Pause => {
                ffi::lua_yield(state, 0);
            }
            Step::Stop(text) => {
                ffi::lua_pushlstring(state, text.as_ptr().cast(), text.len());
                ffi::lua_error(state);
            }
        }
    }
}

extern "C-unwind" {
    /// Lua 5.1's (lapi.c; mlua does not bind it): gives `to` the C-call
    /// depth of `from`, as `coroutine.resume` does before resuming, so the
    /// depth limit ("C stack overflow") covers nested coroutines.
    fn lua_setlevel(from: *mut ffi::lua_State, to: *mut ffi::lua_State);
}

/// `hidden.resume(co, ...)`, through which the prelude's `pcall`, `xpcall`
/// and `coroutine.resume`/`wrap` run a coroutine: as Lua 5.1's
/// `coroutine.resume`, but returning `true, results...`, `false, error`
/// or `"yield", values...` (the coroutine yielded). When the step hook
/// paused the run inside the coroutine, it yields its own caller's
/// coroutine too and, once resumed, returns nothing: the prelude then
/// calls it again to go on. A script's `pcall` thereby runs its function
/// in a coroutine instead of a C call, so that a run can pause (and be
/// killed) inside it, as Redis's can.
///
/// # Safety
/// Called by Lua as a C function.
pub unsafe extern "C-unwind" fn relay_resume(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua calls this with its arguments on `state`'s stack; every
    // stack access below is checked for room first. Errors are raised
    // with lua_error (a longjmp) only while this frame holds nothing to
    // drop.
    unsafe {
        let co = ffi::lua_tothread(state, 1);
        if co.is_null() {
            ffi::lua_pushstring(
                state,
                c"bad argument #1 to 'resume' (coroutine expected)".as_ptr(),
            );
            ffi::lua_error(state);
        }
        let nargs = ffi::lua_gettop(state) - 1;
        if ffi::lua_checkstack(co, nargs) == 0 {
            ffi::lua_pushstring(state, c"too many arguments to resume".as_ptr());
            ffi::lua_error(state);
        }
        if let Some(status) = not_suspended(state, co) {
            ffi::lua_pushboolean(state, 0);
            ffi::lua_pushstring(state, status.as_ptr());
            return 2;
        }
        ffi::lua_xmove(state, co, nargs);
        let pushed = with_current(|st| {
            let ok = st.run_thread.get() != 0 && st.chain_can_yield(state);
            st.relays.borrow_mut().push((co as usize, ok));
        })
        .is_some();
        lua_setlevel(state, co);
        // The instruction count runs on through the coroutine and back:
        // each thread has a countdown of its own, and a fresh one would
        // let short coroutines (one per pcall) run uncounted.
        set_hook_countdown(co, hook_countdown(state));
        let status = ffi::lua_resume_(co, nargs);
        set_hook_countdown(state, hook_countdown(co));
        if pushed {
            with_current(|st| st.relays.borrow_mut().pop());
        }
        match status {
            ffi::LUA_YIELD if with_current(|st| st.paused.get()).unwrap_or(false) => {
                // The hook paused the run inside `co`: pass the pause up.
                ffi::lua_yield(state, 0)
            }
            ffi::LUA_OK | ffi::LUA_YIELD => {
                let nres = ffi::lua_gettop(co);
                if ffi::lua_checkstack(state, nres + 1) == 0 {
                    ffi::lua_pushstring(state, c"too many results to resume".as_ptr());
                    ffi::lua_error(state);
                }
                if status == ffi::LUA_OK {
                    ffi::lua_pushboolean(state, 1);
                } else {
                    ffi::lua_pushstring(state, c"yield".as_ptr());
                }
                ffi::lua_xmove(co, state, nres);
                nres + 1
            }
            _ => {
                ffi::lua_pushboolean(state, 0);
                ffi::lua_xmove(co, state, 1);
                2
            }
        }
    }
}

/// `hidden.new_coroutine(f)`: a coroutine running `f`, with the step hook
/// (Lua 5.1 copies a hook from the creating thread only, and the script's
/// coroutines must count and pause too). A C function, as every `pcall`
/// of a script makes one.
///
/// # Safety
/// Called by Lua as a C function.
pub unsafe extern "C-unwind" fn new_coroutine(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua calls this with its arguments on `state`'s stack and
    // room for LUA_MINSTACK more; lua_newthread pushes the coroutine,
    // the function is copied onto it.
    unsafe {
        if ffi::lua_type(state, 1) != ffi::LUA_TFUNCTION {
            ffi::lua_pushstring(
                state,
                c"bad argument #1 to 'create' (function expected)".as_ptr(),
            );
            ffi::lua_error(state);
        }
        let co = ffi::lua_newthread(state);
        install(co);
        ffi::lua_pushvalue(state, 1);
        ffi::lua_xmove(state, co, 1);
        1
    }
}

/// `hidden.is_c_function(f)`: such a function cannot be paused inside, so
/// `pcall` calls it directly instead of in a coroutine.
///
/// # Safety
/// Called by Lua as a C function.
pub unsafe extern "C-unwind" fn is_c_function(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: reads argument 1 and pushes one boolean.
    unsafe {
        ffi::lua_pushboolean(state, ffi::lua_iscfunction(state, 1));
        1
    }
}

/// Lua 5.1's `cannot resume ... coroutine` message for a coroutine that is
/// not suspended (lbaselib.c's costatus), or None.
///
/// # Safety
/// `state` and `co` must be live threads of one interpreter.
unsafe fn not_suspended(
    state: *mut ffi::lua_State,
    co: *mut ffi::lua_State,
) -> Option<&'static std::ffi::CStr> {
    if state == co {
        return Some(c"cannot resume running coroutine");
    }
    // SAFETY: status queries on a live thread.
    unsafe {
        match ffi::lua_status(co) {
            ffi::LUA_YIELD => None,
            ffi::LUA_OK => {
                let mut ar: ffi::lua_Debug = std::mem::zeroed();
                if ffi::lua_getstack(co, 0, &mut ar) > 0 {
                    Some(c"cannot resume normal coroutine")
                } else if ffi::lua_gettop(co) == 0 {
                    Some(c"cannot resume dead coroutine")
                } else {
                    None
                }
            }
            _ => Some(c"cannot resume dead coroutine"),
        }
    }
}

/// The first fields of Lua 5.1.5's `struct lua_State` (lstate.h), up to
/// the hook's countdown: the two C-call counters `lua_yield` compares (it
/// raises "attempt to yield across metamethod/C-call boundary" when
/// `nCcalls > baseCcalls`), and the instructions left before the next
/// count hook call, which Lua keeps per thread and the C API does not
/// expose.
/// The interpreter is the vendored 5.1.5 (`mlua`'s `lua51` + `vendored`),
/// so the layout is fixed; the tests in `vm.rs` pause runs at top level
/// and check that none pauses inside `pcall`, which fails if it changed.
#[repr(C)]
struct LuaStateHead {
    next: *mut std::ffi::c_void,
    tt: u8,
    marked: u8,
    status: u8,
    top: *mut std::ffi::c_void,
    base: *mut std::ffi::c_void,
    l_g: *mut std::ffi::c_void,
    ci: *mut std::ffi::c_void,
    savedpc: *const std::ffi::c_void,
    stack_last: *mut std::ffi::c_void,
    stack: *mut std::ffi::c_void,
    end_ci: *mut std::ffi::c_void,
    base_ci: *mut std::ffi::c_void,
    stacksize: c_int,
    size_ci: c_int,
    n_c_calls: u16,
    base_c_calls: u16,
    hookmask: u8,
    allowhook: u8,
    basehookcount: c_int,
    /// Instructions left before the next count hook call.
    hookcount: c_int,
}

/// Whether `state` may yield now: no C call (pcall, a metamethod, a
/// sort comparator...) between the running code and its coroutine's
/// resume.
fn can_yield(state: *mut ffi::lua_State) -> bool {
    // SAFETY: `state` is the live thread Lua called the hook on; see
    // `LuaStateHead` for the layout.
    let head = unsafe { &*(state as *const LuaStateHead) };
    head.n_c_calls == head.base_c_calls
}

/// Instructions `state` runs before its next count hook call.
///
/// # Safety
/// `state` must be a live thread; see `LuaStateHead`.
unsafe fn hook_countdown(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: as in `can_yield`.
    unsafe { (*(state as *const LuaStateHead)).hookcount }
}

/// Sets the instructions `state` runs before its next count hook call
/// (at least 1).
///
/// # Safety
/// `state` must be a live thread of the interpreter running on this
/// thread; see `LuaStateHead`.
unsafe fn set_hook_countdown(state: *mut ffi::lua_State, count: c_int) {
    // SAFETY: writes one int field, which Lua reads before its next
    // instruction on that thread; the interpreter is used by this OS
    // thread only.
    unsafe { (*(state as *mut LuaStateHead)).hookcount = count.max(1) }
}

/// The current line of the innermost frame of `source` on `thread`'s
/// stack (after an error Lua 5.1 leaves a coroutine's frames in place).
///
/// # Safety
/// `thread` must be a live Lua state not running now.
pub unsafe fn script_line(thread: *mut ffi::lua_State, sources: &[&str]) -> Option<i64> {
    for level in 0..32 {
        // SAFETY: lua_getstack fills `ar` for an existing level;
        // lua_getinfo then sets `source` to a NUL-terminated string Lua
        // keeps alive while the function is on the stack.
        unsafe {
            let mut ar: ffi::lua_Debug = std::mem::zeroed();
            if ffi::lua_getstack(thread, level, &mut ar) == 0 {
                return None;
            }
            if ffi::lua_getinfo(thread, c"Sl".as_ptr(), &mut ar) == 0 || ar.source.is_null() {
                continue;
            }
            let source = std::ffi::CStr::from_ptr(ar.source).to_bytes();
            if sources.iter().any(|s| s.as_bytes() == source) && ar.currentline > 0 {
                return Some(ar.currentline as i64);
            }
        }
    }
    None
}

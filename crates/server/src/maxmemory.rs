//! `maxmemory` under the `noeviction` policy (the one Kvasir implements):
//! while the allocator's used memory is above `maxmemory`, commands that
//! may grow the dataset (DENYOOM in the command table) are refused with
//! Redis's OOM error, so is queuing any command in MULTI (which aborts the
//! transaction), and an EXEC whose queue holds a DENYOOM one is refused; reads, deletions and everything else go
//! on. The decision is made when the node admits a command, never when an
//! entry applies, so every replica still applies every entry alike.

use kvasir_core::table::Flags;
use kvasir_core::CommandSpec;
use std::cell::Cell;
use std::time::{Duration, Instant};

/// Redis's reply to a command refused for memory.
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// How often the used-memory reading is refreshed: jemalloc's statistics
/// cost more to refresh than a command to run.
const REFRESH: Duration = Duration::from_millis(1);

/// The node's used memory as last read, for the admission check.
#[derive(Default)]
pub struct MemoryGuard {
    read_at: Cell<Option<Instant>>,
    used: Cell<u64>,
}

impl MemoryGuard {
    /// Whether used memory is above `maxmemory` (0: no limit).
    pub fn over(&self, maxmemory: u64) -> bool {
        if maxmemory == 0 {
            return false;
        }
        let now = Instant::now();
        if self
            .read_at
            .get()
            .is_none_or(|at| now.duration_since(at) >= REFRESH)
        {
            self.used.set(crate::info::used_memory());
            self.read_at.set(Some(now));
        }
        self.used.get() > maxmemory
    }
}

impl crate::Server {
    /// Whether `spec` must be refused now for lack of memory.
    pub fn refuses_for_memory(&self, spec: &CommandSpec) -> bool {
        spec.flags.contains(Flags::DENYOOM) && self.over_maxmemory()
    }

    /// Whether used memory is above `maxmemory`: then Redis refuses to
    /// queue any command in MULTI (the queue itself takes memory).
    pub fn over_maxmemory(&self) -> bool {
        self.memory_guard.over(self.config.borrow().maxmemory)
    }
}

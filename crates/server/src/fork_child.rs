//! Work in a forked child process, as redis-server does its background
//! saves: the child sees the parent's memory as it was at the fork (the
//! kernel copies a page only when the parent writes it), so a snapshot of
//! any size is a point in time while the data thread goes on serving.
//!
//! The child runs one closure and leaves with `_exit`: it never returns
//! into the parent's code, runs no destructors and touches nothing shared
//! with the parent's other threads (no runtime, no logging: a lock another
//! thread held at the fork stays held in the child). It closes every
//! inherited descriptor first, so a client connection the parent closes
//! really closes, and a listener the parent drops is not kept bound.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters the child updates and the parent reads while it runs (one
/// shared anonymous page, mapped before the fork).
pub struct Progress {
    page: *mut libc::c_void,
}

const PAGE: usize = 4096;

impl Progress {
    pub fn new() -> io::Result<Progress> {
        // SAFETY: an anonymous shared mapping of one page, no file behind.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if page == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Progress { page })
    }

    fn counter(&self, i: usize) -> &AtomicU64 {
        // SAFETY: the page is mapped for this value's life, zeroed by the
        // kernel, page-aligned, and only ever accessed as atomics.
        unsafe { &*(self.page as *const AtomicU64).add(i) }
    }

    /// Items (keys) done so far.
    pub fn done(&self) -> u64 {
        self.counter(0).load(Ordering::Relaxed)
    }

    /// Items in all (0 until the child knows).
    pub fn total(&self) -> u64 {
        self.counter(1).load(Ordering::Relaxed)
    }

    pub fn set_total(&self, n: u64) {
        self.counter(1).store(n, Ordering::Relaxed);
    }

    pub fn add_done(&self) {
        self.counter(0).fetch_add(1, Ordering::Relaxed);
    }

    /// The child's copy-on-write memory as it measured it (Redis's
    /// private dirty pages of the child), at `at_ms` (unix ms).
    pub fn report_cow(&self, bytes: u64, at_ms: u64) {
        self.counter(2).store(bytes, Ordering::Relaxed);
        self.counter(3).store(at_ms, Ordering::Relaxed);
        self.counter(4).fetch_max(bytes, Ordering::Relaxed);
    }

    /// The last copy-on-write reading, when it was taken (unix ms, 0:
    /// none yet) and the largest so far.
    pub fn cow(&self) -> Cow {
        Cow {
            current: self.counter(2).load(Ordering::Relaxed),
            updated_ms: self.counter(3).load(Ordering::Relaxed),
            peak: self.counter(4).load(Ordering::Relaxed),
        }
    }
}

/// A child's copy-on-write readings ([`Progress::cow`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cow {
    pub current: u64,
    pub updated_ms: u64,
    pub peak: u64,
}

/// This process's private dirty memory in bytes (from
/// /proc/self/smaps_rollup; 0 where it cannot be read): in a forked child,
/// the pages the parent changed since the fork, which the kernel had to
/// copy, as Redis's zmalloc_get_private_dirty measures them.
pub fn private_dirty() -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/self/smaps_rollup") else {
        return 0;
    };
    text.lines()
        .filter_map(|l| l.strip_prefix("Private_Dirty:"))
        .filter_map(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .sum::<u64>()
        * 1024
}

impl Drop for Progress {
    fn drop(&mut self) {
        // SAFETY: mapped in `new`, unmapped once.
        unsafe {
            libc::munmap(self.page, PAGE);
        }
    }
}

/// Forks; the child runs `work` and exits with 0 if it returned true, 1
/// otherwise (or if it panicked). Returns the child's pid to the parent.
pub fn spawn(work: impl FnOnce() -> bool) -> io::Result<libc::pid_t> {
    // SAFETY: the child only runs `work` (which must not wait on a lock
    // of another thread) and leaves with _exit.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            prepare_child();
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or(false);
            // SAFETY: ends the child without running the parent's exit code.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) }
        }
        pid => Ok(pid),
    }
}

/// In the child: default signal actions (the parent's handlers write to a
/// pipe its runtime reads, which the child has not got), a silent panic
/// hook, and no inherited descriptors but stdin/out/err.
fn prepare_child() {
    for signal in [
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
    ] {
        // SAFETY: resetting a disposition is async-signal-safe.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
        }
    }
    std::panic::set_hook(Box::new(|_| {}));
    crate::oom_score::set_in_child();
    // SAFETY: plain system calls on descriptor numbers.
    let closed = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    if closed != 0 {
        for fd in 3..1024 {
            // SAFETY: closing a number that may not be open is harmless.
            unsafe {
                libc::close(fd);
            }
        }
    }
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

/// Waits for the child `pid` (on a blocking thread: the caller's loop
/// goes on).
pub async fn wait(pid: libc::pid_t) -> Exit {
    let waited = tokio::task::spawn_blocking(move || loop {
        let mut status = 0;
        // SAFETY: waits for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            if libc::WIFSIGNALED(status) {
                return Exit::Signal(libc::WTERMSIG(status));
            }
            return Exit::Code(libc::WEXITSTATUS(status));
        }
        if r == -1 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return Exit::Code(-1);
        }
    })
    .await;
    waited.unwrap_or(Exit::Code(-1))
}

/// Stops the child (SIGUSR1, as Redis stops its save child) and waits
/// until it is gone, so that nothing it was about to rename into place
/// can replace a file the caller writes next. (A [`wait`] already
/// running for it then returns `Code(-1)`.)
pub fn stop(pid: libc::pid_t) {
    // SAFETY: signals and reaps our own child.
    unsafe {
        libc::kill(pid, libc::SIGUSR1);
        let mut status = 0;
        while libc::waitpid(pid, &mut status, 0) == -1
            && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
        {}
    }
}

//! redis-server's process conventions: `daemonize yes` (the server goes to
//! the background and the command returns) and `pidfile`.

use std::io;

/// Forks into the background as redis-server: the parent exits at once
/// with 0, the child leaves the terminal's session and reads and writes
/// /dev/null (the log goes to `logfile`, or nowhere). Must run before any
/// thread is started.
pub fn daemonize() -> io::Result<()> {
    // SAFETY: called while the process has one thread.
    match unsafe { libc::fork() } {
        -1 => return Err(io::Error::last_os_error()),
        0 => {}
        _ => std::process::exit(0),
    }
    // SAFETY: plain system calls on this process and descriptor numbers.
    unsafe {
        libc::setsid();
    }
    let null = std::fs::File::options()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    use std::os::fd::AsRawFd;
    for fd in 0..=2 {
        // SAFETY: replaces a standard descriptor with /dev/null.
        if unsafe { libc::dup2(null.as_raw_fd(), fd) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The pid file while the server runs: written at start, removed when
/// it exits (as redis-server, a file that cannot be written is logged and
/// the server starts anyway).
pub struct PidFile(Option<String>);

impl PidFile {
    pub fn create(path: &str) -> PidFile {
        if path.is_empty() {
            return PidFile(None);
        }
        match std::fs::write(path, format!("{}\n", std::process::id())) {
            Ok(()) => PidFile(Some(path.to_string())),
            Err(e) => {
                tracing::warn!("Failed to write PID file: {}", crate::logging::os_text(&e));
                PidFile(None)
            }
        }
    }
}

impl PidFile {
    /// At a clean shutdown: removed, and logged as redis-server logs it.
    pub fn remove(mut self) {
        if let Some(path) = self.0.take() {
            tracing::info!("Removing the pid file.");
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for PidFile {
    /// A failed start or a fatal error: removed without a line, so the
    /// log ends with the reason (tools read its last line).
    fn drop(&mut self) {
        if let Some(path) = &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

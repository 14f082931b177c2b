//! The data loaded at start while clients connect, as redis-server does
//! it: the listeners are open during the load, the load runs in steps of
//! `loading-process-events-interval-bytes` with the event loop serving
//! connections between them, and commands without the `loading` flag are
//! answered `-LOADING` (INFO, CONFIG GET, CLIENT, SHUTDOWN... are served).
//! Clients and tools see a server that is starting instead of a refused
//! connection, and INFO's `loading:1` with the progress.

use crate::listener::Server;
use kvasir_core::rdb_file::{Existing, Loaded, RdbLoad};
use kvasir_core::table::{CommandSpec, Flags};
use std::cell::Cell;

/// Redis's reply to a command refused while the data loads.
pub const LOADING_ERROR: &str = "LOADING Redis is loading the dataset in memory";

/// Parameters CONFIG SET refuses to change during a load (Redis's
/// DENY_LOADING_CONFIG: they would move or re-read what is being loaded).
pub const DENIED_CONFIGS: &[&str] = &["dir", "appendonly", "repl-diskless-load"];

/// Whether a load runs, and how far it is (INFO persistence).
#[derive(Default)]
pub struct LoadingState {
    active: Cell<bool>,
    start_time: Cell<u64>,
    total_bytes: Cell<u64>,
    loaded_bytes: Cell<u64>,
}

impl LoadingState {
    pub fn active(&self) -> bool {
        self.active.get()
    }

    /// The start's load begins (`loading:1`).
    pub fn begin(&self) {
        self.active.set(true);
        self.start_time.set(crate::local_store::unix_ms() / 1000);
        self.total_bytes.set(0);
        self.loaded_bytes.set(0);
    }

    /// Bytes of the file read so far.
    pub fn read_up_to(&self, bytes: u64) {
        self.loaded_bytes.set(bytes);
    }

    pub fn end(&self) {
        self.active.set(false);
    }

    /// A file of `total` bytes starts loading.
    pub fn file(&self, total: u64) {
        self.total_bytes.set(total);
        self.loaded_bytes.set(0);
    }

    /// A file's bytes, read on a blocking thread: the event loop answers
    /// clients while a large file comes from the disk. Its size is the
    /// load's total from before the read, as Redis's startLoadingFile
    /// takes it, so INFO never shows a load of 0 bytes.
    pub async fn read_file(&self, path: &std::path::Path) -> std::io::Result<Vec<u8>> {
        if let Ok(meta) = std::fs::metadata(path) {
            self.file(meta.len());
        }
        let owned = path.to_path_buf();
        tokio::task::spawn_blocking(move || std::fs::read(owned))
            .await
            .map_err(std::io::Error::other)?
    }

    /// INFO persistence's loading fields after `loading:`, with Redis's
    /// estimate of the time left (from the bytes per second so far).
    pub fn info_fields(&self) -> String {
        if !self.active() {
            return String::new();
        }
        let (total, loaded) = (self.total_bytes.get(), self.loaded_bytes.get());
        let perc = if total == 0 {
            0.0
        } else {
            loaded as f64 * 100.0 / total as f64
        };
        let remaining = total.saturating_sub(loaded).max(1);
        let elapsed = (crate::local_store::unix_ms() / 1000).saturating_sub(self.start_time.get());
        let eta = if elapsed == 0 {
            1
        } else {
            elapsed.saturating_mul(remaining) / (loaded + 1)
        };
        format!(
            "loading_start_time:{}\r\nloading_total_bytes:{total}\r\nloading_rdb_used_mem:0\r\nloading_loaded_bytes:{loaded}\r\nloading_loaded_perc:{perc:.2}\r\nloading_eta_seconds:{eta}\r\n",
            self.start_time.get()
        )
    }
}

/// Whether `spec` is refused while the data loads (Redis: every command
/// without the `loading` flag).
pub fn refuses(server: &Server, spec: &CommandSpec) -> bool {
    server.loading.active() && !spec.flags.contains(Flags::LOADING)
}

/// Loads the RDB image `bytes` starts with into the standalone store, in
/// steps between which the server answers its clients. `key-load-delay`
/// (a hidden parameter for tests, as Redis's) makes every key wait.
pub async fn load_rdb(
    server: &Server,
    bytes: &[u8],
    now_ms: u64,
    merging: Option<Existing>,
) -> Result<Loaded, String> {
    server.loading.file(bytes.len() as u64);
    let mut load = server
        .local_store
        .borrow_mut()
        .with_store(|store| RdbLoad::start(bytes, store, now_ms, merging))?;
    let mut keys = 0u64;
    loop {
        let (interval, delay) = pacing(server);
        let step = server.local_store.borrow_mut().with_store(|store| {
            load.step(store, interval, &mut || {
                keys += 1;
                crate::persistence::delay_after_key(delay, keys);
            })
        })?;
        server.loading.read_up_to(load.position() as u64);
        if let Some(loaded) = step {
            return Ok(loaded);
        }
        // The store is not borrowed here: the sessions' turn.
        clients_turn().await;
    }
}

/// How a load is paced: bytes read between two turns of the event loop
/// (`loading-process-events-interval-bytes`, at least 1024 as in Redis)
/// and `key-load-delay` (microseconds after each key or command; a
/// negative -N: 1 microsecond every N).
pub fn pacing(server: &Server) -> (usize, i64) {
    use crate::persistence::stored_number;
    (
        stored_number(server, "loading-process-events-interval-bytes").max(1024) as usize,
        stored_number(server, "key-load-delay"),
    )
}

/// Lets the event loop serve the connections between two steps of a load:
/// the first yield has the runtime poll the sockets (the sessions with
/// something to read are woken), the second lets those sessions run
/// before the next step.
pub async fn clients_turn() {
    tokio::task::yield_now().await;
    tokio::task::yield_now().await;
}

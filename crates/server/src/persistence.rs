//! RDB snapshots of the standalone server, as redis-server keeps them: SAVE
//! writes `dbfilename` (dump.rdb) in `dir` at once, BGSAVE forks a child
//! that writes the data as it was at the fork while the server goes on
//! ([`crate::fork_child`]), SHUTDOWN SAVE saves before exiting, and a
//! server starts from the file if there is one. Files go to a temporary
//! name (`temp-<pid>.rdb`, the saving process's pid, as Redis names it),
//! fsync, then rename, so a crash leaves the old file or the new one.
//!
//! In cluster mode every write is in the Raft log and snapshots already:
//! these commands answer an error there, and the file is not read.

use crate::fork_child::{self, Exit, Progress};
use crate::listener::Server;
use std::cell::{Cell, RefCell};
use std::io::Write;
use std::path::{Path, PathBuf};
use tracing::{info, warn};

/// The state INFO persistence and LASTSAVE report.
pub struct SaveState {
    /// Unix seconds of the last successful save (the start until then).
    pub last_save: Cell<u64>,
    pub bgsave_in_progress: Cell<bool>,
    pub last_bgsave_ok: Cell<bool>,
    /// Append-only file rewrites that succeeded (INFO aof_rewrites).
    pub aof_rewrites: Cell<u64>,
    /// How the last rewrite ended, the failures in a row since the last
    /// success, the seconds it took (-1: none yet), and the wait of the
    /// automatic ones after repeated failures: (minutes, not before).
    pub aof_last_rewrite_ok: Cell<bool>,
    pub aof_rewrite_failures: Cell<u64>,
    pub aof_last_rewrite_secs: Cell<i64>,
    pub aof_rewrite_retry: Cell<(u64, u64)>,
    /// The BGSAVE child process running now (standalone).
    pub child: RefCell<Option<SaveChild>>,
    /// Children forked (INFO total_forks) and the last fork's time.
    pub total_forks: Cell<u64>,
    pub latest_fork_usec: Cell<u64>,
    /// Seconds the last background save took (-1: none yet).
    pub last_bgsave_secs: Cell<i64>,
    /// Saves that succeeded, foreground and background (INFO rdb_saves).
    pub saves: Cell<u64>,
    /// Keys loaded and keys found expired by the last load of the file.
    pub last_load: Cell<(u64, u64)>,
    /// Copy-on-write bytes of the last BGSAVE's and rewrite's child.
    pub rdb_last_cow: Cell<u64>,
    pub aof_last_cow: Cell<u64>,
    /// BGSAVE SCHEDULE and BGREWRITEAOF waiting for the other's child.
    pub bgsave_scheduled: Cell<bool>,
    pub aof_rewrite_scheduled: Cell<bool>,
    /// Children writing SYNC's image (redis-cli --rdb), stopped at
    /// shutdown.
    pub sync_children: RefCell<Vec<libc::pid_t>>,
}

/// What a child process writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildKind {
    /// BGSAVE's snapshot file.
    Rdb,
    /// The base of an append-only file rewrite.
    Aof,
}

/// The background save's or rewrite's child process (one at a time, as in
/// Redis).
pub struct SaveChild {
    pub pid: libc::pid_t,
    pub kind: ChildKind,
    /// The file it writes before renaming it into place.
    temp_file: PathBuf,
    pub started: std::time::Instant,
    /// Keys written so far and in all, counted by the child.
    pub progress: Progress,
}

impl SaveState {
    pub fn new(now_secs: u64) -> SaveState {
        SaveState {
            last_save: Cell::new(now_secs),
            bgsave_in_progress: Cell::new(false),
            last_bgsave_ok: Cell::new(true),
            aof_rewrites: Cell::new(0),
            aof_last_rewrite_ok: Cell::new(true),
            aof_rewrite_failures: Cell::new(0),
            aof_last_rewrite_secs: Cell::new(-1),
            aof_rewrite_retry: Cell::new((0, 0)),
            child: RefCell::new(None),
            total_forks: Cell::new(0),
            latest_fork_usec: Cell::new(0),
            last_bgsave_secs: Cell::new(-1),
            saves: Cell::new(0),
            last_load: Cell::new((0, 0)),
            rdb_last_cow: Cell::new(0),
            aof_last_cow: Cell::new(0),
            bgsave_scheduled: Cell::new(false),
            aof_rewrite_scheduled: Cell::new(false),
            sync_children: RefCell::new(Vec::new()),
        }
    }
}

/// The snapshot file: `dbfilename`, relative to `dir` (the working folder).
fn rdb_path(server: &Server) -> PathBuf {
    let config = server.config.borrow();
    PathBuf::from(config.stored.get("dbfilename").unwrap_or("dump.rdb"))
}

/// Which access stamps the file records: idle times under an LRU policy,
/// frequencies under an LFU one.
fn access_record(server: &Server) -> kvasir_core::rdb_file::AccessRecord {
    let (policy, _, _) = crate::maxmemory::eviction_settings(&server.config.borrow());
    match policy {
        kvasir_core::evict::Policy::AllKeysLru | kvasir_core::evict::Policy::VolatileLru => {
            kvasir_core::rdb_file::AccessRecord::Idle
        }
        p if p.is_lfu() => kvasir_core::rdb_file::AccessRecord::Frequency,
        _ => kvasir_core::rdb_file::AccessRecord::None,
    }
}

/// The image of the standalone store now.
pub fn image(server: &Server) -> Vec<u8> {
    let now_ms = crate::local_store::unix_ms();
    let mut out = Vec::new();
    let access = access_record(server);
    kvasir_core::rdb_file::write(
        server.local_store.borrow().store(),
        now_ms,
        crate::info::used_memory(),
        access,
        &mut out,
    );
    out
}

/// Writes `bytes` to `path` through a temporary file, fsynced, renamed,
/// the folder fsynced: a crash leaves the old file or the new one. (The
/// append-only file's base and manifest are written so too.)
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_through(&temp_for(path, std::process::id()), path, |f| {
        f.write_all(bytes)
    })
}

/// The temporary file process `pid` writes `path` through: named after
/// the target, as two files of one folder may be written at once (an AOF
/// rewrite's base in a child, its manifest in the server).
pub(crate) fn temp_for(path: &Path, pid: u32) -> PathBuf {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    path.with_file_name(format!("temp-{pid}-{name}"))
}

/// The temporary file a process saving the snapshot writes first, named
/// as Redis names it (tools and tests look for it, and remove it).
fn rdb_temp_for(_path: &Path, pid: u32) -> PathBuf {
    PathBuf::from(format!("temp-{pid}.rdb"))
}

/// Removes what a child stopped before its end left of `path`'s
/// temporary file ([`write_file`]'s name, with the child's pid).
pub(crate) fn remove_temp_of(path: &Path, pid: libc::pid_t) {
    let _ = std::fs::remove_file(temp_for(path, pid as u32));
}

/// `write` fills `temp`, which is fsynced and renamed to `path`, the
/// folder fsynced; on an error `temp` is removed.
fn write_through(
    temp: &Path,
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let result = (|| {
        let mut f = std::fs::File::create(temp)?;
        write(&mut f)?;
        f.sync_all()?;
        std::fs::rename(temp, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        } else {
            std::fs::File::open(".")?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(temp);
    }
    result
}

/// SAVE: the snapshot, written before the reply.
pub fn save(server: &Server) -> Result<(), String> {
    if server.persistence.bgsave_in_progress.get() {
        return Err("ERR Background save already in progress".into());
    }
    let dirty = server.dirty.get();
    let path = rdb_path(server);
    let now_ms = crate::local_store::unix_ms();
    let access = access_record(server);
    let shard = server.local_store.borrow();
    let temp = rdb_temp_for(&path, std::process::id());
    // Streamed to the file: a save does not hold a second copy of the data.
    let written = write_through(&temp, &path, |file| {
        let used_memory = crate::info::used_memory();
        kvasir_core::rdb_file::write_to(
            shard.store(),
            now_ms,
            used_memory,
            access,
            file,
            &mut || {},
        )
    });
    drop(shard);
    save_done(server, dirty, written.map_err(|e| e.to_string()))
}

/// Records how a SAVE ended; its reply's error.
fn save_done(server: &Server, dirty: u64, written: Result<(), String>) -> Result<(), String> {
    match written {
        Ok(()) => {
            mark_saved(server, dirty);
            // As Redis: a good foreground save lifts a failed one's MISCONF.
            server.persistence.last_bgsave_ok.set(true);
            info!("DB saved on disk");
            Ok(())
        }
        Err(e) => {
            warn!("Failed saving the DB: {e}");
            Err("ERR".into())
        }
    }
}

/// A file written: the writes it holds are no longer unsaved.
fn mark_saved(server: &Server, dirty: u64) {
    server
        .persistence
        .saves
        .set(server.persistence.saves.get() + 1);
    server.dirty.set(server.dirty.get().saturating_sub(dirty));
    server
        .persistence
        .last_save
        .set(crate::local_store::unix_ms() / 1000);
}

/// A blocking thread's write, its failure (or the thread's) as text.
pub(crate) async fn write_off_thread(path: PathBuf, bytes: Vec<u8>) -> Result<(), String> {
    match tokio::task::spawn_blocking(move || write_file(&path, &bytes)).await {
        Ok(written) => written.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// BGSAVE: a child process writes the data as it was at the fork. With
/// `schedule` it waits for an append-only file rewrite in progress.
pub fn bgsave(server: &std::rc::Rc<Server>, schedule: bool) -> Result<&'static str, String> {
    let state = &server.persistence;
    if state.bgsave_in_progress.get() {
        return Err("ERR Background save already in progress".into());
    }
    if running_child(server).is_some() {
        if schedule {
            state.bgsave_scheduled.set(true);
            return Ok("Background saving scheduled");
        }
        return Err("ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.".into());
    }
    let path = rdb_path(server);
    let dirty = server.dirty.get();
    let pid = fork_image_writer(server, ChildKind::Rdb, &path, rdb_temp_for)
        .inspect_err(|_| state.last_bgsave_ok.set(false))?;
    state.bgsave_in_progress.set(true);
    state.bgsave_scheduled.set(false);
    info!("Background saving started by pid {pid}");
    let server = server.clone();
    tokio::task::spawn_local(async move {
        let exit = fork_child::wait(pid).await;
        bgsave_child_done(&server, pid, dirty, exit);
    });
    Ok("Background saving started")
}

/// Forks a child that writes the store's RDB image as it is now to
/// `path`, through the temporary file `temp_for` names with its pid
/// (counting keys for INFO's progress, waiting `rdb-key-save-delay` after
/// each), and records it as the server's one child.
pub(crate) fn fork_image_writer(
    server: &Server,
    kind: ChildKind,
    path: &Path,
    temp_for: fn(&Path, u32) -> PathBuf,
) -> Result<libc::pid_t, String> {
    let state = &server.persistence;
    let now_ms = crate::local_store::unix_ms();
    let used_memory = crate::info::used_memory();
    let access = access_record(server);
    let delay = key_save_delay(server);
    let progress = Progress::new().map_err(|e| format!("ERR Can't save in background: {e}"))?;
    let started = std::time::Instant::now();
    let forked = {
        let shard = server.local_store.borrow();
        let store = shard.store();
        progress.set_total(
            (0..store.databases())
                .map(|db| store.db(db).len() as u64)
                .sum(),
        );
        fork_child::spawn(|| {
            let temp = temp_for(path, std::process::id());
            let mut keys = 0u64;
            // Copy-on-write, as Redis's child reports it: read every 1024
            // keys at most once a second, and once at the end.
            let mut measured = std::time::Instant::now();
            let measure =
                || progress.report_cow(fork_child::private_dirty(), crate::local_store::unix_ms());
            let written = write_through(&temp, path, |file| {
                kvasir_core::rdb_file::write_to(
                    store,
                    now_ms,
                    used_memory,
                    access,
                    file,
                    &mut || {
                        progress.add_done();
                        keys += 1;
                        if keys.is_multiple_of(1024) && measured.elapsed().as_secs() >= 1 {
                            measure();
                            measured = std::time::Instant::now();
                        }
                        delay_after_key(delay, keys);
                    },
                )
            });
            measure();
            written.is_ok()
        })
    };
    let pid = forked.map_err(|e| {
        warn!("Can't save in background: fork: {e}");
        format!("ERR Can't save in background: fork: {e}")
    })?;
    state
        .latest_fork_usec
        .set(started.elapsed().as_micros() as u64);
    state.total_forks.set(state.total_forks.get() + 1);
    *state.child.borrow_mut() = Some(SaveChild {
        pid,
        kind,
        temp_file: temp_for(path, pid as u32),
        started,
        progress,
    });
    Ok(pid)
}

/// The kind of the child process running now, if any.
pub fn running_child(server: &Server) -> Option<ChildKind> {
    server.persistence.child.borrow().as_ref().map(|c| c.kind)
}

/// The child `pid` ended: when it is still the server's child (not one
/// it stopped), it is no longer, and its start time is returned.
pub(crate) fn child_ended(server: &Server, pid: libc::pid_t) -> Option<std::time::Instant> {
    let mut child = server.persistence.child.borrow_mut();
    let ended = child.as_ref().filter(|c| c.pid == pid)?;
    let started = ended.started;
    // INFO's rdb_last_cow_size / aof_last_cow_size: the peak, as Redis.
    let cow = ended.progress.cow();
    let (slot, name) = match ended.kind {
        ChildKind::Rdb => (&server.persistence.rdb_last_cow, "RDB"),
        ChildKind::Aof => (&server.persistence.aof_last_cow, "AOF rewrite"),
    };
    slot.set(cow.peak);
    if cow.updated_ms != 0 {
        info!(
            "Fork CoW for {name}: current {} MB, peak {} MB",
            cow.current >> 20,
            cow.peak >> 20
        );
    }
    *child = None;
    Some(started)
}

/// Starts what waited for a child to end (BGSAVE SCHEDULE, a rewrite
/// asked for during a BGSAVE), as Redis's serverCron.
pub fn scheduled_cron(server: &std::rc::Rc<Server>) {
    if server.cluster.is_some() || running_child(server).is_some() {
        return;
    }
    let state = &server.persistence;
    if state.aof_rewrite_scheduled.get() && !crate::aof_persistence::rewrite_limited(server) {
        state.aof_rewrite_scheduled.set(false);
        if let Err(e) = crate::aof_persistence::rewrite(server) {
            warn!("Scheduled background AOF rewrite: {e}");
        }
    } else if state.bgsave_scheduled.get() {
        state.bgsave_scheduled.set(false);
        if let Err(e) = bgsave(server, false) {
            warn!("Scheduled background save: {e}");
        }
    }
}

/// `rdb-key-save-delay`: microseconds a save waits after each key (a
/// negative -n: one microsecond every n keys), for tests that need a save
/// in progress.
fn key_save_delay(server: &Server) -> i64 {
    stored_number(server, "rdb-key-save-delay")
}

/// A stored-only numeric parameter's value (0 when unset or not a
/// number): the hidden test delays and the loading interval.
pub(crate) fn stored_number(server: &Server, name: &str) -> i64 {
    server
        .config
        .borrow()
        .stored
        .get(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

pub(crate) fn delay_after_key(delay: i64, keys: u64) {
    let micros = match delay {
        0 => return,
        d if d > 0 => d.unsigned_abs(),
        d if keys.is_multiple_of(d.unsigned_abs()) => 1,
        _ => return,
    };
    std::thread::sleep(std::time::Duration::from_micros(micros));
}

/// A BGSAVE child ended: as Redis's backgroundSaveDoneHandler. A child
/// this server stopped itself ([`kill_child`]) changes nothing.
fn bgsave_child_done(server: &Server, pid: libc::pid_t, dirty: u64, exit: Exit) {
    let Some(started) = child_ended(server, pid) else {
        let _ = std::fs::remove_file(rdb_temp_for(Path::new(""), pid as u32));
        return;
    };
    let state = &server.persistence;
    state.bgsave_in_progress.set(false);
    state
        .last_bgsave_secs
        .set(started.elapsed().as_secs() as i64);
    match exit {
        Exit::Code(0) => {
            state.last_bgsave_ok.set(true);
            mark_saved(server, dirty);
            info!("Background saving terminated with success");
        }
        Exit::Code(_) => {
            state.last_bgsave_ok.set(false);
            warn!("Background saving error");
        }
        Exit::Signal(signal) => {
            let _ = std::fs::remove_file(rdb_temp_for(Path::new(""), pid as u32));
            // SIGUSR1 is how a save is stopped on purpose.
            state.last_bgsave_ok.set(signal == libc::SIGUSR1);
            warn!("Background saving terminated by signal {signal}");
        }
    }
}

/// Stops the child process if it is of `kind` (any kind: None), as
/// Redis's killRDBChild / killAppendOnlyChild; a BGSAVE's temporary file
/// is removed and the server may save at once. Whether one was stopped.
pub fn kill_child(server: &Server, kind: Option<ChildKind>) -> bool {
    let mut slot = server.persistence.child.borrow_mut();
    if kind.is_some_and(|k| slot.as_ref().is_some_and(|c| c.kind != k)) {
        return false;
    }
    let Some(child) = slot.take() else {
        return false;
    };
    drop(slot);
    fork_child::stop(child.pid);
    let _ = std::fs::remove_file(&child.temp_file);
    match child.kind {
        ChildKind::Rdb => {
            server.persistence.bgsave_in_progress.set(false);
            info!("Killing running BGSAVE child: {}", child.pid);
        }
        ChildKind::Aof => info!("Killing running AOF rewrite child: {}", child.pid),
    }
    true
}

/// BGREWRITEAOF: a background snapshot (Kvasir's compact image of the
/// data), or one scheduled after the save in progress, with Redis's
/// replies.
pub fn rewrite_as_snapshot(
    server: &std::rc::Rc<Server>,
    cluster: &Option<std::rc::Rc<crate::cluster::ClusterNode>>,
) -> Result<&'static str, String> {
    if !server.persistence.bgsave_in_progress.get() {
        bgsave_of_mode(server, cluster, false)?;
        return Ok("Background append only file rewriting started");
    }
    let (server, cluster) = (server.clone(), cluster.clone());
    tokio::task::spawn_local(async move {
        while server.persistence.bgsave_in_progress.get() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        if let Err(e) = bgsave_of_mode(&server, &cluster, false) {
            warn!("Scheduled background rewrite: {e}");
        }
    });
    Ok("Background append only file rewriting scheduled")
}

/// A background save of a standalone server or of a cluster node; its
/// reply.
pub fn bgsave_of_mode(
    server: &std::rc::Rc<Server>,
    cluster: &Option<std::rc::Rc<crate::cluster::ClusterNode>>,
    schedule: bool,
) -> Result<&'static str, String> {
    match cluster {
        Some(node) => bgsave_cluster(server, node).map(|()| "Background saving started"),
        None => bgsave(server, schedule),
    }
}

/// Records how a background save ended.
fn bgsave_done(server: &Server, dirty: u64, written: Result<(), String>) {
    let state = &server.persistence;
    state.bgsave_in_progress.set(false);
    state.last_bgsave_ok.set(written.is_ok());
    match written {
        Ok(()) => {
            mark_saved(server, dirty);
            info!("Background saving terminated with success");
        }
        Err(e) => warn!("Background saving error: {e}"),
    }
}

/// BGSAVE in cluster mode: `dbfilename` holds the shards this node leads,
/// as a Redis Cluster master saves its own slots, so BGSAVE on every node
/// gives the whole dataset in files redis-server loads. Each shard's part
/// is taken on its own thread at the moment it is asked for.
pub fn bgsave_cluster(
    server: &std::rc::Rc<Server>,
    node: &std::rc::Rc<crate::cluster::ClusterNode>,
) -> Result<(), String> {
    let state = &server.persistence;
    if state.bgsave_in_progress.get() {
        return Err("ERR Background save already in progress".into());
    }
    state.bgsave_in_progress.set(true);
    info!("Background saving started");
    let path = rdb_path(server);
    let dirty = server.dirty.get();
    let image = cluster_image(server, node, false);
    let server = server.clone();
    tokio::task::spawn_local(async move {
        let written = write_off_thread(path, image.await).await;
        bgsave_done(&server, dirty, written);
    });
    Ok(())
}

/// SAVE in cluster mode: BGSAVE's file, written before the reply.
pub fn save_cluster(
    server: &std::rc::Rc<Server>,
    node: &std::rc::Rc<crate::cluster::ClusterNode>,
) -> impl std::future::Future<Output = Result<(), String>> + 'static {
    let busy = server.persistence.bgsave_in_progress.get();
    let path = rdb_path(server);
    let dirty = server.dirty.get();
    let image = cluster_image(server, node, false);
    let server = server.clone();
    async move {
        if busy {
            return Err("ERR Background save already in progress".to_string());
        }
        let written = write_off_thread(path, image.await).await;
        save_done(&server, dirty, written)
    }
}

/// The shards `node` leads as one RDB file (cluster BGSAVE, and SYNC for
/// `redis-cli --rdb`; `functions_only` for `--functions-rdb`), each
/// shard's part taken on its own thread when its turn comes.
pub fn cluster_image(
    server: &Server,
    node: &std::rc::Rc<crate::cluster::ClusterNode>,
    functions_only: bool,
) -> impl std::future::Future<Output = Vec<u8>> + 'static {
    let now_ms = crate::local_store::unix_ms();
    let access = access_record(server);
    let led = node.led_shards();
    let node = node.clone();
    async move {
        use kvasir_core::rdb_file::{write_db, write_footer, write_functions, write_header};
        let mut bytes = Vec::new();
        write_header(now_ms, crate::info::used_memory(), &mut bytes);
        for (i, shard) in led.into_iter().enumerate() {
            let part = node
                .on_store(shard, move |store| {
                    let mut part = Vec::new();
                    // Every shard keeps the libraries: written once.
                    if i == 0 {
                        write_functions(store, &mut part);
                    }
                    if !functions_only {
                        write_db(store, 0, 0, access, &mut part);
                    }
                    part
                })
                .await;
            bytes.extend(part.unwrap_or_default());
        }
        write_footer(&mut bytes);
        bytes
    }
}

/// At start (standalone): loads the snapshot file if there is one, in
/// steps between which clients are answered ([`crate::loading`]). An
/// unreadable file stops the start, as in Redis.
pub async fn load_at_start(server: &Server) -> Result<(), String> {
    let path = rdb_path(server);
    if !path.exists() {
        return Ok(());
    }
    let bytes = server
        .loading
        .read_file(&path)
        .await
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let started = std::time::Instant::now();
    let now_ms = crate::local_store::unix_ms();
    let loaded = crate::loading::load_rdb(server, &bytes, now_ms, None)
        .await
        .and_then(|loaded| match loaded.image_len == bytes.len() {
            true => Ok(loaded),
            false => Err("Bad file format reading the RDB file: data after EOF".to_string()),
        })
        .map_err(|e| format!("{} ({})", e, path.display()))?;
    loaded_from_disk(server, &loaded, started);
    Ok(())
}

/// INFO's counts of the last load, and its log line.
fn loaded_from_disk(
    server: &Server,
    loaded: &kvasir_core::rdb_file::Loaded,
    started: std::time::Instant,
) {
    server
        .persistence
        .last_load
        .set((loaded.keys, loaded.expired));
    info!(
        keys = loaded.keys,
        libraries = loaded.functions,
        expired = loaded.expired,
        "DB loaded from disk: {:.3} seconds",
        started.elapsed().as_secs_f64()
    );
}

/// Loads the snapshot file into the standalone store (the start).
pub fn load_file(server: &Server) -> Result<(), String> {
    load_file_merging(server, None)
}

/// Loads the snapshot file on top of the store (DEBUG RELOAD): `merging`
/// says what a key or library already there does; None: the file's
/// libraries replace the store's.
pub fn load_file_merging(
    server: &Server,
    merging: Option<kvasir_core::rdb_file::Existing>,
) -> Result<(), String> {
    let path = rdb_path(server);
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let started = std::time::Instant::now();
    let now_ms = crate::local_store::unix_ms();
    let loaded = server
        .local_store
        .borrow_mut()
        .with_store(|store| kvasir_core::rdb_file::read_into(&bytes, store, now_ms, merging))
        .map_err(|e| format!("{} ({})", e, path.display()))?;
    loaded_from_disk(server, &loaded, started);
    Ok(())
}

/// Takes a BGSAVE when a `save` point is reached: at least `changes`
/// writes and `seconds` since the last save.
pub fn save_points_cron(server: &std::rc::Rc<Server>) {
    if server.cluster.is_some()
        || server.persistence.bgsave_in_progress.get()
        || running_child(server).is_some()
    {
        return;
    }
    let dirty = server.dirty.get();
    if dirty == 0 {
        return;
    }
    let points = crate::config::save_points(&server.config.borrow().save).unwrap_or_default();
    let since =
        (crate::local_store::unix_ms() / 1000).saturating_sub(server.persistence.last_save.get());
    if points
        .iter()
        .any(|&(secs, changes)| dirty >= changes && since >= secs)
    {
        info!("{dirty} changes in {since} seconds. Saving...");
        let _ = bgsave(server, false);
    }
}

/// After FLUSHALL with `save` points, as Redis: the empty dataset is saved
/// at once, so that a restart does not bring the flushed keys back from an
/// older dump.rdb (and the save points count from zero again).
pub fn flushed_all(server: &Server) {
    if server.cluster.is_some() {
        return;
    }
    // The child's image holds the flushed keys: as Redis, stop it.
    kill_child(server, Some(ChildKind::Rdb));
    if !has_save_points(server) {
        return;
    }
    if let Err(e) = save(server) {
        warn!("FLUSHALL could not save the emptied dataset: {e}");
    }
}

/// Redis's refusal of writes after a failed background save, with
/// `stop-writes-on-bgsave-error yes` and `save` points.
const BGSAVE_ERROR: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

/// The error writes (and PING) are refused with while the data cannot be
/// persisted: the last background save failed, or the append-only file
/// cannot be written. A standalone server's; cluster nodes persist
/// through their Raft log.
pub fn write_refusal(server: &Server) -> Option<String> {
    if server.cluster.is_some() {
        return None;
    }
    // Every write asks: the settings are read only after a failed save.
    if !server.persistence.last_bgsave_ok.get() {
        let stop_writes = server
            .config
            .borrow()
            .stored
            .get("stop-writes-on-bgsave-error")
            .is_none_or(|v| v.eq_ignore_ascii_case("yes"));
        if stop_writes && has_save_points(server) {
            return Some(BGSAVE_ERROR.to_string());
        }
    }
    crate::aof_persistence::write_error(server)
}

/// Whether `save` points are configured.
pub fn has_save_points(server: &Server) -> bool {
    crate::config::save_points(&server.config.borrow().save).is_some_and(|p| !p.is_empty())
}

/// SYNC, for `redis-cli --rdb`: the snapshot image as one bulk reply, and
/// the connection closes after it (Kvasir has no replication stream to
/// follow it; REPLCONF rdb-only, which redis-cli sends, asks the same).
/// With REPLCONF rdb-filter-only functions (`redis-cli --functions-rdb`)
/// only the function libraries are in it.
/// SYNC's reply, the image of the whole data (redis-cli --rdb), as Redis's
/// disk-based replication makes it: a forked child writes the image at
/// this instant into a temporary file, which is read once the child is
/// done, as a RESP bulk string ready to send; the server stops only for
/// the fork.
pub fn sync_reply_in_child(
    server: &std::rc::Rc<Server>,
) -> Result<impl std::future::Future<Output = Result<bytes::BytesMut, String>>, String> {
    let now_ms = crate::local_store::unix_ms();
    let used_memory = crate::info::used_memory();
    let access = access_record(server);
    let delay = key_save_delay(server);
    let started = std::time::Instant::now();
    let forked = {
        let shard = server.local_store.borrow();
        let store = shard.store();
        fork_child::spawn(|| {
            let mut keys = 0u64;
            std::fs::File::create(sync_file(std::process::id() as libc::pid_t))
                .and_then(|mut file| {
                    kvasir_core::rdb_file::write_to(
                        store,
                        now_ms,
                        used_memory,
                        access,
                        &mut file,
                        &mut || {
                            keys += 1;
                            delay_after_key(delay, keys);
                        },
                    )
                })
                .is_ok()
        })
    };
    let pid = forked.map_err(|e| format!("ERR Can't fork for SYNC: {e}"))?;
    let state = &server.persistence;
    state
        .latest_fork_usec
        .set(started.elapsed().as_micros() as u64);
    state.total_forks.set(state.total_forks.get() + 1);
    state.sync_children.borrow_mut().push(pid);
    info!("Starting BGSAVE for SYNC with target: disk, by pid {pid}");
    let server = server.clone();
    Ok(async move {
        let exit = fork_child::wait(pid).await;
        server
            .persistence
            .sync_children
            .borrow_mut()
            .retain(|&p| p != pid);
        let path = sync_file(pid);
        let read = match exit {
            fork_child::Exit::Code(0) => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || read_as_bulk(&path))
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.map_err(|e| e.to_string()))
            }
            other => Err(format!("the child ended with {other:?}")),
        };
        let _ = std::fs::remove_file(&path);
        read.map_err(|e| {
            warn!("SYNC: the image could not be made: {e}");
            format!("ERR SYNC failed: {e}")
        })
    })
}

/// A file's bytes as a RESP bulk string, read into one buffer of its
/// size: the data thread sends it without a copy.
fn read_as_bulk(path: &std::path::Path) -> std::io::Result<bytes::BytesMut> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len() as usize;
    let header = format!("${len}\r\n");
    let mut bulk = Vec::with_capacity(header.len() + len + 2);
    bulk.extend_from_slice(header.as_bytes());
    file.read_to_end(&mut bulk)?;
    if bulk.len() != header.len() + len {
        return Err(std::io::Error::other("the image changed while it was read"));
    }
    bulk.extend_from_slice(b"\r\n");
    // Unique and whole: both conversions keep the buffer.
    Ok(bytes::BytesMut::from(bytes::Bytes::from(bulk)))
}

/// The file a SYNC child writes its image to.
fn sync_file(pid: libc::pid_t) -> PathBuf {
    PathBuf::from(format!("temp-{pid}-sync.rdb"))
}

/// Stops the children writing SYNC images (at shutdown), removing their
/// files.
pub fn stop_sync_children(server: &Server) {
    for pid in server.persistence.sync_children.take() {
        fork_child::stop(pid);
        let _ = std::fs::remove_file(sync_file(pid));
    }
}

pub fn sync_image(server: &Server, functions_only: bool) -> Vec<u8> {
    if !functions_only {
        return image(server);
    }
    let shard = server.local_store.borrow();
    let mut only: kvasir_core::Store = kvasir_core::Store::new(1);
    only.scripts
        .set_libraries(shard.store().scripts.libraries.clone());
    let mut out = Vec::new();
    kvasir_core::rdb_file::write(
        &only,
        crate::local_store::unix_ms(),
        0,
        kvasir_core::rdb_file::AccessRecord::None,
        &mut out,
    );
    out
}

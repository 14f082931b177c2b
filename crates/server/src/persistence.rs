//! RDB snapshots of the standalone server, as redis-server keeps them: SAVE
//! writes `dbfilename` (dump.rdb) in `dir` at once, BGSAVE takes the image
//! on the data thread (a point in time, as Redis's fork does) and writes it
//! on a blocking thread, SHUTDOWN SAVE saves before exiting, and a server
//! starts from the file if there is one. Files go to a temporary name,
//! fsync, then rename, so a crash leaves the old file or the new one.
//!
//! In cluster mode every write is in the Raft log and snapshots already:
//! these commands answer an error there, and the file is not read.

use crate::listener::Server;
use std::cell::Cell;
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
}

impl SaveState {
    pub fn new(now_secs: u64) -> SaveState {
        SaveState {
            last_save: Cell::new(now_secs),
            bgsave_in_progress: Cell::new(false),
            last_bgsave_ok: Cell::new(true),
            aof_rewrites: Cell::new(0),
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
    // Named after the target: two files of one folder may be written at
    // once (an AOF rewrite's base off-thread, its manifest here).
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let temp = path.with_file_name(format!("temp-{}-{name}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&temp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&temp, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        } else {
            std::fs::File::open(".")?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// SAVE: the snapshot, written before the reply.
pub fn save(server: &Server) -> Result<(), String> {
    if server.persistence.bgsave_in_progress.get() {
        return Err("ERR Background save already in progress".into());
    }
    let bytes = image(server);
    let dirty = server.dirty.get();
    let path = rdb_path(server);
    save_done(
        server,
        dirty,
        write_file(&path, &bytes).map_err(|e| e.to_string()),
    )
}

/// Records how a SAVE ended; its reply's error.
fn save_done(server: &Server, dirty: u64, written: Result<(), String>) -> Result<(), String> {
    match written {
        Ok(()) => {
            mark_saved(server, dirty);
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

/// BGSAVE: the image now, written on a blocking thread.
pub fn bgsave(server: &std::rc::Rc<Server>) -> Result<(), String> {
    let state = &server.persistence;
    if state.bgsave_in_progress.get() {
        return Err("ERR Background save already in progress".into());
    }
    let bytes = image(server);
    let dirty = server.dirty.get();
    let path = rdb_path(server);
    state.bgsave_in_progress.set(true);
    info!("Background saving started");
    let server = server.clone();
    tokio::task::spawn_local(async move {
        let written = write_off_thread(path, bytes).await;
        bgsave_done(&server, dirty, written);
    });
    Ok(())
}

/// BGREWRITEAOF: a background snapshot (Kvasir's compact image of the
/// data), or one scheduled after the save in progress, with Redis's
/// replies.
pub fn rewrite_as_snapshot(
    server: &std::rc::Rc<Server>,
    cluster: &Option<std::rc::Rc<crate::cluster::ClusterNode>>,
) -> Result<&'static str, String> {
    if !server.persistence.bgsave_in_progress.get() {
        bgsave_of_mode(server, cluster)?;
        return Ok("Background append only file rewriting started");
    }
    let (server, cluster) = (server.clone(), cluster.clone());
    tokio::task::spawn_local(async move {
        while server.persistence.bgsave_in_progress.get() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        if let Err(e) = bgsave_of_mode(&server, &cluster) {
            warn!("Scheduled background rewrite: {e}");
        }
    });
    Ok("Background append only file rewriting scheduled")
}

/// A background save of a standalone server or of a cluster node.
pub fn bgsave_of_mode(
    server: &std::rc::Rc<Server>,
    cluster: &Option<std::rc::Rc<crate::cluster::ClusterNode>>,
) -> Result<(), String> {
    match cluster {
        Some(node) => bgsave_cluster(server, node),
        None => bgsave(server),
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
                        write_db(store, 0, 0, now_ms, access, &mut part);
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

/// At start (standalone): loads the snapshot file if there is one. An
/// unreadable file stops the start, as in Redis.
pub fn load_at_start(server: &Server) -> Result<(), String> {
    if !rdb_path(server).exists() {
        return Ok(());
    }
    load_file(server)
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
    info!(
        keys = loaded.keys,
        libraries = loaded.functions,
        expired = loaded.expired,
        "DB loaded from disk: {:.3} seconds",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Takes a BGSAVE when a `save` point is reached: at least `changes`
/// writes and `seconds` since the last save.
pub fn save_points_cron(server: &std::rc::Rc<Server>) {
    if server.cluster.is_some() || server.persistence.bgsave_in_progress.get() {
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
        let _ = bgsave(server);
    }
}

/// After FLUSHALL with `save` points, as Redis: the empty dataset is saved
/// at once, so that a restart does not bring the flushed keys back from an
/// older dump.rdb (and the save points count from zero again).
pub fn flushed_all(server: &Server) {
    if server.cluster.is_some() || !has_save_points(server) {
        return;
    }
    if let Err(e) = save(server) {
        warn!("FLUSHALL could not save the emptied dataset: {e}");
    }
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

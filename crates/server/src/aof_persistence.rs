//! The standalone server's use of the append-only file ([`crate::aof`]):
//! loading it at start, writing it before replies go out, the `everysec`
//! fsync, BGREWRITEAOF, and `CONFIG SET appendonly`.

use crate::aof::{replay_file, AofLog, AppendFsync};
use crate::fork_child::Exit;
use crate::listener::Server;
use std::rc::Rc;
use std::time::Duration;
use tracing::{info, warn};

/// At start with `appendonly yes`: loads the log the manifest describes,
/// or, without one, starts a log from the data now (dump.rdb, if there is
/// one, is loaded first, as Redis 7 does).
pub async fn start(server: &Server) -> Result<(), String> {
    let settings = server.config.borrow().aof_settings();
    let mut manifest = AofLog::read_manifest(&settings)?;
    let old = std::path::PathBuf::from(&server.config.borrow().dir).join(&settings.name);
    // Redis 7's upgrade of a Redis 6 `dir/appendonly.aof`: without a
    // manifest, or with the one an upgrade interrupted before the move
    // wrote (only that file, as the base, not in the folder yet).
    let interrupted = |m: &crate::aof::Manifest| {
        matches!(m.files.as_slice(), [only] if only.kind == 'b' && only.name == settings.name)
            && !settings.folder.join(&settings.name).exists()
    };
    if old.is_file() && manifest.as_ref().is_none_or(interrupted) {
        manifest = Some(upgrade_single_file(&old, &settings)?);
    }
    let Some(manifest) = manifest else {
        crate::persistence::load_at_start(server).await?;
        let base = crate::persistence::image(server);
        let log = AofLog::create(settings, &base)?;
        server.local_store.borrow_mut().aof = Some(log);
        info!("Creating AOF base file and incremental file");
        return Ok(());
    };
    load_at_start(server, &settings, &manifest).await?;
    let log = AofLog::resume(settings, manifest)?;
    server.local_store.borrow_mut().aof = Some(log);
    Ok(())
}

/// A Redis 6 server's single `dir/appendonly.aof` (`old`) becomes the
/// base of a multi-part folder, as Redis 7 upgrades it: the file moves
/// into the folder under its own name.
fn upgrade_single_file(
    old: &std::path::Path,
    settings: &crate::aof::AofSettings,
) -> Result<crate::aof::Manifest, String> {
    std::fs::create_dir_all(&settings.folder)
        .map_err(|e| format!("creating {}: {e}", settings.folder.display()))?;
    let manifest = crate::aof::Manifest {
        files: vec![crate::aof::ManifestFile {
            name: settings.name.clone(),
            seq: 1,
            kind: 'b',
        }],
    };
    // The manifest first, as Redis: a crash between the two steps leaves
    // the layout the next start continues from.
    AofLog::write_manifest(settings, &manifest)?;
    std::fs::rename(old, settings.folder.join(&settings.name)).map_err(|e| {
        format!(
            "moving {} into {}: {e}",
            old.display(),
            settings.folder.display()
        )
    })?;
    info!("Successfully migrated an old-style AOF into the AOF directory");
    Ok(manifest)
}

/// DEBUG LOADAOF: the log written out, the data emptied and loaded again
/// from the folder.
pub fn reload(server: &Server) -> Result<(), String> {
    // With the log off, as Redis: what the folder holds (a BGREWRITEAOF's).
    sync_at_exit(server)?;
    let settings = server.config.borrow().aof_settings();
    let manifest = AofLog::read_manifest(&settings)?.ok_or("ERR Error loading the AOF")?;
    server
        .local_store
        .borrow_mut()
        .with_store(|store| store.flush_all());
    load(server, &settings, &manifest)?;
    warn!("Append Only File loaded by DEBUG LOADAOF");
    Ok(())
}

/// Loads the base and the incremental files `manifest` names (DEBUG
/// LOADAOF: at once).
fn load(
    server: &Server,
    settings: &crate::aof::AofSettings,
    manifest: &crate::aof::Manifest,
) -> Result<(), String> {
    let started = std::time::Instant::now();
    let (base, incrs) = AofLog::files(settings, manifest);
    let mut db = 0;
    if let Some(path) = base {
        let bytes = std::fs::read(&path).map_err(|e| cannot_open(&path, e))?;
        let image = match bytes.starts_with(b"REDIS") {
            true => Some(
                server
                    .local_store
                    .borrow_mut()
                    .with_store(|store| {
                        let now_ms = crate::local_store::unix_ms();
                        kvasir_core::rdb_file::read_prefix_into(&bytes, store, now_ms, None)
                    })
                    .map_err(|e| format!("{e} ({})", path.display()))?,
            ),
            false => None,
        };
        load_base_commands(server, &path, bytes, image, incrs.is_empty(), &mut db)?;
    }
    let replayed = replay_incrs(server, &incrs, &mut db);
    use_config_limits(server);
    replayed?;
    loaded_from_log(started);
    Ok(())
}

/// The config's encoding thresholds back on the store: a file's writes
/// replay under those its `#KVLIMITS` lines state (a file without them,
/// redis-server's or an older build's, under the config's), and new
/// writes run under the config's.
fn use_config_limits(server: &Server) {
    let limits = server.config.borrow().encoding_limits();
    server
        .local_store
        .borrow_mut()
        .with_store(|store| store.limits = limits);
}

/// At start: as [`load`], read in steps between which clients are
/// answered ([`crate::loading`]).
async fn load_at_start(
    server: &Server,
    settings: &crate::aof::AofSettings,
    manifest: &crate::aof::Manifest,
) -> Result<(), String> {
    let started = std::time::Instant::now();
    let (base, incrs) = AofLog::files(settings, manifest);
    let mut db = 0;
    if let Some(path) = base {
        let bytes = server
            .loading
            .read_file(&path)
            .await
            .map_err(|e| cannot_open(&path, e))?;
        let image = match bytes.starts_with(b"REDIS") {
            true => {
                let now_ms = crate::local_store::unix_ms();
                let loaded = crate::loading::load_rdb(server, &bytes, now_ms, None).await;
                Some(loaded.map_err(|e| format!("{e} ({})", path.display()))?)
            }
            false => None,
        };
        // Commands in a base are a Redis-written file's (Kvasir writes an
        // RDB base): replayed at once.
        load_base_commands(server, &path, bytes, image, incrs.is_empty(), &mut db)?;
    }
    let last = incrs.len().saturating_sub(1);
    for (i, path) in incrs.iter().enumerate() {
        let Some(bytes) = read_incr(server, path, i == last).await? else {
            continue;
        };
        replay_in_steps(server, path, bytes, 0, &mut db, i == last).await?;
    }
    use_config_limits(server);
    loaded_from_log(started);
    Ok(())
}

/// [`replay`], with the event loop's turn every
/// `loading-process-events-interval-bytes` and `key-load-delay` after
/// each write.
async fn replay_in_steps(
    server: &Server,
    path: &std::path::Path,
    bytes: Vec<u8>,
    offset: usize,
    db: &mut usize,
    last: bool,
) -> Result<(), String> {
    use crate::aof::{AofRead, AofReader};
    use_config_limits(server);
    server.loading.file(bytes.len() as u64);
    let mut reader = AofReader::new(bytes::BytesMut::from(bytes::Bytes::from(bytes)));
    let in_file = |e: String| format!("{e} {}", path.display());
    let (mut interval, mut delay) = crate::loading::pacing(server);
    let mut next_turn = interval;
    let mut writes = 0u64;
    let cut = loop {
        match reader.next_write(db).map_err(in_file)? {
            AofRead::Write(write) => {
                server
                    .local_store
                    .borrow_mut()
                    .replay(write)
                    .map_err(in_file)?;
                writes += 1;
                crate::persistence::delay_after_key(delay, writes);
            }
            AofRead::End(cut) => break cut,
        }
        if reader.position() >= next_turn {
            server.loading.read_up_to(reader.position() as u64);
            crate::loading::clients_turn().await;
            (interval, delay) = crate::loading::pacing(server);
            next_turn = reader.position() + interval;
        }
    };
    after_replay(server, path, cut, offset, last)
}

fn loaded_from_log(started: std::time::Instant) {
    info!(
        "DB loaded from append only file: {:.3} seconds",
        started.elapsed().as_secs_f64()
    );
}

/// The commands of a base file: all of it without an RDB `image`, or
/// those after the image (Redis 6's `aof-use-rdb-preamble yes` file,
/// upgraded to the base).
fn load_base_commands(
    server: &Server,
    path: &std::path::Path,
    mut bytes: Vec<u8>,
    image: Option<kvasir_core::rdb_file::Loaded>,
    last: bool,
    db: &mut usize,
) -> Result<(), String> {
    match image {
        Some(loaded) if loaded.image_len < bytes.len() => {
            bytes.drain(..loaded.image_len);
            replay(server, path, bytes, loaded.image_len, db, last)
        }
        Some(_) => Ok(()),
        // A base of commands (aof-use-rdb-preamble no).
        None => replay(server, path, bytes, 0, db, false),
    }
}

/// The incremental files, in order; the last one may be cut short.
fn replay_incrs(
    server: &Server,
    incrs: &[std::path::PathBuf],
    db: &mut usize,
) -> Result<(), String> {
    let last = incrs.len().saturating_sub(1);
    for (i, path) in incrs.iter().enumerate() {
        let bytes = match std::fs::read(path) {
            Err(e) if i == last && e.kind() == std::io::ErrorKind::NotFound => continue,
            read => read.map_err(|e| cannot_open(path, e))?,
        };
        replay(server, path, bytes, 0, db, i == last)?;
    }
    Ok(())
}

/// An incremental file's bytes; None for a last one that does not exist
/// yet (a crash right after a rewrite listed it).
async fn read_incr(
    server: &Server,
    path: &std::path::Path,
    last: bool,
) -> Result<Option<Vec<u8>>, String> {
    match server.loading.read_file(path).await {
        Ok(b) => Ok(Some(b)),
        Err(e) if last && e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(cannot_open(path, e)),
    }
}

/// Redis's words for a file the manifest names that does not read.
fn cannot_open(path: &std::path::Path, e: std::io::Error) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    format!("Fatal error: can't open the append log file {name} for reading: {e}")
}

/// Replays one file; a last file cut short in the middle of a write is
/// truncated to its last whole write (Redis's `aof-load-truncated yes`).
fn replay(
    server: &Server,
    path: &std::path::Path,
    bytes: Vec<u8>,
    offset: usize,
    db: &mut usize,
    last: bool,
) -> Result<(), String> {
    use_config_limits(server);
    let cut = {
        let mut local = server.local_store.borrow_mut();
        // The file's buffer itself is parsed (no copy of a large log).
        replay_file(
            bytes::BytesMut::from(bytes::Bytes::from(bytes)),
            db,
            |write| local.replay(write),
        )
        .map_err(|e| format!("{e} {}", path.display()))?
    };
    after_replay(server, path, cut, offset, last)
}

/// A last file cut short is truncated to its whole writes (with
/// `aof-load-truncated yes`); any other refuses the start.
fn after_replay(
    server: &Server,
    path: &std::path::Path,
    cut: Option<usize>,
    offset: usize,
    last: bool,
) -> Result<(), String> {
    if let Some(len) = cut {
        let truncate = server
            .config
            .borrow()
            .stored
            .get("aof-load-truncated")
            .is_none_or(|v| v.eq_ignore_ascii_case("yes"));
        if !last || !truncate {
            return Err(format!(
                "Unexpected end of file reading the append only file {}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.",
                path.display()
            ));
        }
        warn!(
            "!!! Warning: short read while loading the AOF file {}!!! Truncating the AOF at offset {}",
            path.display(),
            offset + len
        );
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| format!("truncating {}: {e}", path.display()))?;
        file.set_len((offset + len) as u64)
            .and_then(|()| file.sync_all())
            .map_err(|e| format!("truncating {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Writes what the log holds before replies go out (the session calls
/// this before every write to a client): a reply never tells of a write
/// the file does not have.
///
/// With `appendfsync always` the connection first lets the others that
/// are ready run their commands: one fsync then covers the writes of all
/// of them, as Redis's one fsync per event-loop round does.
///
/// False when the replies must not go out: with `appendfsync always` a
/// write or fsync that failed would otherwise acknowledge what the disk
/// may not have (the connection is closed instead; writes are refused
/// with MISCONF meanwhile). Other policies promise no fsync before the
/// reply, and reply as Redis does.
pub async fn before_reply(server: &Server) -> bool {
    if !server.config.borrow().appendonly {
        return true;
    }
    let must_sync = server
        .local_store
        .borrow()
        .aof
        .as_ref()
        .is_some_and(|aof| aof.fsync_policy() == AppendFsync::Always && aof.has_pending());
    if must_sync {
        tokio::task::yield_now().await;
    }
    match server.local_store.borrow_mut().flush_aof() {
        Ok(()) => true,
        Err(e) => {
            warn!("{e}");
            !must_sync
        }
    }
}

/// The error writes are refused with while the log cannot be written.
pub fn write_error(server: &Server) -> Option<String> {
    if !server.config.borrow().appendonly {
        return None;
    }
    let local = server.local_store.borrow();
    let error = local.aof.as_ref()?.error.as_ref()?;
    Some(format!("MISCONF {error}"))
}

/// Once a second: what the server logged on its own (expired and evicted
/// keys, while no client is answered) is written, and with `appendfsync
/// everysec` what was written is fsynced on a blocking thread.
pub async fn everysec_cron(server: Rc<Server>) {
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let file = {
            let mut local = server.local_store.borrow_mut();
            let Some(aof) = local.aof.as_mut() else {
                continue;
            };
            if let Err(e) = aof.flush() {
                warn!("{e}");
                continue;
            }
            let (percentage, min_size) = auto_rewrite_settings(&server);
            if aof.wants_rewrite(percentage, min_size)
                && crate::persistence::running_child(&server).is_none()
                && !rewrite_limited(&server)
            {
                drop(local);
                info!("Starting automatic rewriting of AOF on growth");
                if let Err(e) = rewrite(&server) {
                    warn!("Automatic AOF rewrite: {e}");
                }
                continue;
            }
            if aof.fsync_policy() != AppendFsync::EverySec {
                continue;
            }
            aof.take_unsynced()
        };
        if let Some(file) = file {
            match tokio::task::spawn_blocking(move || file.sync_data()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    let why = format!("Errors writing to the AOF file: {e}");
                    warn!("{why}");
                    if let Some(aof) = server.local_store.borrow_mut().aof.as_mut() {
                        aof.error = Some(why);
                    }
                }
                Err(_) => {}
            }
        }
    }
}

/// `auto-aof-rewrite-percentage` and `auto-aof-rewrite-min-size`.
fn auto_rewrite_settings(server: &Server) -> (u64, u64) {
    let config = server.config.borrow();
    let percentage = config
        .stored
        .get("auto-aof-rewrite-percentage")
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let min_size = config
        .stored
        .get("auto-aof-rewrite-min-size")
        .and_then(crate::config::parse_memory)
        .unwrap_or(64 << 20);
    (percentage, min_size)
}

/// Before exiting (SHUTDOWN, a signal): everything logged on disk.
pub fn sync_at_exit(server: &Server) -> Result<(), String> {
    let mut local = server.local_store.borrow_mut();
    match local.aof.as_mut() {
        Some(aof) => aof.flush().and_then(|()| aof.sync()),
        None => Ok(()),
    }
}

/// Whether the log was turned on at run time and its first base is not
/// written yet (until then the folder does not hold the data).
pub fn waiting_for_base(server: &Server) -> bool {
    server
        .local_store
        .borrow()
        .aof
        .as_ref()
        .is_some_and(|a| a.is_waiting())
}

/// WAITAOF: everything logged fsynced now; false without a log (or when
/// the fsync failed).
pub fn sync_now(server: &Server) -> bool {
    let mut local = server.local_store.borrow_mut();
    match local.aof.as_mut() {
        Some(aof) => aof.flush().and_then(|()| aof.sync()).is_ok(),
        None => false,
    }
}

/// `CONFIG SET appendonly` and `appendfsync` on a running server: `yes`
/// starts a log whose first base a rewrite writes from the data now (as
/// Redis: the writes meanwhile go to a temporary file, and the folder
/// names the new files only once the base is written); `no` closes it.
pub fn apply_settings(server: &Rc<Server>, in_exec: bool) -> Result<(), String> {
    let (on, settings) = {
        let config = server.config.borrow();
        (config.appendonly, config.aof_settings())
    };
    let running = server.local_store.borrow().aof.is_some();
    match (on, running) {
        (true, false) => {
            // As Redis: a rewrite of the log-off folder gives way to this one.
            crate::persistence::kill_child(server, Some(crate::persistence::ChildKind::Aof));
            match AofLog::start_waiting(settings) {
                Ok(log) => server.local_store.borrow_mut().aof = Some(log),
                Err(e) => {
                    // Not on, then: the setting says what is.
                    server.config.borrow_mut().appendonly = false;
                    return Err(e);
                }
            }
            if in_exec {
                // As Redis: the rewrite starts after the transaction.
                server.persistence.aof_rewrite_scheduled.set(true);
                info!("AOF was enabled during a transaction. An AOF background was scheduled to start when possible.");
                return Ok(());
            }
            match rewrite(server) {
                Ok(reply) if reply.ends_with("scheduled") => info!(
                    "AOF was enabled but there is already another background operation. An AOF background was scheduled to start when possible."
                ),
                Ok(_) => {}
                Err(e) => {
                    warn!("Starting the append only file: {e}; retried when possible");
                    server.persistence.aof_rewrite_scheduled.set(true);
                }
            }
        }
        (false, true) => {
            crate::persistence::kill_child(server, Some(crate::persistence::ChildKind::Aof));
            sync_at_exit(server)?;
            if let Some(log) = server.local_store.borrow_mut().aof.take() {
                log.stop();
            }
            server.persistence.aof_rewrite_scheduled.set(false);
        }
        (true, true) => {
            if let Some(aof) = server.local_store.borrow_mut().aof.as_mut() {
                aof.set_fsync_policy(settings.fsync);
                aof.set_timestamps(settings.timestamps);
            }
        }
        (false, false) => {}
    }
    Ok(())
}

/// BGREWRITEAOF with a log: a child process writes the new base, the
/// data as it was at the fork, while the writes from then on go to a new
/// incremental file. During a BGSAVE the rewrite waits for it (Redis's one
/// child at a time). Its reply.
pub fn rewrite(server: &Rc<Server>) -> Result<&'static str, String> {
    use crate::persistence::ChildKind;
    match crate::persistence::running_child(server) {
        Some(ChildKind::Aof) => {
            return Err("ERR Background append only file rewriting already in progress".into())
        }
        Some(ChildKind::Rdb) => {
            server.persistence.aof_rewrite_scheduled.set(true);
            return Ok("Background append only file rewriting scheduled");
        }
        None => {}
    }
    // With the log off, as Redis 7: a new base alone (DEBUG LOADAOF and a
    // later `appendonly yes` start from the folder; a restart with the log
    // off does not read it).
    let log_on = server.local_store.borrow().aof.is_some();
    let pending = match server.local_store.borrow_mut().aof.as_mut() {
        Some(aof) => aof.begin_rewrite(),
        None => AofLog::base_only_target(&server.config.borrow().aof_settings()),
    }
    .map_err(|e| format!("ERR {e}"))?;
    let forked = crate::persistence::fork_image_writer(
        server,
        ChildKind::Aof,
        &pending.path,
        crate::persistence::temp_for,
    );
    let pid = match forked {
        Ok(pid) => pid,
        Err(e) => {
            if let Some(aof) = server.local_store.borrow_mut().aof.as_mut() {
                let _ = aof.finish_rewrite(pending, false);
            }
            return Err(e);
        }
    };
    server.persistence.aof_rewrite_scheduled.set(false);
    info!("Background append only file rewriting started by pid {pid}");
    let server = server.clone();
    tokio::task::spawn_local(async move {
        let exit = crate::fork_child::wait(pid).await;
        // Not ours any more: stopped by CONFIG SET appendonly no or at exit.
        let started = crate::persistence::child_ended(&server, pid);
        let current = started.is_some();
        let ok = current && exit == Exit::Code(0);
        if let Some(started) = started {
            rewrite_ended(&server, exit, started);
        }
        if !ok {
            crate::persistence::remove_temp_of(&pending.path, pid);
        }
        let mut local = server.local_store.borrow_mut();
        let finished = match local.aof.as_mut() {
            Some(aof) if log_on => {
                let finished = aof.finish_rewrite(pending, ok);
                // A log turned on at run time has no base yet: try again.
                if aof.is_waiting() {
                    server.persistence.aof_rewrite_scheduled.set(true);
                }
                finished
            }
            // The log was turned on or off meanwhile: this base is not its.
            Some(_) => Ok(()),
            None if log_on => Ok(()),
            None if ok => {
                AofLog::install_base_only(&server.config.borrow().aof_settings(), pending)
            }
            None => {
                let _ = std::fs::remove_file(&pending.path);
                Ok(())
            }
        };
        drop(local);
        match finished {
            Ok(()) if ok => info!("Background AOF rewrite finished successfully"),
            Ok(()) => {}
            Err(e) => {
                warn!("Background AOF rewrite failed: {e}");
                server.persistence.aof_last_rewrite_ok.set(false);
            }
        }
        server
            .persistence
            .aof_rewrites
            .set(server.persistence.aof_rewrites.get() + ok as u64);
    });
    Ok("Background append only file rewriting started")
}

/// Records how a rewrite's child ended, as Redis's
/// backgroundRewriteDoneHandler: SIGUSR1 is how a rewrite is stopped on
/// purpose and is no failure.
fn rewrite_ended(server: &Server, exit: Exit, started: std::time::Instant) {
    let state = &server.persistence;
    state
        .aof_last_rewrite_secs
        .set(started.elapsed().as_secs() as i64);
    let failed = match exit {
        Exit::Code(0) => false,
        Exit::Code(_) => {
            warn!("Background AOF rewrite terminated with error");
            true
        }
        Exit::Signal(signal) => {
            warn!("Background AOF rewrite terminated by signal {signal}");
            signal != libc::SIGUSR1
        }
    };
    if failed {
        state.aof_last_rewrite_ok.set(false);
        state
            .aof_rewrite_failures
            .set(state.aof_rewrite_failures.get() + 1);
    } else if exit == Exit::Code(0) {
        state.aof_last_rewrite_ok.set(true);
        state.aof_rewrite_failures.set(0);
    }
}

/// Failures in a row after which automatic rewrites wait (Redis's
/// AOF_REWRITE_LIMITE_THRESHOLD), and the longest wait in minutes.
const REWRITE_FAILURES_LIMIT: u64 = 3;
const REWRITE_RETRY_MAX_MINUTES: u64 = 60;

/// Whether an automatic or scheduled rewrite must wait, as Redis's
/// aofRewriteLimited: after three failed rewrites in a row, 1, 2, 4...
/// up to 60 minutes between tries (BGREWRITEAOF itself always runs).
pub fn rewrite_limited(server: &Server) -> bool {
    let state = &server.persistence;
    if state.aof_rewrite_failures.get() < REWRITE_FAILURES_LIMIT {
        state.aof_rewrite_retry.set((0, 0));
        return false;
    }
    let now = crate::local_store::unix_ms() / 1000;
    let (minutes, not_before) = state.aof_rewrite_retry.get();
    if not_before != 0 {
        if now < not_before {
            return true;
        }
        state.aof_rewrite_retry.set((minutes, 0));
        return false;
    }
    let minutes = (minutes * 2).clamp(1, REWRITE_RETRY_MAX_MINUTES);
    state.aof_rewrite_retry.set((minutes, now + minutes * 60));
    warn!(
        "Background AOF rewrite has repeatedly failed and triggered the limit, will retry in {minutes} minutes"
    );
    true
}

/// Whether a rewrite is running (INFO aof_rewrite_in_progress).
pub fn rewrite_in_progress(server: &Server) -> bool {
    crate::persistence::running_child(server) == Some(crate::persistence::ChildKind::Aof)
}

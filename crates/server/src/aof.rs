//! The append-only file of a standalone server (`appendonly yes`), in
//! Redis 7's multi-part layout: `<dir>/<appenddirname>/` holds a base (an
//! RDB image, `<appendfilename>.<n>.base.rdb`), incremental files of the
//! writes since, as RESP commands (`<appendfilename>.<n>.incr.aof`), and a
//! manifest naming them in order (`<appendfilename>.manifest`), so
//! redis-server loads the folder too and Kvasir loads one redis-server
//! wrote.
//!
//! Each write Kvasir logs is preceded by an annotation line `#KV <ms>
//! <seed>` (Redis's loader skips lines starting with `#`): the time and
//! seed the write ran with. Replaying a command with its own time and seed
//! gives the state it gave then (the state machine is deterministic, as
//! every Raft replica relies on), so Kvasir logs what clients sent (EXPIRE
//! 10, SPOP, a script) rather than rewriting each into its effect.
//! Commands without an annotation (a file redis-server wrote) replay at the
//! time of loading. The encoding thresholds decide results too (when a
//! set converts, so which member SPOP picks; where a stream node ends, so
//! what XTRIM `~` removes), and CONFIG SET changes them outside the log:
//! so each incremental file states the thresholds its writes ran under
//! before its first write, and again whenever they change (`#KVLIMITS
//! name=value ...`); a replay runs each write under them and the config's
//! come back once the load ends.
//!
//! Writes go to the file before any reply leaves the server (the session
//! flushes the log first), so a process killed with -9 loses nothing it
//! answered; `appendfsync always` also fsyncs there, `everysec` once a
//! second off the data thread, `no` leaves it to the kernel.

use bytes::{Bytes, BytesMut};
use kvasir_core::{Ctx, EncodingLimits};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use tracing::info;

/// Why a cluster node refuses `appendonly yes`.
pub const NOT_IN_CLUSTER: &str = "appendonly yes is for a standalone server: a cluster node's writes are in its Raft log (run it with --wal fsync to have each on disk before it is acknowledged)";

/// `appendfsync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendFsync {
    Always,
    EverySec,
    No,
}

impl AppendFsync {
    pub fn parse(value: &str) -> Option<AppendFsync> {
        match value.to_ascii_lowercase().as_str() {
            "always" => Some(AppendFsync::Always),
            "everysec" => Some(AppendFsync::EverySec),
            "no" => Some(AppendFsync::No),
            _ => None,
        }
    }
}

/// Where the files live and how writes reach the disk.
#[derive(Clone, Debug)]
pub struct AofSettings {
    /// `<dir>/<appenddirname>`.
    pub folder: PathBuf,
    /// `appendfilename`.
    pub name: String,
    pub fsync: AppendFsync,
    /// `aof-timestamp-enabled`: a `#TS:<unix seconds>` line before the
    /// first write of each second, as Redis writes it (what
    /// `redis-check-aof --truncate-to-timestamp` cuts at).
    pub timestamps: bool,
}

/// A file the manifest names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestFile {
    pub name: String,
    pub seq: u64,
    /// `b` base, `i` incremental, `h` history (left from a rewrite).
    pub kind: char,
}

/// `<appendfilename>.manifest`: the files to load, base first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    pub files: Vec<ManifestFile>,
}

impl Manifest {
    /// Redis's format and checks (aof.c, aofLoadManifestFromFile): one
    /// `file <name> seq <n> type <b|i|h>` line per file, keys in any
    /// order, `#` comments; blank lines, lines of 1024 bytes or more, an
    /// empty manifest, a name with a path, two bases, incremental
    /// sequence numbers that do not increase and unknown types are errors.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        const LINE_MAX: usize = 1024;
        let mut files: Vec<ManifestFile> = Vec::new();
        if text.is_empty() {
            return Err("Found an empty AOF manifest".into());
        }
        let invalid = || "Invalid AOF manifest file format".to_string();
        let mut max_incr = 0;
        for line in text.split_inclusive('\n') {
            if line.starts_with('#') {
                continue;
            }
            if line.len() >= LINE_MAX || !line.ends_with('\n') {
                return Err("The AOF manifest file contains too long line".into());
            }
            let line = line.trim_matches(|c| " \t\r\n".contains(c));
            if line.is_empty() {
                return Err(invalid());
            }
            let words = kvasir_resp::parse::split_args(line.as_bytes()).ok_or_else(invalid)?;
            if words.len() < 6 || words.len() % 2 != 0 {
                return Err(invalid());
            }
            let (mut name, mut seq, mut kind) = (None, 0u64, None);
            for pair in words.chunks(2) {
                let value = String::from_utf8_lossy(&pair[1]).into_owned();
                match pair[0].to_ascii_lowercase().as_slice() {
                    b"file" => {
                        if value.contains('/') {
                            return Err("File can't be a path, just a filename".into());
                        }
                        name = Some(value)
                    }
                    // atoll: the leading digits, 0 for none.
                    b"seq" => {
                        let digits: String =
                            value.chars().take_while(|c| c.is_ascii_digit()).collect();
                        seq = digits.parse().unwrap_or(0);
                    }
                    b"type" => kind = value.chars().next(),
                    _ => {}
                }
            }
            let (Some(name), Some(kind)) = (name, kind) else {
                return Err(invalid());
            };
            if seq == 0 {
                return Err(invalid());
            }
            match kind {
                'b' if files.iter().any(|f| f.kind == 'b') => {
                    return Err("Found duplicate base file information".into())
                }
                'b' | 'h' => {}
                'i' => {
                    if seq <= max_incr {
                        return Err("Found a non-monotonic sequence number".into());
                    }
                    max_incr = seq;
                }
                _ => return Err("Unknown AOF file type".into()),
            }
            files.push(ManifestFile { name, seq, kind });
        }
        Ok(Manifest { files })
    }

    /// Names with spaces or other special bytes are quoted as Redis's
    /// sdscatrepr does, so that its loader splits the line back.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for f in &self.files {
            out.push_str(&format!(
                "file {} seq {} type {}\n",
                quote_name(&f.name),
                f.seq,
                f.kind
            ));
        }
        out
    }

    pub fn base(&self) -> Option<&ManifestFile> {
        self.files.iter().find(|f| f.kind == 'b')
    }

    pub fn incrs(&self) -> impl Iterator<Item = &ManifestFile> {
        self.files.iter().filter(|f| f.kind == 'i')
    }

    fn last_incr_seq(&self) -> u64 {
        self.incrs().map(|f| f.seq).max().unwrap_or(0)
    }
}

/// A file name as Redis's manifest writes it: as it is, or quoted as
/// `sdscatrepr` does when it has spaces or other special bytes.
fn quote_name(name: &str) -> String {
    let plain = name
        .bytes()
        .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\'' && b != b'\\');
    if plain {
        return name.to_string();
    }
    let mut out = String::new();
    crate::monitor::quote(name.as_bytes(), &mut out);
    out
}

fn base_name(name: &str, seq: u64) -> String {
    format!("{name}.{seq}.base.rdb")
}

fn incr_name(name: &str, seq: u64) -> String {
    format!("{name}.{seq}.incr.aof")
}

/// The incremental file `name`, for appending (emptied first with
/// `truncate`).
fn open_incr(settings: &AofSettings, name: &str, truncate: bool) -> Result<File, String> {
    let path = settings.folder.join(name);
    if truncate {
        File::create(&path).map_err(|e| format!("creating {name}: {e}"))?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("opening {name}: {e}"))
}

/// Where a log turned on at run time writes until its first base is in
/// place (Redis's `temp-<appendfilename>.incr`).
fn temp_incr_name(settings: &AofSettings) -> String {
    format!("temp-{}.incr", settings.name)
}

fn temp_incr_path(settings: &AofSettings) -> PathBuf {
    settings.folder.join(temp_incr_name(settings))
}

fn manifest_path(settings: &AofSettings) -> PathBuf {
    settings.folder.join(format!("{}.manifest", settings.name))
}

/// A threshold's field in the limits.
type FieldOf = for<'a> fn(&'a mut EncodingLimits) -> LimitField<'a>;

/// The thresholds a `#KVLIMITS` line records, by their Redis names.
const LOGGED_LIMITS: [(&str, FieldOf); 12] = [
    ("hash-max-listpack-entries", |l| {
        LimitField::Size(&mut l.hash_max_listpack_entries)
    }),
    ("hash-max-listpack-value", |l| {
        LimitField::Size(&mut l.hash_max_listpack_value)
    }),
    ("set-max-intset-entries", |l| {
        LimitField::Size(&mut l.set_max_intset_entries)
    }),
    ("set-max-listpack-entries", |l| {
        LimitField::Size(&mut l.set_max_listpack_entries)
    }),
    ("set-max-listpack-value", |l| {
        LimitField::Size(&mut l.set_max_listpack_value)
    }),
    ("zset-max-listpack-entries", |l| {
        LimitField::Size(&mut l.zset_max_listpack_entries)
    }),
    ("zset-max-listpack-value", |l| {
        LimitField::Size(&mut l.zset_max_listpack_value)
    }),
    ("list-max-listpack-size", |l| {
        LimitField::Signed(&mut l.list_max_listpack_size)
    }),
    ("list-compress-depth", |l| {
        LimitField::Depth(&mut l.list_compress_depth)
    }),
    ("stream-node-max-entries", |l| {
        LimitField::Count(&mut l.stream_node_max_entries)
    }),
    ("stream-node-max-bytes", |l| {
        LimitField::Count(&mut l.stream_node_max_bytes)
    }),
    ("script-max-instructions", |l| {
        LimitField::Count(&mut l.script_max_instructions)
    }),
];

enum LimitField<'a> {
    Size(&'a mut usize),
    Signed(&'a mut i64),
    Depth(&'a mut u32),
    Count(&'a mut u64),
}

impl LimitField<'_> {
    fn render(&self) -> String {
        match self {
            LimitField::Size(v) => v.to_string(),
            LimitField::Signed(v) => v.to_string(),
            LimitField::Depth(v) => v.to_string(),
            LimitField::Count(v) => v.to_string(),
        }
    }

    fn parse(self, text: &str) -> Option<()> {
        match self {
            LimitField::Size(v) => *v = text.parse().ok()?,
            LimitField::Signed(v) => *v = text.parse().ok()?,
            LimitField::Depth(v) => *v = text.parse().ok()?,
            LimitField::Count(v) => *v = text.parse().ok()?,
        }
        Some(())
    }
}

/// Every threshold of `l` by its Redis name, with its value as CONFIG SET
/// takes it.
pub(crate) fn limit_settings(l: &EncodingLimits) -> impl Iterator<Item = (&'static str, String)> {
    let mut copy = *l;
    LOGGED_LIMITS
        .iter()
        .map(move |(name, field)| (*name, field(&mut copy).render()))
}

/// The `#KVLIMITS` line of `l`: the thresholds that differ from Redis's
/// defaults (a bare `#KVLIMITS` says all are the defaults).
fn limits_line(l: &EncodingLimits) -> String {
    let mut line = String::from("#KVLIMITS");
    let defaults = limit_settings(&EncodingLimits::default());
    for ((name, value), (_, default)) in limit_settings(l).zip(defaults) {
        if value != default {
            line.push(' ');
            line.push_str(name);
            line.push('=');
            line.push_str(&value);
        }
    }
    line.push_str("\r\n");
    line
}

/// The thresholds a `#KVLIMITS` line states (Redis's defaults for those
/// it does not name); None if a value is malformed. Names this build does
/// not know are skipped (a later build's file).
fn parse_limits(text: &[u8]) -> Option<EncodingLimits> {
    let text = std::str::from_utf8(text).ok()?;
    let mut l = EncodingLimits::default();
    for pair in text.split_whitespace() {
        let (name, value) = pair.split_once('=')?;
        if let Some((_, field)) = LOGGED_LIMITS.iter().find(|(n, _)| *n == name) {
            field(&mut l).parse(value)?;
        }
    }
    Some(l)
}

/// One write as the log replays it.
#[derive(Debug, PartialEq)]
pub enum Replayed {
    /// The thresholds the writes after it ran under (a `#KVLIMITS` line).
    Limits(EncodingLimits),
    Command {
        ctx: Option<Ctx>,
        db: usize,
        args: Vec<Bytes>,
    },
    /// MULTI ... EXEC.
    Block {
        ctx: Option<Ctx>,
        db: usize,
        cmds: Vec<Vec<Bytes>>,
    },
}

/// Reads the writes of one incremental file in order. A last command cut
/// short (a crash in the middle of a write) ends the file: its length up
/// to the last whole command is returned for the caller to truncate to,
/// as Redis does with `aof-load-truncated yes`.
pub fn replay_file(
    buf: BytesMut,
    db: &mut usize,
    mut each: impl FnMut(Replayed) -> Result<(), String>,
) -> Result<Option<usize>, String> {
    let mut reader = AofReader::new(buf);
    loop {
        match reader.next_write(db)? {
            AofRead::Write(write) => each(write)?,
            AofRead::End(cut) => return Ok(cut),
        }
    }
}

/// What [`AofReader::next_write`] found.
pub enum AofRead {
    Write(Replayed),
    /// The file's end; with the length of its whole writes when the last
    /// one was cut short.
    End(Option<usize>),
}

/// The writes of one file, one at a time (a start replays them in steps
/// between which clients are answered).
pub struct AofReader {
    buf: BytesMut,
    total: usize,
    limits: kvasir_resp::parse::Limits,
    ctx: Option<Ctx>,
    block: Option<(Option<Ctx>, usize, Vec<Vec<Bytes>>)>,
    /// The end of the last whole write: an open MULTI is not one.
    whole: usize,
}

impl AofReader {
    pub fn new(buf: BytesMut) -> AofReader {
        AofReader {
            total: buf.len(),
            buf,
            limits: kvasir_resp::parse::Limits::default(),
            ctx: None,
            block: None,
            whole: 0,
        }
    }

    /// Bytes of the file read so far.
    pub fn position(&self) -> usize {
        self.total - self.buf.len()
    }

    /// The next write; `db` follows the file's SELECTs.
    pub fn next_write(&mut self, db: &mut usize) -> Result<AofRead, String> {
        let buf = &mut self.buf;
        loop {
            if buf.is_empty() {
                return Ok(AofRead::End(
                    (self.whole < self.total).then_some(self.whole),
                ));
            }
            let at = self.total - buf.len();
            if buf[0] == b'#' {
                let Some(end) = buf.iter().position(|&c| c == b'\n') else {
                    return Ok(AofRead::End(Some(self.whole)));
                };
                let line = buf.split_to(end + 1);
                if let Some(stamp) = line.strip_prefix(b"#KV ") {
                    self.ctx = Some(parse_stamp(stamp).ok_or_else(|| bad_format(at))?);
                } else if let Some(text) = line.strip_prefix(b"#KVLIMITS") {
                    if self.block.is_some() {
                        return Err(bad_format(at));
                    }
                    let limits = parse_limits(text).ok_or_else(|| bad_format(at))?;
                    return Ok(AofRead::Write(Replayed::Limits(limits)));
                }
                continue;
            }
            if buf[0] != b'*' {
                return Err(bad_format(at));
            }
            let args = match kvasir_resp::parse::parse_command(buf, &self.limits) {
                Ok(kvasir_resp::parse::Parsed::Command(args)) if !args.is_empty() => args,
                Ok(kvasir_resp::parse::Parsed::Command(_)) => return Err(bad_format(at)),
                Ok(kvasir_resp::parse::Parsed::Incomplete { .. }) => {
                    return Ok(AofRead::End(Some(self.whole)))
                }
                Err(_) => return Err(bad_format(at)),
            };
            let name = args[0].to_ascii_lowercase();
            let write = match name.as_slice() {
                b"select" if self.block.is_none() => {
                    *db = std::str::from_utf8(args.get(1).map(|a| &a[..]).unwrap_or(b""))
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| bad_format(at))?;
                    None
                }
                b"multi" => {
                    self.block = Some((self.ctx.take(), *db, Vec::new()));
                    None
                }
                b"exec" => {
                    let (ctx, db, cmds) = self.block.take().ok_or_else(|| bad_format(at))?;
                    Some(Replayed::Block { ctx, db, cmds })
                }
                _ => match self.block.as_mut() {
                    Some((_, _, cmds)) => {
                        cmds.push(args);
                        None
                    }
                    None => Some(Replayed::Command {
                        ctx: self.ctx.take(),
                        db: *db,
                        args,
                    }),
                },
            };
            if self.block.is_none() {
                self.whole = self.total - buf.len();
            }
            if let Some(write) = write {
                return Ok(AofRead::Write(write));
            }
        }
    }
}

fn parse_stamp(stamp: &[u8]) -> Option<Ctx> {
    let text = std::str::from_utf8(stamp).ok()?.trim();
    let (ms, seed) = text.split_once(' ')?;
    Some(Ctx {
        now_ms: ms.parse().ok()?,
        seed: seed.parse().ok()?,
    })
}

fn bad_format(offset: usize) -> String {
    format!("Bad file format reading the append only file (at byte {offset}) in")
}

/// The log the data thread appends to.
pub struct AofLog {
    settings: AofSettings,
    manifest: Manifest,
    /// The last incremental file, which writes go to.
    file: File,
    /// Its length after the last whole write: a write that failed half
    /// way is cut back to it, so a retry does not leave half a command.
    file_len: u64,
    /// Logged, not written to the file yet.
    buf: Vec<u8>,
    /// The database the file's last SELECT chose.
    db: Option<usize>,
    /// The thresholds the file's last `#KVLIMITS` line states.
    limits_logged: Option<EncodingLimits>,
    /// The second of the last `#TS:` annotation.
    last_timestamp: u64,
    /// Bytes written since the last fsync.
    unsynced: bool,
    /// The last write or fsync error, until one succeeds.
    pub error: Option<String>,
    /// The incremental files a running rewrite's base will replace.
    rewrite_from: Option<u64>,
    /// Turned on at run time and waiting for its first base (Redis's
    /// AOF_WAIT_REWRITE): writes go to `temp-<name>.incr`, which no
    /// manifest names; the folder's manifest is still the old one.
    waiting: bool,
    /// The log's size after it was created, loaded or last rewritten:
    /// what `auto-aof-rewrite-percentage` measures growth against.
    pub rewrite_base_size: u64,
}

/// A base image to write: the rewrite that takes it and what it replaces.
pub struct PendingBase {
    /// Written (atomically) by the caller; the manifest names it only
    /// once the rewrite finishes.
    pub path: PathBuf,
    name: String,
    seq: u64,
}

impl AofLog {
    /// Opens the folder's manifest, if there is one.
    pub fn read_manifest(settings: &AofSettings) -> Result<Option<Manifest>, String> {
        match std::fs::read_to_string(manifest_path(settings)) {
            Ok(text) => Manifest::parse(&text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("reading the AOF manifest: {e}")),
        }
    }

    /// Writes `manifest` (atomically) into the folder.
    pub fn write_manifest(settings: &AofSettings, manifest: &Manifest) -> Result<(), String> {
        crate::persistence::write_file(&manifest_path(settings), manifest.render().as_bytes())
            .map_err(|e| format!("writing the AOF manifest: {e}"))
    }

    /// The files of `manifest` in loading order: the base (if any), then
    /// each incremental file.
    pub fn files(settings: &AofSettings, manifest: &Manifest) -> (Option<PathBuf>, Vec<PathBuf>) {
        let base = manifest.base().map(|f| settings.folder.join(&f.name));
        let incrs = manifest
            .incrs()
            .map(|f| settings.folder.join(&f.name))
            .collect();
        (base, incrs)
    }

    /// Continues the log a loaded manifest describes: writes go to its
    /// last incremental file (created if the manifest has none).
    pub fn resume(settings: AofSettings, mut manifest: Manifest) -> Result<AofLog, String> {
        let seq = manifest.last_incr_seq();
        let name = if seq == 0 {
            let name = incr_name(&settings.name, 1);
            manifest.files.push(ManifestFile {
                name: name.clone(),
                seq: 1,
                kind: 'i',
            });
            AofLog::write_manifest(&settings, &manifest)?;
            name
        } else {
            incr_name(&settings.name, seq)
        };
        let file = open_incr(&settings, &name, false)?;
        let file_len = file
            .metadata()
            .map_err(|e| format!("opening {name}: {e}"))?
            .len();
        let mut log = AofLog {
            settings,
            manifest,
            file,
            file_len,
            buf: Vec::new(),
            db: None,
            limits_logged: None,
            last_timestamp: 0,
            unsynced: false,
            error: None,
            rewrite_from: None,
            waiting: false,
            rewrite_base_size: 0,
        };
        log.rewrite_base_size = log.size();
        Ok(log)
    }

    /// A rewrite while the log is off (BGREWRITEAOF with `appendonly no`,
    /// as Redis 7 does it): the new base's name, after the folder's last
    /// base, for the caller to write; [`AofLog::install_base_only`] then
    /// makes it the folder's only file.
    pub fn base_only_target(settings: &AofSettings) -> Result<PendingBase, String> {
        std::fs::create_dir_all(&settings.folder)
            .map_err(|e| format!("creating {}: {e}", settings.folder.display()))?;
        let old = AofLog::read_manifest(settings)
            .ok()
            .flatten()
            .unwrap_or_default();
        let seq = old.base().map(|b| b.seq).unwrap_or(0) + 1;
        let name = base_name(&settings.name, seq);
        Ok(PendingBase {
            path: settings.folder.join(&name),
            name,
            seq,
        })
    }

    /// The manifest names only `base` (written); the files it listed
    /// before are deleted.
    pub fn install_base_only(settings: &AofSettings, base: PendingBase) -> Result<(), String> {
        let old = AofLog::read_manifest(settings)
            .ok()
            .flatten()
            .unwrap_or_default();
        let manifest = Manifest {
            files: vec![ManifestFile {
                name: base.name,
                seq: base.seq,
                kind: 'b',
            }],
        };
        AofLog::write_manifest(settings, &manifest)?;
        for f in old
            .files
            .iter()
            .filter(|f| f.seq != base.seq || f.kind != 'b')
        {
            let _ = std::fs::remove_file(settings.folder.join(&f.name));
        }
        Ok(())
    }

    /// A log turned on at run time (CONFIG SET appendonly yes), as Redis
    /// 7 starts one: writes go to a temporary incremental file while a
    /// rewrite writes the first base (see [`AofLog::begin_rewrite`]); only
    /// when that base is written does the manifest name the two. Until
    /// then the folder keeps what it held.
    pub fn start_waiting(settings: AofSettings) -> Result<AofLog, String> {
        std::fs::create_dir_all(&settings.folder)
            .map_err(|e| format!("creating {}: {e}", settings.folder.display()))?;
        let manifest = AofLog::read_manifest(&settings)
            .ok()
            .flatten()
            .unwrap_or_default();
        let path = temp_incr_path(&settings);
        // Emptied, then opened for appending: writes after an emptying
        // (set_len) start at its end.
        let file = File::create(&path)
            .and_then(|_| OpenOptions::new().append(true).open(&path))
            .map_err(|e| format!("creating {}: {e}", path.display()))?;
        Ok(AofLog {
            settings,
            manifest,
            file,
            file_len: 0,
            buf: Vec::new(),
            db: None,
            limits_logged: None,
            last_timestamp: 0,
            unsynced: false,
            error: None,
            rewrite_from: None,
            waiting: true,
            rewrite_base_size: 0,
        })
    }

    /// Whether the log still waits for its first base.
    pub fn is_waiting(&self) -> bool {
        self.waiting
    }

    /// The log is turned off: a waiting log's temporary file goes.
    pub fn stop(self) {
        if self.waiting {
            let _ = std::fs::remove_file(temp_incr_path(&self.settings));
        }
    }

    /// Creates the folder with `base` (an RDB image of the data now) as
    /// its base and an empty incremental file: what `appendonly yes`
    /// starts from on a server without a log. Files of an older log in the
    /// folder are replaced (their sequence numbers continue).
    pub fn create(settings: AofSettings, base: &[u8]) -> Result<AofLog, String> {
        std::fs::create_dir_all(&settings.folder)
            .map_err(|e| format!("creating {}: {e}", settings.folder.display()))?;
        let old = AofLog::read_manifest(&settings)
            .ok()
            .flatten()
            .unwrap_or_default();
        let base_seq = old.base().map(|b| b.seq).unwrap_or(0) + 1;
        let bname = base_name(&settings.name, base_seq);
        crate::persistence::write_file(&settings.folder.join(&bname), base)
            .map_err(|e| format!("writing {bname}: {e}"))?;
        let incr_seq = old.last_incr_seq() + 1;
        let iname = incr_name(&settings.name, incr_seq);
        File::create(settings.folder.join(&iname)).map_err(|e| format!("creating {iname}: {e}"))?;
        let manifest = Manifest {
            files: vec![
                ManifestFile {
                    name: bname,
                    seq: base_seq,
                    kind: 'b',
                },
                ManifestFile {
                    name: iname,
                    seq: incr_seq,
                    kind: 'i',
                },
            ],
        };
        AofLog::write_manifest(&settings, &manifest)?;
        for f in &old.files {
            let _ = std::fs::remove_file(settings.folder.join(&f.name));
        }
        AofLog::resume(settings, manifest)
    }

    pub fn fsync_policy(&self) -> AppendFsync {
        self.settings.fsync
    }

    pub fn set_fsync_policy(&mut self, fsync: AppendFsync) {
        self.settings.fsync = fsync;
    }

    /// `aof-timestamp-enabled` changed (CONFIG SET).
    pub fn set_timestamps(&mut self, on: bool) {
        self.settings.timestamps = on;
    }

    /// What a write ran with, before it: the second (`#TS:`, which Redis's
    /// tools look for first), the thresholds if the file does not state
    /// them yet, the database, the time and seed.
    fn stamp(&mut self, ctx: &Ctx, db: usize, limits: &EncodingLimits) {
        let second = ctx.now_ms / 1000;
        if self.settings.timestamps && second > self.last_timestamp {
            let _ = write!(self.buf, "#TS:{second}\r\n");
            self.last_timestamp = second;
        }
        if self.limits_logged.as_ref() != Some(limits) {
            self.buf.extend_from_slice(limits_line(limits).as_bytes());
            self.limits_logged = Some(*limits);
        }
        if self.db != Some(db) {
            push_command(&mut self.buf, &[b"SELECT", db.to_string().as_bytes()]);
            self.db = Some(db);
        }
        let _ = writeln!(self.buf, "#KV {} {}\r", ctx.now_ms, ctx.seed);
    }

    /// Logs one command that ran with `ctx` in `db` under `limits`.
    pub fn command(&mut self, ctx: &Ctx, db: usize, limits: &EncodingLimits, args: &[Bytes]) {
        self.stamp(ctx, db, limits);
        push_command(&mut self.buf, args);
    }

    /// Logs a block of commands that ran as one (EXEC).
    pub fn block(&mut self, ctx: &Ctx, db: usize, limits: &EncodingLimits, cmds: &[Vec<Bytes>]) {
        self.stamp(ctx, db, limits);
        push_command(&mut self.buf, &[b"MULTI"]);
        for args in cmds {
            push_command(&mut self.buf, args);
        }
        push_command(&mut self.buf, &[b"EXEC"]);
    }

    /// Whether something is logged and not written yet.
    pub fn has_pending(&self) -> bool {
        !self.buf.is_empty() || (self.unsynced && self.settings.fsync == AppendFsync::Always)
    }

    /// Writes what is logged to the file (before replies go out), and
    /// with `appendfsync always` fsyncs it.
    pub fn flush(&mut self) -> Result<(), String> {
        if !self.buf.is_empty() {
            if let Err(e) = self.file.write_all(&self.buf) {
                let _ = self.file.set_len(self.file_len);
                let why = format!("Errors writing to the AOF file: {e}");
                self.error = Some(why.clone());
                return Err(why);
            }
            self.file_len += self.buf.len() as u64;
            self.buf.clear();
            if self.settings.fsync != AppendFsync::Always {
                self.error = None;
            }
            self.unsynced = true;
        }
        if self.settings.fsync == AppendFsync::Always && self.unsynced {
            self.sync()?;
        }
        Ok(())
    }

    /// Fsyncs what was written.
    pub fn sync(&mut self) -> Result<(), String> {
        match self.file.sync_data() {
            Ok(()) => {
                self.unsynced = false;
                self.error = None;
                Ok(())
            }
            Err(e) => {
                let why = format!("Errors writing to the AOF file: {e}");
                self.error = Some(why.clone());
                Err(why)
            }
        }
    }

    /// For `everysec`: a handle on the file to fsync off the data thread,
    /// if anything was written since the last fsync.
    pub fn take_unsynced(&mut self) -> Option<File> {
        if !self.unsynced {
            return None;
        }
        let file = self.file.try_clone().ok()?;
        self.unsynced = false;
        Some(file)
    }

    /// Starts a rewrite (BGREWRITEAOF): writes from now on go to a new
    /// incremental file, listed in the manifest after the old ones, so a
    /// crash before the new base is in place loses nothing. The caller
    /// writes the base image taken at this instant to the path returned,
    /// then calls [`AofLog::finish_rewrite`].
    pub fn begin_rewrite(&mut self) -> Result<PendingBase, String> {
        if self.rewrite_from.is_some() {
            return Err("Background append only file rewriting already in progress".into());
        }
        if self.waiting {
            return self.begin_first_base();
        }
        self.flush()?;
        self.sync()?;
        let seq = self.manifest.last_incr_seq() + 1;
        let name = incr_name(&self.settings.name, seq);
        // Empty, even if a rewrite that crashed left one of that name.
        let file = open_incr(&self.settings, &name, true)?;
        let mut manifest = self.manifest.clone();
        manifest.files.push(ManifestFile {
            name,
            seq,
            kind: 'i',
        });
        AofLog::write_manifest(&self.settings, &manifest)?;
        self.manifest = manifest;
        self.file = file;
        self.file_len = 0;
        self.db = None;
        self.limits_logged = None;
        self.rewrite_from = Some(seq);
        let base_seq = self.manifest.base().map(|b| b.seq).unwrap_or(0) + 1;
        let name = base_name(&self.settings.name, base_seq);
        Ok(PendingBase {
            path: self.settings.folder.join(&name),
            name,
            seq: base_seq,
        })
    }

    /// The first base of a waiting log: what the temporary file holds is
    /// in the data the base is taken from, so it starts empty again.
    fn begin_first_base(&mut self) -> Result<PendingBase, String> {
        self.buf.clear();
        self.file
            .set_len(0)
            .map_err(|e| format!("emptying the temp incr aof file: {e}"))?;
        self.file_len = 0;
        self.db = None;
        self.limits_logged = None;
        self.unsynced = false;
        self.rewrite_from = Some(self.manifest.last_incr_seq() + 1);
        let seq = self.manifest.base().map(|b| b.seq).unwrap_or(0) + 1;
        let name = base_name(&self.settings.name, seq);
        Ok(PendingBase {
            path: self.settings.folder.join(&name),
            name,
            seq,
        })
    }

    /// A waiting log's first base is written: the temporary file becomes
    /// the incremental file after it, the manifest names the two, and the
    /// folder's older files are deleted. When it failed the temporary
    /// file is emptied (Redis deletes it) and the log goes on waiting.
    fn finish_first_base(
        &mut self,
        base: PendingBase,
        seq: u64,
        written: bool,
    ) -> Result<(), String> {
        if !written {
            let _ = std::fs::remove_file(&base.path);
            info!(
                "Removing the temp incr aof file {} in the background",
                temp_incr_name(&self.settings)
            );
            let _ = self.file.set_len(0);
            self.file_len = 0;
            return Ok(());
        }
        self.flush()?;
        self.sync()?;
        let name = incr_name(&self.settings.name, seq);
        std::fs::rename(
            temp_incr_path(&self.settings),
            self.settings.folder.join(&name),
        )
        .map_err(|e| format!("renaming the temp incr aof file: {e}"))?;
        let manifest = Manifest {
            files: vec![
                ManifestFile {
                    name: base.name,
                    seq: base.seq,
                    kind: 'b',
                },
                ManifestFile {
                    name,
                    seq,
                    kind: 'i',
                },
            ],
        };
        AofLog::write_manifest(&self.settings, &manifest)?;
        let old = std::mem::replace(&mut self.manifest, manifest);
        for f in &old.files {
            let _ = std::fs::remove_file(self.settings.folder.join(&f.name));
        }
        self.waiting = false;
        self.rewrite_base_size = self.size();
        Ok(())
    }

    /// Ends a rewrite: on success the new base replaces the old base and
    /// the incremental files before the rewrite began, which are deleted.
    pub fn finish_rewrite(&mut self, base: PendingBase, written: bool) -> Result<(), String> {
        let Some(from) = self.rewrite_from.take() else {
            return Ok(());
        };
        if self.waiting {
            return self.finish_first_base(base, from, written);
        }
        if !written {
            let _ = std::fs::remove_file(&base.path);
            return Ok(());
        }
        let old: Vec<ManifestFile> = self
            .manifest
            .files
            .iter()
            .filter(|f| f.kind == 'b' || (f.kind == 'i' && f.seq < from) || f.kind == 'h')
            .cloned()
            .collect();
        let mut files = vec![ManifestFile {
            name: base.name,
            seq: base.seq,
            kind: 'b',
        }];
        files.extend(
            self.manifest
                .incrs()
                .filter(|f| f.seq >= from)
                .cloned()
                .collect::<Vec<_>>(),
        );
        let manifest = Manifest { files };
        AofLog::write_manifest(&self.settings, &manifest)?;
        self.manifest = manifest;
        for f in old {
            let _ = std::fs::remove_file(self.settings.folder.join(&f.name));
        }
        self.rewrite_base_size = self.size();
        Ok(())
    }

    /// Whether the log grew enough for an automatic rewrite: past
    /// `min_size` bytes and by `percentage` % of its size after the last
    /// rewrite (Redis's auto-aof-rewrite-percentage and -min-size; a
    /// percentage of 0 never rewrites).
    pub fn wants_rewrite(&self, percentage: u64, min_size: u64) -> bool {
        if percentage == 0 || self.rewrite_in_progress() || self.waiting {
            return false;
        }
        let size = self.size();
        if size <= min_size {
            return false;
        }
        let base = self.rewrite_base_size.max(1);
        (size.saturating_mul(100) / base).saturating_sub(100) >= percentage
    }

    pub fn rewrite_in_progress(&self) -> bool {
        self.rewrite_from.is_some()
    }

    /// Bytes of the files the manifest names (INFO aof_current_size).
    pub fn size(&self) -> u64 {
        self.manifest
            .files
            .iter()
            .filter_map(|f| std::fs::metadata(self.settings.folder.join(&f.name)).ok())
            .map(|m| m.len())
            .sum::<u64>()
            + self.buf.len() as u64
    }

    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

/// Appends `args` as a RESP array of bulk strings.
fn push_command<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    let _ = write!(out, "*{}\r\n", args.len());
    for a in args {
        let a = a.as_ref();
        let _ = write!(out, "${}\r\n", a.len());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn manifest_round_trip_and_errors() {
        let text = "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(m.render(), text);
        assert_eq!(m.base().unwrap().name, "appendonly.aof.1.base.rdb");
        assert!(Manifest::parse("file x seq one type b\n").is_err());
        assert!(Manifest::parse("file ../x seq 1 type i\n").is_err());
        assert!(Manifest::parse("file a seq 1 type b\nfile b seq 2 type b\n").is_err());
        // Keys in any order, comments skipped (Redis writes and reads both).
        let m = Manifest::parse("# c\ntype i seq 3 file f.3.incr.aof\n").unwrap();
        assert_eq!(m.incrs().next().unwrap().seq, 3);
        // Redis's other refusals.
        let err = |t: &str| Manifest::parse(t).unwrap_err();
        assert_eq!(err(""), "Found an empty AOF manifest");
        assert_eq!(
            err("file a seq 1 type b\n\n"),
            "Invalid AOF manifest file format"
        );
        assert_eq!(err("file a seq 1 type x\n"), "Unknown AOF file type");
        assert_eq!(
            err("file a seq 2 type i\nfile b seq 1 type i\n"),
            "Found a non-monotonic sequence number"
        );
        let long = format!("file {} seq 1 type i\n", "a".repeat(1100));
        assert_eq!(err(&long), "The AOF manifest file contains too long line");
        // A name with spaces is quoted and read back.
        let spaced = Manifest {
            files: vec![ManifestFile {
                name: "my file.1.incr.aof".into(),
                seq: 1,
                kind: 'i',
            }],
        };
        assert_eq!(
            spaced.render(),
            "file \"my file.1.incr.aof\" seq 1 type i\n"
        );
        assert_eq!(Manifest::parse(&spaced.render()).unwrap(), spaced);
    }

    /// A new log in a fresh folder named after `test`.
    fn new_log(test: &str, timestamps: bool) -> (std::path::PathBuf, AofSettings, AofLog) {
        let dir = std::env::temp_dir().join(format!("kvasir-aof-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let settings = AofSettings {
            folder: dir.clone(),
            name: "appendonly.aof".into(),
            fsync: AppendFsync::Always,
            timestamps,
        };
        let log = AofLog::create(settings.clone(), b"REDIS0009").unwrap();
        (dir, settings, log)
    }

    #[test]
    fn each_file_states_the_thresholds_its_writes_ran_under() {
        let (dir, settings, mut log) = new_log("limits", false);
        let t = Ctx { now_ms: 5, seed: 9 };
        let defaults = EncodingLimits::default();
        let mut small = defaults;
        small.stream_node_max_entries = 1;
        small.set_max_intset_entries = 3;
        small.list_max_listpack_size = -5;
        for limits in [defaults, defaults, small, small, defaults] {
            log.command(&t, 0, &limits, &[b("XADD"), b("s"), b("*"), b("f"), b("v")]);
        }
        log.flush().unwrap();
        let m = AofLog::read_manifest(&settings).unwrap().unwrap();
        let (_, incrs) = AofLog::files(&settings, &m);
        let bytes = std::fs::read(&incrs[0]).unwrap();
        // The defaults need no names; a change names what differs.
        assert!(bytes.starts_with(b"#KVLIMITS\r\n"));
        let small_line = "#KVLIMITS set-max-intset-entries=3 list-max-listpack-size=-5 stream-node-max-entries=1\r\n";
        assert!(String::from_utf8_lossy(&bytes).contains(small_line));
        let mut seen = Vec::new();
        replay_file(BytesMut::from(&bytes[..]), &mut 0, |r| {
            seen.push(match r {
                Replayed::Limits(l) => Some(l),
                _ => None,
            });
            Ok(())
        })
        .unwrap();
        // Stated first, then only where they changed.
        let want = [
            Some(defaults),
            None,
            None,
            Some(small),
            None,
            None,
            Some(defaults),
            None,
        ];
        assert_eq!(seen, want);
        // A line inside MULTI, or with a value that is not a number, is a
        // damaged file; a name this build does not know is skipped.
        let bad = b"*1\r\n$5\r\nMULTI\r\n#KVLIMITS list-compress-depth=1\r\n";
        assert!(replay_file(BytesMut::from(&bad[..]), &mut 0, |_| Ok(())).is_err());
        let bad = b"#KVLIMITS stream-node-max-entries=x\r\n";
        assert!(replay_file(BytesMut::from(&bad[..]), &mut 0, |_| Ok(())).is_err());
        let mut later = Vec::new();
        let newer = b"#KVLIMITS future-threshold=3 list-compress-depth=2\r\n";
        replay_file(BytesMut::from(&newer[..]), &mut 0, |r| {
            later.push(r);
            Ok(())
        })
        .unwrap();
        let mut depth_2 = defaults;
        depth_2.list_compress_depth = 2;
        assert_eq!(later, [Replayed::Limits(depth_2)]);
        // A rewrite's new file states them again before its first write.
        let _ = log.begin_rewrite();
        log.command(&t, 0, &defaults, &[b("DEL"), b("s")]);
        log.flush().unwrap();
        let m = AofLog::read_manifest(&settings).unwrap().unwrap();
        let (_, incrs) = AofLog::files(&settings, &m);
        let newest = std::fs::read(incrs.last().unwrap()).unwrap();
        assert!(
            newest.starts_with(b"#KVLIMITS\r\n"),
            "{:?}",
            String::from_utf8_lossy(&newest)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn logged_writes_replay_with_their_time_and_seed() {
        let (dir, settings, mut log) = new_log("unit", true);
        let t1 = Ctx {
            now_ms: 1000,
            seed: 7,
        };
        let limits = EncodingLimits::default();
        log.command(&t1, 0, &limits, &[b("SET"), b("k"), b("v")]);
        log.block(
            &t1,
            2,
            &limits,
            &[vec![b("INCR"), b("n")], vec![b("SPOP"), b("s")]],
        );
        log.command(&t1, 2, &limits, &[b("DEL"), b("k")]);
        log.flush().unwrap();
        let m = AofLog::read_manifest(&settings).unwrap().unwrap();
        let (base, incrs) = AofLog::files(&settings, &m);
        assert_eq!(std::fs::read(base.unwrap()).unwrap(), b"REDIS0009");
        let bytes = std::fs::read(&incrs[0]).unwrap();
        // aof-timestamp-enabled: one `#TS:` line for the second, first,
        // as Redis writes it; the replay skips it.
        assert!(bytes.starts_with(b"#TS:1\r\n"));
        assert_eq!(bytes.windows(4).filter(|w| w == b"#TS:").count(), 1);
        let mut seen = Vec::new();
        let mut db = 0;
        let cut = replay_file(BytesMut::from(&bytes[..]), &mut db, |r| {
            seen.push(r);
            Ok(())
        })
        .unwrap();
        assert_eq!(cut, None);
        // The thresholds the writes ran under come first (after `#TS:`).
        assert_eq!(seen.len(), 4);
        assert_eq!(seen[0], Replayed::Limits(EncodingLimits::default()));
        assert_eq!(
            seen[2],
            Replayed::Block {
                ctx: Some(t1),
                db: 2,
                cmds: vec![vec![b("INCR"), b("n")], vec![b("SPOP"), b("s")]],
            }
        );
        assert_eq!(
            seen[3],
            Replayed::Command {
                ctx: Some(t1),
                db: 2,
                args: vec![b("DEL"), b("k")],
            }
        );
        // A write cut short ends the file at the last whole one.
        let mut cut_bytes = bytes.clone();
        cut_bytes.extend_from_slice(b"#KV 1 2\r\n*3\r\n$3\r\nSET\r\n$1\r\nk");
        let mut n = 0;
        let cut = replay_file(BytesMut::from(&cut_bytes[..]), &mut 0, |_| {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!((cut, n), (Some(bytes.len()), 4));
        // So does an open MULTI.
        let mut open = bytes.clone();
        open.extend_from_slice(b"*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n");
        assert_eq!(
            replay_file(BytesMut::from(&open[..]), &mut 0, |_| Ok(())).unwrap(),
            Some(bytes.len())
        );
        // Garbage is an error, not a silent stop.
        assert!(replay_file(BytesMut::from(&b"hello\r\n"[..]), &mut 0, |_| Ok(())).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_rewrite_replaces_the_base_and_the_older_files() {
        let dir = std::env::temp_dir().join(format!("kvasir-aof-rw-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let settings = AofSettings {
            folder: dir.clone(),
            name: "appendonly.aof".into(),
            fsync: AppendFsync::No,
            timestamps: false,
        };
        let ctx = Ctx { now_ms: 1, seed: 1 };
        let mut log = AofLog::create(settings.clone(), b"BASE1").unwrap();
        log.command(
            &ctx,
            0,
            &EncodingLimits::default(),
            &[b("SET"), b("a"), b("1")],
        );
        let pending = log.begin_rewrite().unwrap();
        assert!(log.begin_rewrite().is_err());
        log.command(
            &ctx,
            0,
            &EncodingLimits::default(),
            &[b("SET"), b("b"), b("2")],
        );
        log.flush().unwrap();
        // Before the base is in place the manifest has both files.
        let m = AofLog::read_manifest(&settings).unwrap().unwrap();
        assert_eq!(m.incrs().count(), 2);
        std::fs::write(&pending.path, b"BASE2").unwrap();
        log.finish_rewrite(pending, true).unwrap();
        let m = AofLog::read_manifest(&settings).unwrap().unwrap();
        let (base, incrs) = AofLog::files(&settings, &m);
        assert_eq!(std::fs::read(base.unwrap()).unwrap(), b"BASE2");
        assert_eq!(incrs.len(), 1);
        assert!(String::from_utf8_lossy(&std::fs::read(&incrs[0]).unwrap()).contains("$1\r\nb\r\n"));
        assert!(!dir.join("appendonly.aof.1.base.rdb").exists());
        assert!(!dir.join("appendonly.aof.1.incr.aof").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

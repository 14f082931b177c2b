//! Whole RDB files, as redis-server 7.0 writes them (version 10) and reads
//! them (versions up to 11, Redis 7.2's): the header, auxiliary fields,
//! one section per non-empty database (SELECTDB, RESIZEDB), each key with
//! its expiry, then EOF and the CRC64 of everything before. Values use the
//! encodings of DUMP/RESTORE ([`crate::rdb`]). This is how a standalone
//! server snapshots (SAVE, BGSAVE, SHUTDOWN SAVE) and starts from a
//! dump.rdb, its own or one redis-server wrote.

use crate::keyspace::Keyspace;
use crate::rdb::{self, Reader};
use crate::store::Store;

const MAGIC: &[u8] = b"REDIS";
/// The newest RDB version read (Redis 7.2 writes 11).
const MAX_READ_VERSION: u16 = 11;

const OP_FUNCTION_PRE_GA: u8 = 246;
const OP_FUNCTION2: u8 = 245;
const OP_MODULE_AUX: u8 = 247;
const OP_IDLE: u8 = 248;
const OP_FREQ: u8 = 249;
const OP_AUX: u8 = 250;
const OP_RESIZEDB: u8 = 251;
const OP_EXPIRETIME_MS: u8 = 252;
const OP_EXPIRETIME: u8 = 253;
const OP_SELECTDB: u8 = 254;
const OP_EOF: u8 = 255;

/// Which access record each key gets in a file: Redis writes the idle
/// time under an LRU maxmemory policy, the LFU counter under an LFU one,
/// nothing otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessRecord {
    None,
    Idle,
    Frequency,
}

/// Writes `store` as an RDB file image, `now_ms` its creation time. Keys
/// already expired are written too, as by Redis: a load leaves them out
/// and counts them (INFO `rdb_last_load_keys_expired`).
pub fn write<K: Keyspace>(
    store: &Store<K>,
    now_ms: u64,
    used_memory: u64,
    access: AccessRecord,
    out: &mut Vec<u8>,
) {
    write_header(now_ms, used_memory, out);
    write_functions(store, out);
    for i in 0..store.databases() {
        write_db(store, i, i, access, out);
    }
    write_footer(out);
}

/// [`write`] to `sink` as the image is made, in chunks of about 64 KB (a
/// background save never holds the whole image), calling `after_key`
/// after each key (a save's progress count and `rdb-key-save-delay`).
pub fn write_to<K: Keyspace, W: std::io::Write, F: FnMut()>(
    store: &Store<K>,
    now_ms: u64,
    used_memory: u64,
    access: AccessRecord,
    sink: &mut W,
    after_key: &mut F,
) -> std::io::Result<()> {
    const CHUNK: usize = 64 * 1024;
    let mut out = Vec::with_capacity(2 * CHUNK);
    let mut crc = 0;
    let mut failed = None;
    let mut drain = |out: &mut Vec<u8>| {
        if out.len() >= CHUNK && failed.is_none() {
            crc = rdb::crc64(crc, out);
            failed = sink.write_all(out).err();
            out.clear();
        }
        after_key();
    };
    write_header(now_ms, used_memory, &mut out);
    write_functions(store, &mut out);
    for i in 0..store.databases() {
        write_db_with(store, i, i, access, &mut out, &mut drain);
    }
    if let Some(e) = failed {
        return Err(e);
    }
    out.push(OP_EOF);
    crc = rdb::crc64(crc, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    sink.write_all(&out)
}

/// The file's magic, version and AUX fields.
pub fn write_header(now_ms: u64, used_memory: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(format!("REDIS{:04}", rdb::RDB_VERSION).as_bytes());
    for (name, value) in [
        ("redis-ver", "7.0.15".to_string()),
        ("redis-bits", "64".to_string()),
        ("ctime", (now_ms / 1000).to_string()),
        ("used-mem", used_memory.to_string()),
        ("aof-base", "0".to_string()),
    ] {
        out.push(OP_AUX);
        rdb::put_string(out, name.as_bytes());
        rdb::put_string(out, value.as_bytes());
    }
}

/// The store's function libraries (they come before the keys, as Redis 7
/// writes them).
pub fn write_functions<K: Keyspace>(store: &Store<K>, out: &mut Vec<u8>) {
    for library in store.scripts.libraries.values() {
        out.push(OP_FUNCTION2);
        rdb::put_string(out, &library.code);
    }
}

/// Database `db` of the store, written as database `as_db` (nothing if it
/// holds no key). Several stores' parts may follow one another under
/// the same number (the shards a cluster node leads, in one file): a
/// loader reads each part's RESIZEDB as a size hint only.
pub fn write_db<K: Keyspace>(
    store: &Store<K>,
    db: usize,
    as_db: usize,
    access: AccessRecord,
    out: &mut Vec<u8>,
) {
    write_db_with(store, db, as_db, access, out, &mut |_| {});
}

/// [`write_db`], calling `after_key` with the output after each key.
fn write_db_with<K: Keyspace, F: FnMut(&mut Vec<u8>)>(
    store: &Store<K>,
    db: usize,
    as_db: usize,
    access: AccessRecord,
    out: &mut Vec<u8>,
    after_key: &mut F,
) {
    if db >= store.databases() {
        return;
    }
    let mut value = Vec::new();
    let db_ref = store.db(db);
    let (keys, expires) = db_ref.iter().fold((0u64, 0u64), |(k, x), e| {
        (k + 1, x + u64::from(e.expire_at().is_some()))
    });
    if keys == 0 {
        return;
    }
    out.push(OP_SELECTDB);
    rdb::put_len(out, as_db as u64);
    out.push(OP_RESIZEDB);
    rdb::put_len(out, keys);
    rdb::put_len(out, expires);
    for e in db_ref.iter() {
        if let Some(at) = e.expire_at() {
            out.push(OP_EXPIRETIME_MS);
            out.extend_from_slice(&at.to_le_bytes());
        }
        match access {
            AccessRecord::None => {}
            AccessRecord::Idle => {
                out.push(OP_IDLE);
                rdb::put_len(out, store.keyspace().idle_seconds(&e));
            }
            AccessRecord::Frequency => {
                out.push(OP_FREQ);
                out.push(store.keyspace().access_frequency(&e));
            }
        }
        value.clear();
        rdb::encode_value(e.value, &mut value);
        // A record is the type byte, the key, then the value's body.
        out.push(value[0]);
        rdb::put_string(out, e.key);
        out.extend_from_slice(&value[1..]);
        after_key(out);
    }
}

/// The end marker and the checksum of everything before it.
pub fn write_footer(out: &mut Vec<u8>) {
    out.push(OP_EOF);
    let crc = rdb::crc64(0, out);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// What a load found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    pub keys: u64,
    /// Keys already expired, not loaded (as a Redis master does).
    pub expired: u64,
    /// Function libraries loaded (they replace the store's).
    pub functions: u64,
    /// Bytes of the input the image took, its checksum included (what
    /// follows is an append-only file's tail, [`read_prefix_into`]).
    pub image_len: usize,
}

/// What a load does with a key or function library the store already has
/// (DEBUG RELOAD NOFLUSH, with or without MERGE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// The file's replaces it (MERGE; and any load into an empty store).
    Replace,
    /// The load fails, as Redis's does on a duplicate.
    Refuse,
}

/// Loads an RDB file image into `store` (which should be empty: keys and
/// libraries in the file replace those of the same name, the store's
/// other libraries go). An error names what is wrong; the store may then
/// hold part of the file.
pub fn read<K: Keyspace>(
    bytes: &[u8],
    store: &mut Store<K>,
    now_ms: u64,
) -> Result<Loaded, String> {
    read_into(bytes, store, now_ms, None)
}

/// Loads an RDB file image on top of what `store` holds: `merging` says
/// what a key or library of the same name does (None: as [`read`], the
/// file's libraries replace the store's).
pub fn read_into<K: Keyspace>(
    bytes: &[u8],
    store: &mut Store<K>,
    now_ms: u64,
    merging: Option<Existing>,
) -> Result<Loaded, String> {
    let loaded = read_prefix_into(bytes, store, now_ms, merging)?;
    if loaded.image_len != bytes.len() {
        return Err("Bad file format reading the RDB file: data after EOF".into());
    }
    Ok(loaded)
}

/// Loads the RDB image `bytes` starts with, which may be followed by
/// something else (Redis 6's append-only file with an RDB preamble: the
/// commands after it); [`Loaded::image_len`] says where the image ended.
/// As in Redis, the checksum after the image is verified once it is read.
pub fn read_prefix_into<K: Keyspace>(
    bytes: &[u8],
    store: &mut Store<K>,
    now_ms: u64,
    merging: Option<Existing>,
) -> Result<Loaded, String> {
    let mut load = RdbLoad::start(bytes, store, now_ms, merging)?;
    loop {
        if let Some(loaded) = load.step(store, usize::MAX, &mut || {})? {
            return Ok(loaded);
        }
    }
}

fn bad(what: &str) -> String {
    format!("Bad file format reading the RDB file: {what}")
}

/// A load of an RDB image in steps, so that a server can answer its
/// clients between them (Redis processes events every
/// `loading-process-events-interval-bytes` while it loads). The store must
/// not be written by anything else until the load ends.
pub struct RdbLoad<'a> {
    bytes: &'a [u8],
    version: u16,
    r: Reader<'a>,
    now_ms: u64,
    merging: Option<Existing>,
    db: usize,
    expire_at: Option<u64>,
    idle: Option<u64>,
    freq: Option<u8>,
    libraries: Vec<bytes::Bytes>,
    loaded: Loaded,
    /// The checksum of the bytes before `checked`, kept up step by step
    /// (a last pass over a large file would stop the server again).
    crc: u64,
    checked: usize,
}

impl<'a> RdbLoad<'a> {
    /// Checks the header of the image `bytes` starts with.
    pub fn start<K: Keyspace>(
        bytes: &'a [u8],
        store: &mut Store<K>,
        now_ms: u64,
        merging: Option<Existing>,
    ) -> Result<Self, String> {
        if bytes.len() < 9 || &bytes[..5] != MAGIC {
            return Err("Wrong signature trying to load DB from file".into());
        }
        let version: u16 = std::str::from_utf8(&bytes[5..9])
            .ok()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| bad("version"))?;
        if version == 0 || version > MAX_READ_VERSION {
            return Err(format!("Can't handle RDB format version {version}"));
        }
        // Loaded keys are stamped as used now, or as the file's records say.
        store.keyspace().set_access_clock(now_ms);
        Ok(RdbLoad {
            bytes,
            version,
            r: Reader::new(&bytes[9..]),
            now_ms,
            merging,
            db: 0,
            expire_at: None,
            idle: None,
            freq: None,
            libraries: Vec::new(),
            loaded: Loaded::default(),
            crc: 0,
            checked: 0,
        })
    }

    /// Bytes of the input read so far.
    pub fn position(&self) -> usize {
        self.bytes.len() - self.r.remaining()
    }

    /// Reads records until at least `budget` more bytes are read or the
    /// image ends; `on_key` runs after each key record (loaded or
    /// expired). At the end (the checksum verified, the libraries
    /// restored): what the whole load found.
    pub fn step<K: Keyspace>(
        &mut self,
        store: &mut Store<K>,
        budget: usize,
        on_key: &mut dyn FnMut(),
    ) -> Result<Option<Loaded>, String> {
        let until = self.position().saturating_add(budget);
        while self.position() < until {
            if self.record(store, on_key)? {
                return self.finish(store).map(Some);
            }
        }
        self.check_up_to(self.position());
        Ok(None)
    }

    /// Reads one record; true at EOF.
    fn record<K: Keyspace>(
        &mut self,
        store: &mut Store<K>,
        on_key: &mut dyn FnMut(),
    ) -> Result<bool, String> {
        let r = &mut self.r;
        let op = r.u8().map_err(|_| bad("unexpected end"))?;
        match op {
            OP_EOF => return Ok(true),
            OP_AUX => {
                r.string().map_err(|_| bad("aux field"))?;
                r.string().map_err(|_| bad("aux field"))?;
            }
            OP_SELECTDB => {
                let n = r.len().map_err(|_| bad("database number"))?;
                if n >= store.databases() as u64 {
                    return Err(format!(
                        "FATAL: Data file was created with a Redis server configured to handle more than {} databases. Exiting",
                        store.databases()
                    ));
                }
                self.db = n as usize;
            }
            OP_RESIZEDB => {
                let keys = r.len().map_err(|_| bad("resizedb"))?;
                r.len().map_err(|_| bad("resizedb"))?;
                // Room for the database's keys at once, as Redis expands
                // its dict: growing by doubling would move every key
                // several times, each a stop. A hint no file could hold
                // (a key takes 3 bytes at least) is not trusted.
                let most = (r.remaining() / 3) as u64;
                store.db_mut(self.db).reserve(keys.min(most) as usize);
            }
            OP_EXPIRETIME_MS => {
                let b = r.take(8).map_err(|_| bad("expire"))?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                self.expire_at = Some(i64::from_le_bytes(a).max(0) as u64);
            }
            OP_EXPIRETIME => {
                let b = r.take(4).map_err(|_| bad("expire"))?;
                let mut a = [0u8; 4];
                a.copy_from_slice(b);
                self.expire_at = Some(i32::from_le_bytes(a).max(0) as u64 * 1000);
            }
            OP_IDLE => {
                self.idle = Some(r.len().map_err(|_| bad("idle"))?);
            }
            OP_FREQ => {
                self.freq = Some(r.u8().map_err(|_| bad("freq"))?);
            }
            OP_FUNCTION2 | OP_FUNCTION_PRE_GA => {
                let code = r.string().map_err(|_| bad("function library"))?;
                self.libraries.push(bytes::Bytes::from(code.into_owned()));
            }
            OP_MODULE_AUX => {
                return Err("The RDB file holds module data; Kvasir has no modules".into())
            }
            t => {
                let key = r.string().map_err(|_| bad("key"))?.into_owned();
                let value = rdb::read_value::<K>(r, t, &store.limits)
                    .map_err(|_| bad(&format!("value of type {t}")))?;
                let (idle, freq) = (self.idle.take(), self.freq.take());
                let db = self.db;
                match self.expire_at.take() {
                    Some(at) if at <= self.now_ms => self.loaded.expired += 1,
                    at => {
                        if self.merging == Some(Existing::Refuse)
                            && store.db(db).get(&key).is_some()
                        {
                            return Err(format!(
                                "RDB has duplicated key '{}' in DB {db}",
                                String::from_utf8_lossy(&key)
                            ));
                        }
                        store.db_mut(db).set(&key, value, at);
                        store.keyspace().restore_access(db, &key, idle, freq);
                        self.loaded.keys += 1;
                    }
                }
                on_key();
            }
        }
        Ok(false)
    }

    fn check_up_to(&mut self, end: usize) {
        self.crc = rdb::crc64(self.crc, &self.bytes[self.checked..end]);
        self.checked = end;
    }

    /// After EOF: the checksum, then the function libraries.
    fn finish<K: Keyspace>(&mut self, store: &mut Store<K>) -> Result<Loaded, String> {
        let bytes = self.bytes;
        let mut end = self.position();
        if self.version >= 5 {
            // The checksum follows EOF; zero means it was not computed.
            let stored = bytes
                .get(end..end + 8)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(u64::from_le_bytes)
                .ok_or_else(|| bad("no checksum"))?;
            self.check_up_to(end);
            let computed = self.crc;
            if stored != 0 && computed != stored {
                // Redis's two log lines, in one.
                return Err(format!(
                    "Wrong RDB checksum expected: ({computed:x}) got: ({stored:x}). Aborting now. Internal error in RDB reading offset {end}: RDB CRC error"
                ));
            }
            end += 8;
        }
        let mut loaded = std::mem::take(&mut self.loaded);
        loaded.image_len = end;
        let libraries = std::mem::take(&mut self.libraries);
        if !libraries.is_empty() {
            loaded.functions = libraries.len() as u64;
            let restored = match self.merging {
                None => crate::scripting::function::restore_libraries(store, libraries),
                Some(existing) => crate::scripting::function::merge_libraries(
                    store,
                    libraries,
                    existing == Existing::Replace,
                ),
            };
            restored.map_err(|e| {
                format!("Failed loading the RDB's function libraries: {}", e.text())
            })?;
        }
        Ok(loaded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::digest;

    /// A stream goes through a file node by node, as Redis writes its
    /// listpacks: entries XDEL marked deleted still count towards their
    /// node, so the layout (where XADD appends next, what XTRIM ~ removes)
    /// and the digest are the same after a reload.
    #[test]
    fn a_stream_keeps_its_nodes_through_a_file() {
        let mut st: Store = Store::new(1);
        let ctx = crate::store::Ctx {
            now_ms: 1_000,
            seed: 1,
        };
        let run = |st: &mut Store, args: &[String]| {
            let args: Vec<bytes::Bytes> = args
                .iter()
                .map(|a| bytes::Bytes::copy_from_slice(a.as_bytes()))
                .collect();
            st.apply(0, &args, &ctx).expect("applied");
        };
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for i in 1..=250 {
            let field = if i % 7 == 0 { "bar" } else { "foo" };
            run(
                &mut st,
                &words(&["XADD", "s", &format!("{i}-1"), field, "v"]),
            );
        }
        for id in ["1-1", "50-1", "101-1", "150-1", "250-1"] {
            run(&mut st, &words(&["XDEL", "s", id]));
        }
        run(&mut st, &words(&["XGROUP", "CREATE", "s", "g", "0"]));
        let mut image = Vec::new();
        write(&st, 5_000, 0, AccessRecord::None, &mut image);
        let mut back: Store = Store::new(1);
        read(&image, &mut back, 5_000).expect("loads");
        assert_eq!(digest(&back), digest(&st));
        // And they go on the same way.
        for s in [&mut st, &mut back] {
            run(s, &words(&["XADD", "s", "300-1", "foo", "w"]));
            run(s, &words(&["XTRIM", "s", "MAXLEN", "~", "120"]));
        }
        assert_eq!(digest(&back), digest(&st));
    }

    /// A load in small steps ends with the same store and counts as a
    /// load in one go, and tells each key as it is read.
    #[test]
    fn a_load_in_steps_is_the_same_load() {
        let mut st: Store = Store::new(2);
        let ctx = crate::store::Ctx {
            now_ms: 1_000,
            seed: 1,
        };
        for i in 0..500 {
            let args: Vec<bytes::Bytes> = ["SET".to_string(), format!("key:{i}"), "v".repeat(i)]
                .iter()
                .map(|a| bytes::Bytes::copy_from_slice(a.as_bytes()))
                .collect();
            st.apply(i % 2, &args, &ctx).expect("applied");
        }
        let mut image = Vec::new();
        write(&st, 5_000, 7, AccessRecord::None, &mut image);
        let mut whole: Store = Store::new(2);
        let expected = read(&image, &mut whole, 5_000).expect("loads");
        let mut stepped: Store = Store::new(2);
        let mut load = RdbLoad::start(&image, &mut stepped, 5_000, None).expect("header");
        let (mut steps, mut keys) = (0, 0);
        let loaded = loop {
            steps += 1;
            let before = load.position();
            let step = load
                .step(&mut stepped, 1024, &mut || keys += 1)
                .expect("step");
            assert!(load.position() > before);
            if let Some(loaded) = step {
                break loaded;
            }
        };
        assert_eq!(loaded, expected);
        assert_eq!(keys, 500);
        assert!(
            steps > 50,
            "{steps} steps of 1 KB for {} bytes",
            image.len()
        );
        assert_eq!(digest(&stepped), digest(&whole));
    }

    /// A background save streams the image in chunks with a running
    /// checksum: the bytes are the same as the whole image's, and every
    /// key is counted.
    #[test]
    fn a_streamed_image_is_the_same_bytes() {
        let mut st: Store = Store::new(2);
        let ctx = crate::store::Ctx {
            now_ms: 1_000,
            seed: 1,
        };
        let value = "v".repeat(300);
        for i in 0..2_000 {
            let args: Vec<bytes::Bytes> = ["SET".to_string(), format!("key:{i}"), value.clone()]
                .iter()
                .map(|a| bytes::Bytes::copy_from_slice(a.as_bytes()))
                .collect();
            st.apply(i % 2, &args, &ctx).expect("applied");
        }
        let mut whole = Vec::new();
        write(&st, 5_000, 7, AccessRecord::None, &mut whole);
        let mut streamed = Vec::new();
        let mut keys = 0;
        write_to(
            &st,
            5_000,
            7,
            AccessRecord::None,
            &mut streamed,
            &mut || keys += 1,
        )
        .expect("written");
        assert!(
            whole.len() > 4 * 64 * 1024,
            "several chunks: {}",
            whole.len()
        );
        assert_eq!(streamed, whole);
        assert_eq!(keys, 2_000);
        let mut back: Store = Store::new(2);
        assert_eq!(
            read(&streamed, &mut back, 5_000).expect("loads").keys,
            2_000
        );
    }

    #[test]
    fn a_written_file_loads_into_the_same_state() {
        let mut st: Store = Store::new(4);
        let ctx = crate::store::Ctx {
            now_ms: 1_000,
            seed: 1,
        };
        let run = |st: &mut Store, args: &[&str]| {
            let args: Vec<bytes::Bytes> = args
                .iter()
                .map(|a| bytes::Bytes::copy_from_slice(a.as_bytes()))
                .collect();
            st.apply(0, &args, &ctx).expect("applied");
        };
        run(&mut st, &["SET", "s", "hello"]);
        run(&mut st, &["SET", "n", "12345"]);
        run(&mut st, &["RPUSH", "l", "a", "b", "c"]);
        run(&mut st, &["SADD", "set", "x", "y", "7"]);
        run(&mut st, &["ZADD", "z", "1.5", "m", "2", "n"]);
        run(&mut st, &["HSET", "h", "f", "v", "g", "w"]);
        run(&mut st, &["XADD", "x", "1-1", "f", "v"]);
        run(&mut st, &["PEXPIRE", "s", "100000"]);
        run(&mut st, &["SET", "gone", "x", "PX", "1"]);
        run(
            &mut st,
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=lib\nredis.register_function('f', function() return 1 end)",
            ],
        );
        let mut image = Vec::new();
        write(&st, 5_000, 0, AccessRecord::None, &mut image);
        assert!(image.starts_with(b"REDIS0010"));
        let mut back: Store = Store::new(4);
        let loaded = read(&image, &mut back, 5_000).expect("loads");
        assert_eq!(
            loaded,
            Loaded {
                keys: 7,
                // Written, as Redis writes it; left out at load.
                expired: 1,
                functions: 1,
                image_len: image.len(),
            }
        );
        assert!(back.scripts.libraries.contains_key("lib"));
        // The expired key was not loaded; everything else is the same.
        run(&mut st, &["DEL", "gone"]);
        assert_eq!(digest(&back), digest(&st));
        assert_eq!(
            back.db(0).get(b"s").and_then(|e| e.expire_at()),
            Some(101_000)
        );

        // A flipped byte fails the checksum; a cut file fails too.
        let mut broken = image.clone();
        let at = broken.len() / 2;
        broken[at] ^= 0x40;
        let crc = read(&broken, &mut Store::new(4), 5_000).expect_err("corrupt");
        assert!(crc.contains("RDB CRC error"), "{crc}");
        assert!(read(&image[..image.len() - 12], &mut Store::new(4), 5_000).is_err());
        assert!(read(b"NOTRDB0010", &mut Store::new(4), 5_000).is_err());
    }

    /// Idle times (LRU) and counters (LFU) go through a file as Redis
    /// writes and reads them.
    #[test]
    fn access_records_survive_a_file() {
        use crate::keyspace::{AccessMode, Keyspace, Value};
        let mut st: Store = Store::new(1);
        st.keyspace().set_access_clock(100_000);
        st.db_mut(0).set(b"old", Value::from_bytes(b"v"), None);
        st.keyspace().set_access_clock(170_000);
        st.db_mut(0).set(b"new", Value::from_bytes(b"v"), None);
        let mut image = Vec::new();
        write(&st, 170_000, 0, AccessRecord::Idle, &mut image);
        let mut back: Store = Store::new(1);
        read(&image, &mut back, 200_000).expect("loads");
        let idle = |s: &Store, k: &[u8]| {
            let e = s.db(0).get(k).expect("key");
            s.keyspace().idle_seconds(&e)
        };
        // Idle 70 s and 0 s when written; the load happens 30 s later
        // on the clock, but idle times are as the file says.
        assert_eq!(idle(&back, b"old"), 70);
        assert_eq!(idle(&back, b"new"), 0);

        let lfu = AccessMode::Lfu {
            log_factor: 0,
            decay_minutes: 0,
        };
        st.keyspace().set_access_mode(lfu);
        st.db_mut(0).set(b"counted", Value::from_bytes(b"v"), None);
        for _ in 0..7 {
            assert!(st.live(0, b"counted", 170_000).is_some());
        }
        let mut image = Vec::new();
        write(&st, 170_000, 0, AccessRecord::Frequency, &mut image);
        let mut back: Store = Store::new(1);
        back.keyspace().set_access_mode(lfu);
        read(&image, &mut back, 170_000).expect("loads");
        let e = back.db(0).get(b"counted").expect("key");
        assert_eq!(back.keyspace().access_frequency(&e), 12);
    }
}

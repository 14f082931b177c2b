//! Images written by earlier builds (format version 1, which recorded the
//! memory engine's encodings and its stream node bytes) still load:
//! snapshots already in users' data folders must restore to the same
//! state as the store that wrote them.

mod image_store;

use bytes::Bytes;
use image_store::{every_type, run, CTX, KEYS};
use kvasir_core::keyspace::image::node_codec;
use kvasir_core::keyspace::{EntryRef, StreamImage, Value};
use kvasir_core::snapshot::{decode, digest, encode, HEADER_LEN, MAGIC};
use kvasir_core::Store;
use kvasir_engine_memory::list::Elem;
use kvasir_engine_memory::set::{format_i64, Member};

/// The image of `image_store::every_type` as the build before the engine
/// seam wrote it (format version 1).
const V1_FIXTURE: &[u8] = include_bytes!("fixtures/snapshot-v1.bin");

/// `snapshot::digest` of that store, recorded by the same build.
const V1_FIXTURE_DIGEST: u64 = 12099260534321618970;

fn image(st: &Store) -> Vec<u8> {
    let mut out = Vec::new();
    encode(st, &mut out);
    out
}

fn encoding(st: &Store, db: usize, key: &str) -> String {
    let a = [b"object".as_slice(), b"encoding", key.as_bytes()].map(Bytes::copy_from_slice);
    format!("{:?}", st.read(db, &a, &CTX))
}

/// `back` is `st` in every way a command or a replica can tell.
fn assert_same_state(st: &Store, back: &Store) {
    assert_eq!(back.databases(), st.databases());
    assert_eq!(back.limits, st.limits);
    assert!(back.dump() == st.dump(), "dump differs after restore");
    assert_eq!(digest(back), digest(st));
    for db in 0..st.databases() {
        let (a, b) = (st.db(db), back.db(db));
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b.iter()) {
            assert_eq!(x.key, y.key, "iteration order");
            let key = String::from_utf8_lossy(x.key);
            assert_eq!(encoding(st, db, &key), encoding(back, db, &key), "{key}");
        }
    }
    // Element orders (a skiplist's slots, a stream's nodes) too.
    assert!(image(back) == image(st), "re-encoded image differs");
}

#[test]
fn version_1_fixture_loads_into_the_same_state() {
    assert_eq!(&V1_FIXTURE[..8], &MAGIC);
    assert_eq!(&V1_FIXTURE[8..12], &1u32.to_le_bytes());
    let back = decode(V1_FIXTURE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(digest(&back), V1_FIXTURE_DIGEST);
    let mut st = Store::default();
    every_type(&mut st);
    assert_same_state(&st, &back);
    for (db, keys) in KEYS.iter().enumerate() {
        for k in keys.iter() {
            assert!(back.db(db).get(k.as_bytes()).is_some(), "{k}");
        }
    }
    // And it goes on as the source does.
    let mut st = st;
    let mut back = back;
    for s in [&mut st, &mut back] {
        run(s, 0, &["xadd", "xs", "maxlen", "~", "3", "*", "a", "1"]);
        run(s, 1, &["spop", "table", "2"]);
        run(s, 1, &["zadd", "zbig", "3", "new"]);
    }
    assert!(back.dump() == st.dump());
}

// ---------------------------------------------------------------------------
// The version 1 encoder, as it was before the engine seam (test only)
// ---------------------------------------------------------------------------

fn put_uvar(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_svar(out: &mut Vec<u8>, v: i64) {
    put_uvar(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_uvar(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_score(out: &mut Vec<u8>, score: f64) {
    out.extend_from_slice(&score.to_bits().to_le_bytes());
}

fn legacy_encode(store: &Store) -> Vec<u8> {
    let mut out = vec![0; HEADER_LEN];
    let l = &store.limits;
    for v in [
        l.hash_max_listpack_entries,
        l.hash_max_listpack_value,
        l.set_max_intset_entries,
        l.set_max_listpack_entries,
        l.set_max_listpack_value,
        l.zset_max_listpack_entries,
        l.zset_max_listpack_value,
    ] {
        put_uvar(&mut out, v as u64);
    }
    put_svar(&mut out, l.list_max_listpack_size);
    put_uvar(&mut out, store.databases() as u64);
    for i in 0..store.databases() {
        let db = store.db(i);
        put_uvar(&mut out, db.len() as u64);
        for e in db.iter() {
            legacy_entry(&mut out, e);
        }
    }
    out.push(b'S');
    let mut bodies: Vec<_> = store.scripts.bodies.iter().collect();
    bodies.sort_by(|a, b| a.0.cmp(b.0));
    put_uvar(&mut out, bodies.len() as u64);
    for (_, body) in bodies {
        put_bytes(&mut out, body);
    }
    put_uvar(&mut out, store.scripts.libraries.len() as u64);
    for lib in store.scripts.libraries.values() {
        put_bytes(&mut out, &lib.code);
    }
    let body_len = out.len() - HEADER_LEN;
    let crc = crc32fast::hash(&out[HEADER_LEN..]);
    out.extend_from_slice(&crc.to_le_bytes());
    out[0..8].copy_from_slice(&MAGIC);
    out[8..12].copy_from_slice(&1u32.to_le_bytes());
    out[12..20].copy_from_slice(&(body_len as u64).to_le_bytes());
    let header_crc = crc32fast::hash(&out[..20]);
    out[20..24].copy_from_slice(&header_crc.to_le_bytes());
    out
}

fn legacy_entry(out: &mut Vec<u8>, e: EntryRef<'_>) {
    let tag = match e.value {
        Value::Str(_) => 0,
        Value::Raw(_) => 1,
        Value::Int(_) => 2,
        Value::List(l) if l.encoding() == "listpack" => 3,
        Value::List(_) => 4,
        Value::Hash(h) if h.encoding() == "listpack" => 5,
        Value::Hash(_) => 6,
        Value::Set(s) if s.is_intset() => 7,
        Value::Set(s) if s.is_compact() => 8,
        Value::Set(_) => 9,
        Value::ZSet(z) if z.encoding() == "listpack" => 10,
        Value::ZSet(_) => 11,
        Value::Stream(_) => 12,
    };
    match e.expire_at() {
        Some(at) => {
            out.push(tag | 0x80);
            out.extend_from_slice(&at.to_le_bytes());
        }
        None => out.push(tag),
    }
    put_bytes(out, e.key);
    match e.value {
        Value::Str(s) | Value::Raw(s) => put_bytes(out, s),
        Value::Int(i) => put_svar(out, *i),
        Value::List(l) => {
            put_uvar(out, l.len() as u64);
            for el in l.iter() {
                match el {
                    Elem::Int(i) => put_bytes(out, format_i64(i, &mut [0; 20])),
                    Elem::Str(s) => put_bytes(out, s),
                    Elem::Buf(b) => put_bytes(out, &b),
                }
            }
        }
        Value::Hash(h) => {
            put_uvar(out, h.len() as u64);
            for (f, v) in h.iter() {
                put_bytes(out, f);
                put_bytes(out, v);
            }
        }
        Value::Set(s) => {
            if let Some(width) = s.intset_width() {
                out.push(width);
            }
            put_uvar(out, s.len() as u64);
            for m in s.iter() {
                let m: Member<'_> = m;
                m.with_bytes(|b| put_bytes(out, b));
            }
        }
        Value::ZSet(z) if tag == 10 => {
            put_uvar(out, z.len() as u64);
            for (m, score) in z.iter() {
                put_bytes(out, m);
                put_score(out, score);
            }
        }
        Value::ZSet(z) => {
            let mut records = Vec::new();
            let mut ends = Vec::with_capacity(z.len());
            z.scan(0, usize::MAX, |m, score| {
                put_bytes(&mut records, m);
                put_score(&mut records, score);
                ends.push(records.len());
            });
            put_uvar(out, ends.len() as u64);
            for i in (0..ends.len()).rev() {
                let start = if i == 0 { 0 } else { ends[i - 1] };
                out.extend_from_slice(&records[start..ends[i]]);
            }
        }
        Value::Stream(st) => {
            let mut blob = Vec::new();
            node_codec::put_canonical(&mut blob, &st.content());
            put_bytes(out, &blob);
        }
    }
}

#[test]
fn the_old_encoder_still_writes_the_fixture() {
    let mut st = Store::default();
    every_type(&mut st);
    assert!(legacy_encode(&st) == V1_FIXTURE, "the test copy drifted");
}

/// Larger stores, default limits, streams with many nodes, deletions
/// and groups: what version 1 images hold loads back the same.
#[test]
fn version_1_images_of_large_stores_load_into_the_same_state() {
    let mut st = Store::default();
    let long = "q".repeat(80);
    for i in 0..700 {
        let (n, m) = (i.to_string(), format!("m{i}"));
        run(&mut st, 0, &["rpush", "list", &n, &long]);
        run(&mut st, 0, &["hset", "hash", &m, &n]);
        run(&mut st, 0, &["sadd", "ints", &n]);
        run(&mut st, 0, &["sadd", "strs", &m]);
        run(&mut st, 0, &["zadd", "zset", &(i % 13).to_string(), &m]);
        let id = format!("{}-{}", 1000 + i / 3, i % 3);
        if i % 5 == 0 {
            run(&mut st, 0, &["xadd", "stream", &id, "x", &n]);
        } else {
            run(&mut st, 0, &["xadd", "stream", &id, "a", &n, "b", &long]);
        }
    }
    for i in (0..700).step_by(7) {
        let id = format!("{}-{}", 1000 + i / 3, i % 3);
        run(&mut st, 0, &["xdel", "stream", &id]);
        run(&mut st, 0, &["srem", "ints", &i.to_string()]);
        run(&mut st, 0, &["zrem", "zset", &format!("m{i}")]);
    }
    run(&mut st, 0, &["xtrim", "stream", "maxlen", "~", "450"]);
    run(&mut st, 0, &["xgroup", "create", "stream", "g", "0"]);
    run(
        &mut st,
        0,
        &[
            "xreadgroup",
            "group",
            "g",
            "c1",
            "count",
            "50",
            "streams",
            "stream",
            ">",
        ],
    );
    run(
        &mut st,
        0,
        &[
            "xreadgroup",
            "group",
            "g",
            "c2",
            "count",
            "5",
            "streams",
            "stream",
            ">",
        ],
    );
    run(&mut st, 0, &["set", "s", "v", "px", "100000"]);
    let back = decode(&legacy_encode(&st)).unwrap_or_else(|e| panic!("{e}"));
    assert_same_state(&st, &back);
    every_type(&mut st);
    let back = decode(&legacy_encode(&st)).unwrap_or_else(|e| panic!("{e}"));
    assert_same_state(&st, &back);
}

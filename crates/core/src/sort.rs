//! SORT and SORT_RO, a port of Redis 7.0's `sort.c`.
//!
//! The elements of a list, set or sorted set are sorted numerically (each
//! element, or the value its BY pattern names, read as C's `strtod` reads
//! it) or with ALPHA by their bytes (Redis compares with `strcoll`, which
//! under the C locale is `strcmp`: the bytes up to the first NUL; with
//! STORE it compares whole byte strings). Numeric ties are broken by the
//! elements' bytes, so the order is total except for ALPHA BY ties, which
//! keep their input order (a stable sort, as glibc's qsort) or, with BY and
//! a narrowing LIMIT, come out in the order of Redis's partial quicksort.
//!
//! BY and GET patterns substitute the element for the first `*`; `->field`
//! after it reads a hash field; `#` is the element itself. A BY pattern
//! without `*` (`nosort`) sorts nothing: lists and sorted sets keep their
//! order (reversed by DESC, LIMIT applied on the way). With STORE, a set is
//! then sorted ALPHA anyway so that the stored list is deterministic.
//!
//! In cluster mode ([`Store::cluster_mode`]) BY and GET patterns must name
//! keys in the sorted key's slot (a `{tag}` before any wildcard), as
//! Redis's `patternHashSlot` decides; `GET #` is always allowed.

use crate::args::{eq_ic, parse_i64};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::list_ops::End;
use crate::keyspace::{Collection, HashOps, Keyspace, ListOps, SetOps, Value, ZSetOps};
use crate::store::{Ctx, Store};
use crate::table::{cmd, CommandSpec, Flags};
use bytes::Bytes;
use kvasir_resp::Reply;
use std::cmp::Ordering;

const G: &str = "generic";
const KEY: (i32, i32, i32) = (1, 1, 1);
const W_OOM_MOV: Flags = Flags::WRITE.union(Flags::DENYOOM).union(Flags::MOVABLEKEYS);
const ACL_W: &[&str] = &["write", "set", "sortedset", "list", "slow", "dangerous"];
const ACL_R: &[&str] = &["read", "set", "sortedset", "list", "slow", "dangerous"];

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    // The STORE destination is a key too: movable keys.
    CommandSpec { key_finder: Some(sort_keys), ..cmd("sort", -2, W_OOM_MOV, KEY, ACL_W, G, "1.0.0", "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.", crate::write_handler!(sort)) }.events(crate::notify::Events::Custom(crate::notify::sortstore)).keys_access(crate::table::KeyAccess::ReadThenWrite).reading_patterns(pattern_option),
    // Movable too, as Redis flags it (BY and GET patterns name keys).
    cmd("sort_ro", -2, Flags::READONLY.union(Flags::MOVABLEKEYS), KEY, ACL_R, G, "7.0.0", "Returns the sorted elements of a list, a set, or a sorted set.", crate::read_handler!(sort_ro)).reading_patterns(pattern_option),
];

const BY_DENIED: &str = "ERR BY option of SORT denied in Cluster mode when keys formed by the pattern may be in different slots.";
const GET_DENIED: &str = "ERR GET option of SORT denied in Cluster mode when keys formed by the pattern may be in different slots.";
const NOT_DOUBLE: &str = "ERR One or more scores can't be converted into double";

/// The first option of a SORT that reads keys named by a pattern: BY with
/// a `*` in it (without one, BY only turns sorting off), or any GET.
pub fn pattern_option(args: &[Bytes]) -> Option<&'static str> {
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if eq_ic(a, "limit") {
            i += 2;
        } else if eq_ic(a, "by") {
            if args.get(i + 1).is_some_and(|p| p.contains(&b'*')) {
                return Some("BY");
            }
            i += 1;
        } else if eq_ic(a, "get") && i + 1 < args.len() {
            return Some("GET");
        } else if eq_ic(a, "store") {
            i += 1;
        }
        i += 1;
    }
    None
}

/// Key finder for SORT (Redis's sortGetKeys): the sorted key, plus the key
/// after the last STORE. LIMIT skips two arguments, GET and BY one.
fn sort_keys(args: &[Bytes]) -> Vec<usize> {
    let mut keys = vec![1];
    let mut stored = None;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if eq_ic(a, "limit") {
            i += 2;
        } else if eq_ic(a, "get") || eq_ic(a, "by") {
            i += 1;
        } else if eq_ic(a, "store") && i + 1 < args.len() {
            stored = Some(i + 1);
        }
        i += 1;
    }
    keys.extend(stored);
    keys
}

// ---------------------------------------------------------------------------
// Cluster slots (crc16 XMODEM, as cluster.c)
// ---------------------------------------------------------------------------

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// keyHashSlot: the slot of a key, hashing only a non-empty `{tag}`.
pub fn key_slot(key: &[u8]) -> u16 {
    if let Some(s) = key.iter().position(|&c| c == b'{') {
        if let Some(len) = key[s + 1..].iter().position(|&c| c == b'}') {
            if len > 0 {
                return crc16(&key[s + 1..s + 1 + len]) & 0x3FFF;
            }
        }
    }
    crc16(key) & 0x3FFF
}

/// patternHashSlot: the slot every key matching `pattern` lies in, or None
/// when they may lie anywhere (a wildcard or escape before a closed tag).
fn pattern_slot(pattern: &[u8]) -> Option<u16> {
    let mut s: isize = -1;
    for (i, &c) in pattern.iter().enumerate() {
        let i = i as isize;
        if c == b'*' || c == b'?' || c == b'[' || c == b'\\' {
            return None;
        } else if s == -1 && c == b'{' {
            s = i;
        } else if s >= 0 && c == b'}' && i == s + 1 {
            s = -2;
        } else if s >= 0 && c == b'}' {
            return Some(crc16(&pattern[(s + 1) as usize..i as usize]) & 0x3FFF);
        }
    }
    Some(crc16(pattern) & 0x3FFF)
}

// ---------------------------------------------------------------------------
// C string helpers
// ---------------------------------------------------------------------------

/// The bytes a C string function sees: up to the first NUL.
fn c_str(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(n) => &b[..n],
        None => b,
    }
}

/// strcmp (strcoll under the C locale).
fn c_strcmp(a: &[u8], b: &[u8]) -> Ordering {
    c_str(a).cmp(c_str(b))
}

/// `strtod(s, &end)` followed by Redis's check that the whole C string was
/// read, the value is not NaN and did not overflow or underflow.
fn strtod_score(b: &[u8]) -> Option<f64> {
    let s = c_str(b);
    let rest = match s
        .iter()
        .position(|c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
    {
        Some(n) => &s[n..],
        // No number at all: the end pointer stays at the start, which is
        // the terminating NUL only for an empty string.
        None => return if s.is_empty() { Some(0.0) } else { None },
    };
    let text = std::str::from_utf8(rest).ok()?;
    let (neg, body) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let v = if body.len() > 1 && (body.starts_with("0x") || body.starts_with("0X")) {
        let h = parse_hex(&body[2..])?;
        if neg {
            -h
        } else {
            h
        }
    } else {
        text.parse::<f64>().ok()?
    };
    if v.is_nan() {
        return None;
    }
    let lower = body.to_ascii_lowercase();
    if v.is_infinite() && !lower.starts_with("inf") {
        return None;
    }
    let mantissa = lower.split(['e', 'p']).next().unwrap_or("");
    let nonzero = mantissa
        .bytes()
        .any(|c| c.is_ascii_hexdigit() && c != b'0' && c != b'x');
    if (v == 0.0 && nonzero) || (v != 0.0 && v.abs() < f64::MIN_POSITIVE) {
        return None;
    }
    Some(v)
}

/// A hexadecimal float body after `0x`: digits, an optional point, an
/// optional binary exponent `p[+-]digits`. The whole text must be used.
fn parse_hex(s: &str) -> Option<f64> {
    let (mant, exp) = match s.find(['p', 'P']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int_part, frac) = match mant.find('.') {
        Some(i) => (&mant[..i], &mant[i + 1..]),
        None => (mant, ""),
    };
    if int_part.is_empty() && frac.is_empty() {
        return None;
    }
    let mut v = 0.0f64;
    for c in int_part.chars().chain(frac.chars()) {
        v = v * 16.0 + f64::from(c.to_digit(16)?);
    }
    let mut e: i64 = -4 * frac.len() as i64;
    if let Some(exp) = exp {
        let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
        if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let n: i64 = digits.parse().unwrap_or(i64::MAX / 4).min(100_000);
        e += if exp.starts_with('-') { -n } else { n };
    }
    Some(v * 2f64.powi(e.clamp(-100_000, 100_000) as i32))
}

// ---------------------------------------------------------------------------
// Patterns
// ---------------------------------------------------------------------------

/// lookupKeyByPattern: the value a BY/GET pattern names for `subst`.
fn lookup_by_pattern<K: Keyspace>(
    store: &Store<K>,
    db: usize,
    pattern: &[u8],
    subst: &[u8],
    ctx: &Ctx,
) -> Option<Bytes> {
    if pattern.first() == Some(&b'#') && pattern.get(1).is_none_or(|&c| c == 0) {
        return Some(Bytes::copy_from_slice(subst));
    }
    let cpat = c_str(pattern);
    let p = cpat.iter().position(|&c| c == b'*')?;
    let field_at = cpat[p + 1..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|i| p + 1 + i)
        .filter(|&f| f + 2 < cpat.len());
    let (field, postfix_end) = match field_at {
        Some(f) => (Some(&pattern[f + 2..]), f),
        None => (None, pattern.len()),
    };
    let mut key = Vec::with_capacity(pattern.len() + subst.len());
    key.extend_from_slice(&pattern[..p]);
    key.extend_from_slice(subst);
    key.extend_from_slice(&pattern[p + 1..postfix_end]);
    let value = store.live(db, &key, ctx.now_ms)?.value;
    match (field, value) {
        (Some(f), Value::Hash(h)) => h.get(f).map(Bytes::copy_from_slice),
        (Some(_), _) => None,
        (None, Value::Str(s) | Value::Raw(s)) => Some(Bytes::copy_from_slice(s)),
        (None, Value::Int(i)) => Some(Bytes::from(i.to_string())),
        (None, _) => None,
    }
}

// ---------------------------------------------------------------------------
// The command
// ---------------------------------------------------------------------------

fn sort<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let run = run_sort(store, db, args, false, ctx)?;
    match run.store_key {
        None => Ok(run.reply()),
        Some(dst) => {
            let dst = dst.clone();
            let items = run.stored();
            let n = items.len();
            store.expire_if_needed(db, &dst, ctx);
            if n == 0 {
                store.db_mut(db).remove(&dst);
            } else {
                let mut l = K::List::new();
                l.push(End::Back, &items, &store.limits);
                store.db_mut(db).set(&dst, Value::List(Box::new(l)), None);
            }
            Ok(Reply::Int(n as i64))
        }
    }
}

fn sort_ro<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    Ok(run_sort(store, db, args, true, ctx)?.reply())
}

/// One element of the sorting vector (redisSortObject).
struct Item {
    obj: Bytes,
    score: f64,
    cmpobj: Option<Bytes>,
}

/// The sorted range and what to fetch for each element.
struct Run<'a> {
    items: Vec<Item>,
    /// The output range (inclusive), possibly empty (end < start).
    start: i64,
    end: i64,
    gets: Vec<Vec<Option<Bytes>>>,
    getop: usize,
    store_key: Option<&'a Bytes>,
}

impl Run<'_> {
    fn range(&self) -> impl Iterator<Item = usize> + '_ {
        let (s, e) = (self.start, self.end);
        (s.max(0)..=e).filter_map(|j| usize::try_from(j).ok())
    }

    fn reply(&self) -> Reply {
        let mut out = Vec::new();
        for (k, j) in self.range().enumerate() {
            if self.getop == 0 {
                if let Some(it) = self.items.get(j) {
                    out.push(Reply::Bulk(it.obj.clone()));
                }
            }
            for v in self.gets.get(k).into_iter().flatten() {
                out.push(match v {
                    Some(b) => Reply::Bulk(b.clone()),
                    None => Reply::Nil,
                });
            }
        }
        Reply::Array(out)
    }

    fn stored(&self) -> Vec<Bytes> {
        let mut out = Vec::new();
        for (k, j) in self.range().enumerate() {
            if self.getop == 0 {
                if let Some(it) = self.items.get(j) {
                    out.push(it.obj.clone());
                }
            }
            for v in self.gets.get(k).into_iter().flatten() {
                out.push(v.clone().unwrap_or_default());
            }
        }
        out
    }
}

/// sortCommandGeneric up to the output: parses, loads, sorts and fetches
/// the GET values; the caller replies or stores.
fn run_sort<'a, K: Keyspace>(
    store: &Store<K>,
    db: usize,
    args: &'a [Bytes],
    readonly: bool,
    ctx: &Ctx,
) -> Result<Run<'a>, CmdError> {
    let key = &args[1];
    let (mut desc, mut alpha, mut dontsort) = (false, false, false);
    let (mut limit_start, mut limit_count): (i64, i64) = (0, -1);
    let mut sortby: Option<&Bytes> = None;
    let mut store_key: Option<&Bytes> = None;
    let mut ops: Vec<&Bytes> = Vec::new();
    let mut j = 2;
    while j < args.len() {
        let a = &args[j];
        let left = args.len() - j - 1;
        if eq_ic(a, "asc") {
            desc = false;
        } else if eq_ic(a, "desc") {
            desc = true;
        } else if eq_ic(a, "alpha") {
            alpha = true;
        } else if eq_ic(a, "limit") && left >= 2 {
            limit_start = parse_i64(&args[j + 1])?;
            limit_count = parse_i64(&args[j + 2])?;
            j += 2;
        } else if !readonly && eq_ic(a, "store") && left >= 1 {
            store_key = Some(&args[j + 1]);
            j += 1;
        } else if eq_ic(a, "by") && left >= 1 {
            let pat = &args[j + 1];
            sortby = Some(pat);
            if !c_str(pat).contains(&b'*') {
                dontsort = true;
            } else if store.cluster_mode && pattern_slot(pat) != Some(key_slot(key)) {
                return Err(CmdError::other(BY_DENIED));
            }
            j += 1;
        } else if eq_ic(a, "get") && left >= 1 {
            let pat = &args[j + 1];
            if store.cluster_mode && c_str(pat) != b"#" && pattern_slot(pat) != Some(key_slot(key))
            {
                return Err(CmdError::other(GET_DENIED));
            }
            ops.push(pat);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }

    let sortval = match store.live(db, key, ctx.now_ms).map(|e| e.value) {
        None => None,
        Some(v @ (Value::List(_) | Value::Set(_) | Value::ZSet(_))) => Some(v),
        Some(_) => return Err(CmdError::WrongType),
    };

    // A set has no order of its own: stored results, and results a script
    // sees, are sorted anyway (Redis: STORE or CLIENT_SCRIPT forces ALPHA).
    if dontsort
        && matches!(sortval, Some(Value::Set(_)))
        && (store_key.is_some() || store.script_call.get())
    {
        dontsort = false;
        alpha = true;
        sortby = None;
    }

    let len = match sortval {
        Some(Value::List(l)) => l.len(),
        Some(Value::Set(s)) => s.len(),
        Some(Value::ZSet(z)) => z.len(),
        _ => 0,
    } as i64;
    let mut vectorlen = len;

    // LIMIT sanity checks, with Redis 7's clamping against overflow.
    let mut start = limit_start.max(0).min(vectorlen);
    let limit_count = limit_count.max(-1).min(vectorlen);
    let mut end = if limit_count < 0 {
        vectorlen - 1
    } else {
        start + limit_count - 1
    };
    if start >= vectorlen {
        start = vectorlen - 1;
        end = vectorlen - 2;
    }
    if end >= vectorlen {
        end = vectorlen - 1;
    }

    let ordered = matches!(sortval, Some(Value::List(_) | Value::ZSet(_)));
    if ordered && dontsort && (start != 0 || end != vectorlen - 1) {
        vectorlen = end - start + 1;
    }
    let want = usize::try_from(vectorlen).unwrap_or(0);
    let item = |obj: Bytes| Item {
        obj,
        score: 0.0,
        cmpobj: None,
    };
    let mut items: Vec<Item> = Vec::with_capacity(want);
    match sortval {
        Some(Value::List(l)) if dontsort && end >= start => {
            let s = usize::try_from(start).unwrap_or(0);
            if desc {
                let from = l.len().saturating_sub(s + 1);
                items.extend(l.iter_rev_from(from).take(want).map(|e| item(e.to_bytes())));
            } else {
                items.extend(l.iter_from(s).take(want).map(|e| item(e.to_bytes())));
            }
            end -= start;
            start = 0;
        }
        // An empty range of a list in its own order: nothing to load.
        Some(Value::List(_)) if dontsort => {}
        Some(Value::List(l)) => items.extend(l.iter().map(|e| item(e.to_bytes()))),
        Some(Value::Set(s)) => items.extend(s.iter().map(|m| item(m.to_bytes()))),
        Some(Value::ZSet(z)) if dontsort => {
            let s = usize::try_from(start).unwrap_or(0);
            items.extend(
                z.iter_from(s, desc)
                    .take(want)
                    .map(|(m, _)| item(Bytes::copy_from_slice(m))),
            );
            end -= start;
            start = 0;
        }
        Some(Value::ZSet(z)) => {
            items.extend(z.iter().map(|(m, _)| item(Bytes::copy_from_slice(m))));
        }
        _ => {}
    }

    let mut conversion_error = false;
    if !dontsort {
        for it in items.iter_mut() {
            let byval = match sortby {
                Some(pat) => match lookup_by_pattern(store, db, pat, &it.obj, ctx) {
                    Some(v) => v,
                    None => continue,
                },
                None => it.obj.clone(),
            };
            if alpha {
                if sortby.is_some() {
                    it.cmpobj = Some(byval);
                }
            } else {
                match strtod_score(&byval) {
                    Some(s) => it.score = s,
                    None => conversion_error = true,
                }
            }
        }
        let bypattern = sortby.is_some();
        let storing = store_key.is_some();
        let cmp = |a: &Item, b: &Item| -> i32 {
            let c = compare(a, b, alpha, bypattern, storing);
            let c = if desc { c.reverse() } else { c };
            c as i32
        };
        let n = items.len();
        if n > 1 && end >= start {
            if bypattern && (start != 0 || end != n as i64 - 1) {
                crate::geo::pqsort(&mut items, &cmp, start as usize, end as usize);
            } else {
                items.sort_by(|a, b| cmp(a, b).cmp(&0));
            }
        }
    }

    if conversion_error {
        return Err(CmdError::other(NOT_DOUBLE));
    }

    let mut run = Run {
        items,
        start,
        end,
        gets: Vec::new(),
        getop: ops.len(),
        store_key,
    };
    if !ops.is_empty() {
        let gets = run
            .range()
            .map(|j| {
                let obj = run
                    .items
                    .get(j)
                    .map(|it| it.obj.clone())
                    .unwrap_or_default();
                ops.iter()
                    .map(|pat| lookup_by_pattern(store, db, pat, &obj, ctx))
                    .collect()
            })
            .collect();
        run.gets = gets;
    }
    Ok(run)
}

/// sortCompare, before DESC is applied.
fn compare(a: &Item, b: &Item, alpha: bool, bypattern: bool, storing: bool) -> Ordering {
    if !alpha {
        return match a.score.partial_cmp(&b.score) {
            Some(Ordering::Equal) | None => a.obj.as_ref().cmp(b.obj.as_ref()),
            Some(o) => o,
        };
    }
    let (x, y) = if bypattern {
        match (&a.cmpobj, &b.cmpobj) {
            (Some(x), Some(y)) => (x, y),
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
        }
    } else {
        (&a.obj, &b.obj)
    };
    if storing {
        x.as_ref().cmp(y.as_ref())
    } else {
        c_strcmp(x, y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Ctx {
        Ctx { now_ms: 1, seed: 0 }
    }

    fn args(a: &[&str]) -> Vec<Bytes> {
        a.iter().map(|s| Bytes::from(s.to_string())).collect()
    }

    fn apply(s: &mut Store, a: &[&str]) -> CmdResult {
        s.apply(0, &args(a), &ctx())
    }

    fn arr(items: &[&str]) -> CmdResult {
        Ok(Reply::Array(
            items
                .iter()
                .map(|s| Reply::Bulk(Bytes::from(s.to_string())))
                .collect(),
        ))
    }

    fn err(r: CmdResult) -> String {
        match r {
            Err(e) => e.text().into_owned(),
            Ok(v) => panic!("expected an error, got {v:?}"),
        }
    }

    #[test]
    fn numeric_alpha_desc_limit() {
        let mut s = Store::default();
        apply(&mut s, &["RPUSH", "l", "3", "1", "2", "10"]).unwrap();
        assert_eq!(apply(&mut s, &["SORT", "l"]), arr(&["1", "2", "3", "10"]));
        assert_eq!(
            apply(&mut s, &["SORT", "l", "ALPHA"]),
            arr(&["1", "10", "2", "3"])
        );
        assert_eq!(
            apply(&mut s, &["SORT", "l", "DESC", "LIMIT", "1", "2"]),
            arr(&["3", "2"])
        );
        assert_eq!(
            apply(&mut s, &["SORT", "l", "LIMIT", "-5", "1"]),
            arr(&["1"])
        );
        assert_eq!(apply(&mut s, &["SORT", "l", "LIMIT", "9", "1"]), arr(&[]));
        assert_eq!(
            apply(&mut s, &["SORT", "l", "LIMIT", "2", "9223372036854775807"]),
            arr(&["3", "10"])
        );
        apply(&mut s, &["RPUSH", "l", "x"]).unwrap();
        assert_eq!(err(apply(&mut s, &["SORT", "l"])), NOT_DOUBLE);
        assert_eq!(
            err(apply(&mut s, &["SORT", "l", "LIMIT", "1"])),
            "ERR syntax error"
        );
        assert_eq!(
            err(apply(&mut s, &["SORT", "l", "LIMIT", "a", "1"])),
            "ERR value is not an integer or out of range"
        );
        apply(&mut s, &["SET", "str", "1"]).unwrap();
        assert!(err(apply(&mut s, &["SORT", "str"])).starts_with("WRONGTYPE"));
        assert_eq!(
            err(apply(&mut s, &["SORT_RO", "l", "STORE", "d"])),
            "ERR syntax error"
        );
    }

    #[test]
    fn by_get_and_store() {
        let mut s = Store::default();
        apply(&mut s, &["RPUSH", "l", "a", "b", "c"]).unwrap();
        apply(&mut s, &["MSET", "w_a", "3", "w_b", "1", "w_c", "2"]).unwrap();
        apply(&mut s, &["HSET", "h_a", "f", "x"]).unwrap();
        assert_eq!(
            apply(&mut s, &["SORT", "l", "BY", "w_*"]),
            arr(&["b", "c", "a"])
        );
        assert_eq!(
            apply(&mut s, &["SORT", "l", "BY", "nosort", "DESC"]),
            arr(&["c", "b", "a"])
        );
        assert_eq!(
            apply(
                &mut s,
                &["SORT", "l", "BY", "w_*", "GET", "#", "GET", "h_*->f"]
            ),
            Ok(Reply::Array(vec![
                Reply::Bulk(Bytes::from("b")),
                Reply::Nil,
                Reply::Bulk(Bytes::from("c")),
                Reply::Nil,
                Reply::Bulk(Bytes::from("a")),
                Reply::Bulk(Bytes::from("x")),
            ]))
        );
        assert_eq!(
            apply(&mut s, &["SORT", "l", "BY", "w_*", "STORE", "d"]),
            Ok(Reply::Int(3))
        );
        assert_eq!(
            apply(&mut s, &["LRANGE", "d", "0", "-1"]),
            arr(&["b", "c", "a"])
        );
        assert_eq!(
            apply(&mut s, &["SORT", "missing", "STORE", "d"]),
            Ok(Reply::Int(0))
        );
        assert_eq!(apply(&mut s, &["EXISTS", "d"]), Ok(Reply::Int(0)));
    }

    #[test]
    fn key_finder() {
        let a = args(&[
            "SORT", "k", "LIMIT", "0", "1", "GET", "store", "STORE", "d1", "STORE", "d2",
        ]);
        assert_eq!(sort_keys(&a), vec![1, 10]);
        assert_eq!(sort_keys(&args(&["SORT", "k", "BY", "store"])), vec![1]);
    }

    #[test]
    fn slots() {
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(pattern_slot(b"{a}by*"), Some(key_slot(b"{a}mylist")));
        assert_eq!(pattern_slot(b"by*"), None);
        assert_eq!(pattern_slot(b"{}*"), None);
    }

    #[test]
    fn cluster_mode_refuses_patterns_in_other_slots() {
        let mut s = Store::new(1);
        s.cluster_mode = true;
        apply(&mut s, &["RPUSH", "{a}l", "1", "2", "3"]).unwrap();
        apply(
            &mut s,
            &["MSET", "{a}by1", "20", "{a}by2", "30", "{a}by3", "0"],
        )
        .unwrap();
        apply(
            &mut s,
            &["MSET", "{a}get1", "200", "{a}get2", "100", "{a}get3", "30"],
        )
        .unwrap();
        assert_eq!(
            err(apply(&mut s, &["SORT", "{a}l", "BY", "by*"])),
            BY_DENIED
        );
        assert_eq!(
            err(s.read(0, &args(&["SORT_RO", "{a}l", "BY", "by*"]), &ctx())),
            BY_DENIED
        );
        assert_eq!(
            err(apply(&mut s, &["SORT", "{a}l", "BY", "{b}by*"])),
            BY_DENIED
        );
        assert_eq!(
            err(apply(&mut s, &["SORT", "{a}l", "GET", "get*"])),
            GET_DENIED
        );
        assert_eq!(
            apply(&mut s, &["SORT", "{a}l", "BY", "{a}by*"]),
            arr(&["3", "1", "2"])
        );
        assert_eq!(
            apply(
                &mut s,
                &["SORT", "{a}l", "BY", "{a}by*", "GET", "{a}get*", "GET", "#"]
            ),
            arr(&["30", "3", "200", "1", "100", "2"])
        );
        // No `*`: nothing is sorted and no key is formed.
        assert_eq!(
            apply(&mut s, &["SORT", "{a}l", "BY", "nosort"]),
            arr(&["1", "2", "3"])
        );
        s.cluster_mode = false;
        assert_eq!(
            apply(&mut s, &["SORT", "{a}l", "BY", "by*"]),
            arr(&["1", "2", "3"])
        );
    }

    #[test]
    fn strtod_like_c() {
        assert_eq!(strtod_score(b""), Some(0.0));
        assert_eq!(strtod_score(b" 1.5"), Some(1.5));
        assert_eq!(strtod_score(b"1.5 "), None);
        assert_eq!(strtod_score(b"0x10"), Some(16.0));
        assert_eq!(strtod_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(strtod_score(b"nan"), None);
        assert_eq!(strtod_score(b"1e400"), None);
        assert_eq!(strtod_score(b"2\0x"), Some(2.0));
        assert_eq!(strtod_score(b"   "), None);
    }
}

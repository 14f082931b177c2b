//! Strings and counters: GET, SET and friends, INCR family, ranges.

use crate::args::eq_ic;
use crate::error::{CmdError, CmdResult};
use crate::store::{Ctx, Store};
use crate::table::{cmd, CommandSpec, Flags, Handler};
use bytes::Bytes;
use kvasir_engine_memory::Value;
use kvasir_resp::Reply;

const W: Flags = Flags::WRITE.union(Flags::DENYOOM);
const WF: Flags = W.union(Flags::FAST);
const RF: Flags = Flags::READONLY.union(Flags::FAST);
const ACL_W: &[&str] = &["write", "string", "slow"];
const ACL_WF: &[&str] = &["write", "string", "fast"];
const ACL_RF: &[&str] = &["read", "string", "fast"];
const G: &str = "string";

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("get", 2, RF, (1, 1, 1), ACL_RF, G, "1.0.0", "Returns the string value of a key.", Handler::Read(get)),
    cmd("set", -3, W, (1, 1, 1), ACL_W, G, "1.0.0", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", Handler::Write(set)),
];

/// The bytes of a string value (integers are formatted).
pub fn value_bytes(v: &Value) -> Result<Bytes, CmdError> {
    match v {
        Value::Str(s) => Ok(Bytes::copy_from_slice(s)),
        Value::Int(i) => Ok(Bytes::from(i.to_string())),
    }
}

fn get(store: &Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    match store.live(db, &args[1], ctx.now_ms) {
        Some(e) => Ok(Reply::Bulk(value_bytes(&e.value)?)),
        None => Ok(Reply::Nil),
    }
}

fn set(store: &mut Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let key = &args[1];
    let value = &args[2];
    let mut nx = false;
    let mut xx = false;
    let mut get_old = false;
    let mut keepttl = false;
    let mut expire: Option<u64> = None;
    let mut i = 3;
    while i < args.len() {
        let a = &args[i];
        let has_next = i + 1 < args.len();
        if eq_ic(a, "NX") && !xx {
            nx = true;
        } else if eq_ic(a, "XX") && !nx {
            xx = true;
        } else if eq_ic(a, "GET") {
            get_old = true;
        } else if eq_ic(a, "KEEPTTL") && expire.is_none() {
            keepttl = true;
        } else if (eq_ic(a, "EX") || eq_ic(a, "PX") || eq_ic(a, "EXAT") || eq_ic(a, "PXAT"))
            && expire.is_none()
            && !keepttl
            && has_next
        {
            let n = crate::args::parse_i64(&args[i + 1])?;
            let unit_ms = eq_ic(a, "EX") || eq_ic(a, "EXAT");
            if n <= 0 || (unit_ms && n > i64::MAX / 1000) {
                return Err(CmdError::InvalidExpire("set"));
            }
            let ms = if unit_ms { n * 1000 } else { n };
            let at = if eq_ic(a, "EX") || eq_ic(a, "PX") {
                (ctx.now_ms as i64)
                    .checked_add(ms)
                    .ok_or(CmdError::InvalidExpire("set"))?
            } else {
                ms
            };
            expire = Some(at as u64);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let exists = store.expire_if_needed(db, key, ctx);
    let old = if get_old {
        match store.db(db).get(key) {
            Some(e) => match &e.value {
                Value::Str(_) | Value::Int(_) => Some(value_bytes(&e.value)?),
            },
            None => None,
        }
    } else {
        None
    };
    if (nx && exists) || (xx && !exists) {
        return Ok(if get_old {
            old.map_or(Reply::Nil, Reply::Bulk)
        } else {
            Reply::Nil
        });
    }
    let ttl = if keepttl {
        store.db(db).get(key).and_then(|e| e.expire_at())
    } else {
        expire
    };
    store.db_mut(db).set(key, Value::from_bytes(value), ttl);
    Ok(if get_old {
        old.map_or(Reply::Nil, Reply::Bulk)
    } else {
        Reply::ok()
    })
}

//! Generic key commands: DEL, EXISTS, TYPE, RENAME, expiry, SCAN, ...

use crate::error::CmdResult;
use crate::store::{Ctx, Store};
use crate::table::{cmd, CommandSpec, Flags, Handler};
use bytes::Bytes;
use kvasir_resp::Reply;

const G: &str = "generic";

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("del", -2, Flags::WRITE, (1, -1, 1), &["keyspace", "write", "slow"], G, "1.0.0", "Deletes one or more keys.", Handler::Write(del)),
    cmd("exists", -2, Flags::READONLY.union(Flags::FAST), (1, -1, 1), &["keyspace", "read", "fast"], G, "1.0.0", "Determines whether one or more keys exist.", Handler::Read(exists)),
];

fn del(store: &mut Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let mut n = 0;
    for k in &args[1..] {
        if store.expire_if_needed(db, k, ctx) {
            store.db_mut(db).remove(k);
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

fn exists(store: &Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let n = args[1..]
        .iter()
        .filter(|k| store.live(db, k, ctx.now_ms).is_some())
        .count();
    Ok(Reply::Int(n as i64))
}

//! Server commands that work on the keyspace: DBSIZE, FLUSHDB, FLUSHALL,
//! SWAPDB, MEMORY USAGE. (Commands about connections and the process live
//! in the server crate; their table entries are in `connection`.)

use crate::error::CmdResult;
use crate::store::{Ctx, Store};
use crate::table::{cmd, CommandSpec, Flags, Handler};
use bytes::Bytes;
use kvasir_resp::Reply;

const G: &str = "server";

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("dbsize", 1, Flags::READONLY.union(Flags::FAST), (0, 0, 0), &["keyspace", "read", "fast"], G, "1.0.0", "Returns the number of keys in the database.", Handler::Read(dbsize)),
];

fn dbsize(store: &Store, db: usize, _args: &[Bytes], _ctx: &Ctx) -> CmdResult {
    Ok(Reply::Int(store.db(db).len() as i64))
}

//! Multi-raft for Kvasir: every shard is a raft-rs group; a node's loops
//! (one per shard thread) drive them over one raft-engine log and one
//! connection per peer.

pub mod bus_auth;
pub mod entry;
pub mod node;
pub mod snapfile;
pub mod storage;
pub mod transport;

pub use entry::EntryCtx;
pub use node::{
    open_log, Config, Fatal, GroupRoles, GroupSpec, GroupStatus, LogCounters, LogWriter, MultiRaft,
    RaftError, ReadMode, StateMachine, WalMode,
};
pub use raft::StateRole;
/// The node's Raft log, shared by its loops.
pub use raft_engine::Engine as LogEngine;

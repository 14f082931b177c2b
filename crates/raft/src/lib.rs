//! Multi-raft for Kvasir: every shard is a raft-rs group; one loop per node
//! drives them all over one raft-engine log and one connection per peer.

pub mod bus_auth;
pub mod entry;
pub mod node;
pub mod snapfile;
pub mod storage;
pub mod transport;

pub use entry::EntryCtx;
pub use node::{
    Config, Fatal, GroupSpec, GroupStatus, MultiRaft, RaftError, ReadMode, StateMachine, WalMode,
};
pub use raft::StateRole;

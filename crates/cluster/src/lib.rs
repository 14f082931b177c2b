//! Cluster logic for Kvasir, kept free of I/O so that every node computes
//! the same answers from the same inputs and everything here is unit-tested
//! without starting processes.
//!
//! - [`slot`]: CRC16 hash slots with `{hash tag}` rules (Redis Cluster).
//! - [`map`]: the cluster map (nodes, shards, slot ranges, replica sets),
//!   its deterministic bootstrap placement and its binary encoding (the map
//!   is stored in the metadata Raft group, group 0).
//! - [`reply`]: `CLUSTER SLOTS / SHARDS / NODES / INFO` replies shaped as
//!   Redis 7 shapes them, so cluster-aware clients work unchanged.
//! - [`route`]: the slot of a command's keys (CROSSSLOT) and the
//!   redirection errors (`-MOVED`, `-TRYAGAIN`, `-CLUSTERDOWN`).

pub mod map;
pub mod reply;
pub mod route;
pub mod slot;

pub use map::{
    cluster_id_from, node_name, parse_initial_cluster, parse_members, ClusterMap, Member, NodeInfo,
    ShardInfo,
};
pub use reply::View;
pub use route::{command_slot, RouteError};
pub use slot::{crc16, key_slot, SLOTS};

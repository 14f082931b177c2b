//! Kvasir's network front for one node.
//!
//! - [`config`]: the server settings (flags, TOML file, CONFIG GET/SET);
//!   [`redis_conf`] reads redis.conf files and redis-server's `--name value`
//!   flags.
//! - [`listener`]: accepts connections, enforces `maxclients`, runs the
//!   event loop, shuts down on signal or SHUTDOWN.
//! - [`session`]: one per connection: reads and parses requests, keeps the
//!   connection's state (RESP version, db, auth, name), writes replies in
//!   request order; over its own socket or, with `--threads N` > 1, over an
//!   I/O thread's ([`client_conn`], [`io_threads`]).
//! - [`router`]: the one path from a session to the data: the standalone
//!   store (one shard, no log) or the cluster's Raft groups by slot; the
//!   active expiry cycle of every shard the node orders.
//! - [`local_store`]: the standalone shard (`kvasir_core::Store`), stamping
//!   each write with the time and seed of its [`kvasir_core::Ctx`].
//! - [`admin`]: the commands answered here rather than by the keyspace
//!   (CLIENT, CONFIG, COMMAND, INFO, SLOWLOG, HELLO, ...), with [`info`]
//!   rendering INFO and [`clients`] the registry of open connections.
//! - [`tracking`]: client-side caching (CLIENT TRACKING): who may cache
//!   which keys, and the invalidations the write hooks ([`events`]) send.
//!
//! - [`persistence`]: RDB snapshots of the standalone server (SAVE,
//!   BGSAVE, `save` points, loading dump.rdb at start).
//! - [`maxmemory`]: commands refused while used memory is over `maxmemory`.
//! - [`acl`]: ACL users, their permission checks and the ACL log.
//! - [`debug`]: DEBUG, behind `enable-debug-command`.
//! - [`latency`]: the latency monitor (LATENCY).
//! - [`memory_stats`]: MEMORY STATS, DOCTOR, MALLOC-STATS and PURGE.
//! - [`client_pause`]: CLIENT PAUSE and UNPAUSE, which hold connections'
//!   next commands.
//! - [`monitor`]: MONITOR, every command run shown to monitoring
//!   connections.
//!
//! Every shard has one writer and no locks on the data path: standalone,
//! one event-loop thread owns the store, as redis-server does; in cluster
//! mode each Raft group belongs to one loop, the main thread's or a shard
//! thread's (`cluster::lanes`). I/O threads (`--threads N` > 1) only do
//! the client sockets' system calls.

pub mod acl;
pub mod admin;
pub mod aof;
pub mod aof_persistence;
pub mod blocking;
pub mod client_conn;
pub mod client_pause;
pub mod clients;
pub mod cluster;
pub mod command_latency;
pub mod config;
pub mod debug;
pub mod direct_gate;
pub mod events;
pub mod fork_child;
pub mod info;
pub mod io_threads;
pub mod latency;
pub mod listener;
pub mod loading;
pub mod local_store;
pub mod lolwut;
pub mod maxmemory;
pub mod memory_stats;
pub mod migrate;
pub mod monitor;
pub mod notify;
pub mod oom_score;
pub mod output_limits;
pub mod persistence;
pub mod pubsub;
pub mod redact;
pub mod redis_conf;
pub mod redis_params;
pub mod router;
pub mod session;
pub mod shutdown;
pub mod slowlog;
pub mod supervision;
pub mod tracking;
pub mod transaction;
pub mod watch;

pub use config::Config;
pub use listener::{run, Server};

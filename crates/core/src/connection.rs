//! Table entries of the commands answered by the session and server layer
//! (connection state, server introspection, administration). Their code is
//! in the server crate; their arity, flags and categories are here, in the
//! one command table.

use crate::table::{cmd, container, CommandSpec, Flags, Handler};
use bytes::Bytes;

/// A session command's handler in the server crate; the server matches
/// on every variant, so an entry without code does not compile.
pub(crate) const fn s(cmd: SessionCmd) -> Handler {
    Handler::Session(cmd)
}
const NONE: (i32, i32, i32) = (0, 0, 0);
const CONN: &str = "connection";
const TRANSACTIONS: &str = "transactions";
const PUBSUB: &str = "pubsub";
const SRV: &str = "server";

/// The commands the session and server layer answer (connection state,
/// introspection, administration, transactions, pub/sub, CLUSTER): the
/// handler of their table entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionCmd {
    /// COMMAND without a subcommand.
    CommandAll,
    Ping,
    Echo,
    Select,
    Auth,
    Hello,
    Quit,
    Reset,
    Info,
    Multi,
    Exec,
    Discard,
    Watch,
    Unwatch,
    Subscribe,
    Unsubscribe,
    Psubscribe,
    Punsubscribe,
    Publish,
    Ssubscribe,
    Sunsubscribe,
    Spublish,
    Time,
    Lastsave,
    Role,
    Readonly,
    Readwrite,
    Asking,
    Shutdown,
    Wait,
    Waitaof,
    Monitor,
    Save,
    Bgsave,
    Bgrewriteaof,
    Debug,
    Sync,
    Replconf,
    Lolwut,
    Pfselftest,
    Replicaof,
    Migrate,
    Module(ModuleCmd),
    Cluster(ClusterCmd),
    Client(ClientCmd),
    Config(ConfigCmd),
    Command(CommandCmd),
    Slowlog(SlowlogCmd),
    Latency(LatencyCmd),
    Memory(MemoryCmd),
    Acl(AclCmd),
    Pubsub(PubsubCmd),
}

/// CLUSTER subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterCmd {
    Slots,
    Shards,
    Nodes,
    Info,
    Myid,
    Keyslot,
    Countkeysinslot,
    Getkeysinslot,
    Myshardid,
    Links,
    Replicas,
    Slaves,
    Sharddigest,
    Meet,
    Forget,
    Replicate,
    Reset,
    CountFailureReports,
    Failover,
    Addslots,
    Addslotsrange,
    Delslots,
    Delslotsrange,
    Flushslots,
    Setslot,
    Saveconfig,
    SetConfigEpoch,
    Bumpepoch,
    Help,
}

/// CLIENT subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientCmd {
    Id,
    Setname,
    Getname,
    List,
    Info,
    Kill,
    NoEvict,
    NoTouch,
    Setinfo,
    Reply,
    Tracking,
    Trackinginfo,
    Getredir,
    Caching,
    Pause,
    Unpause,
    Unblock,
    Help,
}

/// CONFIG subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigCmd {
    Get,
    Set,
    Resetstat,
    Rewrite,
    Help,
}

/// COMMAND subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandCmd {
    Count,
    Info,
    Docs,
    Getkeys,
    Getkeysandflags,
    List,
    Help,
}

/// SLOWLOG subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlowlogCmd {
    Get,
    Len,
    Reset,
    Help,
}

/// MEMORY subcommands answered by the server (USAGE and HELP are the
/// keyspace's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryCmd {
    Stats,
    Doctor,
    MallocStats,
    Purge,
}

/// ACL subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclCmd {
    Cat,
    Deluser,
    Dryrun,
    Genpass,
    Getuser,
    List,
    Load,
    Log,
    Save,
    Setuser,
    Users,
    Whoami,
    Help,
}

/// MODULE subcommands (Kvasir loads no modules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleCmd {
    List,
    Load,
    Unload,
    Help,
}

/// LATENCY subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencyCmd {
    Latest,
    History,
    Reset,
    Doctor,
    Graph,
    Histogram,
    Help,
}

/// PUBSUB subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PubsubCmd {
    Channels,
    Numsub,
    Numpat,
    Shardchannels,
    Shardnumsub,
    Help,
}

const FAST_STALE: Flags = Flags::FAST.union(Flags::STALE).union(Flags::LOADING);
const LOADING_STALE: Flags = Flags::STALE.union(Flags::LOADING);
const NOSCRIPT_STALE: Flags = Flags::NOSCRIPT.union(Flags::LOADING).union(Flags::STALE);
const ADMIN: Flags = Flags::ADMIN
    .union(Flags::NOSCRIPT)
    .union(Flags::LOADING)
    .union(Flags::STALE);
/// Redis's flags of SAVE, BGSAVE, SYNC, REPLICAOF...: refused while the
/// data loads.
const ADMIN_NOT_LOADING: Flags = Flags::ADMIN.union(Flags::NOSCRIPT);

const fn sub(
    name: &'static str,
    arity: i32,
    flags: Flags,
    acl: &'static [&'static str],
    group: &'static str,
    summary: &'static str,
    handler: SessionCmd,
) -> CommandSpec {
    cmd(
        name,
        arity,
        flags,
        NONE,
        acl,
        group,
        "2.4.0",
        summary,
        s(handler),
    )
}

const CLUSTER: &str = "cluster";

#[rustfmt::skip]
const CLUSTER_SUBS: &[CommandSpec] = &[
    cmd("slots", 2, Flags::STALE, NONE, &["slow"], CLUSTER, "3.0.0", "Returns the mapping of cluster slots to nodes.", s(SessionCmd::Cluster(ClusterCmd::Slots))).with_tips(&["nondeterministic_output"]),
    cmd("shards", 2, Flags::STALE, NONE, &["slow"], CLUSTER, "7.0.0", "Returns the mapping of cluster slots to shards.", s(SessionCmd::Cluster(ClusterCmd::Shards))).with_tips(&["nondeterministic_output"]),
    cmd("nodes", 2, Flags::STALE, NONE, &["slow"], CLUSTER, "3.0.0", "Returns the cluster configuration for a node.", s(SessionCmd::Cluster(ClusterCmd::Nodes))).with_tips(&["nondeterministic_output"]),
    cmd("info", 2, Flags::STALE, NONE, &["slow"], CLUSTER, "3.0.0", "Returns information about the state of a node.", s(SessionCmd::Cluster(ClusterCmd::Info))).with_tips(&["nondeterministic_output"]),
    cmd("myid", 2, Flags::STALE, NONE, &["slow"], CLUSTER, "3.0.0", "Returns the ID of a node.", s(SessionCmd::Cluster(ClusterCmd::Myid))),
    cmd("keyslot", 3, Flags::STALE, NONE, &["slow"], CLUSTER, "3.0.0", "Returns the hash slot for a key.", s(SessionCmd::Cluster(ClusterCmd::Keyslot))),
    cmd("countkeysinslot", 3, Flags::STALE, NONE, &["slow"], CLUSTER, "3.0.0", "Returns the number of keys in a hash slot.", s(SessionCmd::Cluster(ClusterCmd::Countkeysinslot))),
    cmd("getkeysinslot", 4, Flags::STALE, NONE, &["slow"], CLUSTER, "3.0.0", "Returns the key names in a hash slot.", s(SessionCmd::Cluster(ClusterCmd::Getkeysinslot))).with_tips(&["nondeterministic_output"]),
    cmd("myshardid", 2, Flags::STALE, NONE, &["slow"], CLUSTER, "7.2.0", "Returns the shard ID of a node.", s(SessionCmd::Cluster(ClusterCmd::Myshardid))),
    cmd("links", 2, Flags::STALE, NONE, &["slow"], CLUSTER, "7.0.0", "Returns a list of all TCP links to and from peer nodes.", s(SessionCmd::Cluster(ClusterCmd::Links))).with_tips(&["nondeterministic_output"]),
    cmd("replicas", 3, Flags::ADMIN.union(Flags::STALE), NONE, &["admin", "slow", "dangerous"], CLUSTER, "5.0.0", "Lists the replica nodes of a master node.", s(SessionCmd::Cluster(ClusterCmd::Replicas))).with_tips(&["nondeterministic_output"]),
    cmd("slaves", 3, Flags::ADMIN.union(Flags::STALE), NONE, &["admin", "slow", "dangerous"], CLUSTER, "3.0.0", "Lists the replica nodes of a master node.", s(SessionCmd::Cluster(ClusterCmd::Slaves))).with_tips(&["nondeterministic_output"]),
    cmd("meet", -4, Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING), NONE, &["admin", "slow", "dangerous"], CLUSTER, "3.0.0", "Forces a node to handshake with another node.", s(SessionCmd::Cluster(ClusterCmd::Meet))),
    cmd("forget", 3, Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING), NONE, &["admin", "slow", "dangerous"], CLUSTER, "3.0.0", "Removes a node from the nodes table.", s(SessionCmd::Cluster(ClusterCmd::Forget))),
    cmd("replicate", 3, Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING), NONE, &["admin", "slow", "dangerous"], CLUSTER, "3.0.0", "Configure a node as replica of a master node.", s(SessionCmd::Cluster(ClusterCmd::Replicate))),
    cmd("reset", -2, Flags::ADMIN.union(Flags::STALE).union(Flags::NOSCRIPT), NONE, &["admin", "slow", "dangerous"], CLUSTER, "3.0.0", "Resets a node.", s(SessionCmd::Cluster(ClusterCmd::Reset))),
    cmd("count-failure-reports", 3, Flags::ADMIN.union(Flags::STALE), NONE, &["admin", "slow", "dangerous"], CLUSTER, "3.0.0", "Returns the number of active failure reports active for a node.", s(SessionCmd::Cluster(ClusterCmd::CountFailureReports))).with_tips(&["nondeterministic_output"]),
    cmd("failover", -2, Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING), NONE, &["admin", "slow", "dangerous"], CLUSTER, "3.0.0", "Forces a replica to perform a manual failover of its master.", s(SessionCmd::Cluster(ClusterCmd::Failover))),
    cmd("addslots", -3, Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING), NONE, &["admin", "slow", "dangerous"], CLUSTER, "3.0.0", "Assigns new hash slots to a node.", s(SessionCmd::Cluster(ClusterCmd::Addslots))),
    cmd("addslotsrange", -4, Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING), NONE, &["admin", "slow", "dangerous"], CLUSTER, "7.0.0", "Assigns new hash slot ranges to a node.", s(SessionCmd::Cluster(ClusterCmd::Addslotsrange))),
    cmd("delslots", -3, Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING), NONE, &["admin", "slow", "dangerous"], CLUSTER, "3.0.0", "Sets hash slots as unbound for a node.", s(SessionCmd::Cluster(ClusterCmd::Delslots))),
    cmd("delslotsrange", -4, Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING), NONE, &["admin", "slow", "dangerous"], CLUSTER, "7.0.0", "Sets hash slot ranges as unbound for a node.", s(SessionCmd::Cluster(ClusterCmd::Delslotsrange))),
    cmd("flushslots", 2, Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING), NONE, &["admin", "slow", "dangerous"], CLUSTER, "3.0.0", "Deletes all slots information from a node.", s(SessionCmd::Cluster(ClusterCmd::Flushslots))),
    cmd("setslot", -4, Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING), NONE, &["admin", "slow", "dangerous"], CLUSTER, "3.0.0", "Binds a hash slot to a node.", s(SessionCmd::Cluster(ClusterCmd::Setslot))),
    cmd("saveconfig", 2, Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING), NONE, &["admin", "slow", "dangerous"], CLUSTER, "3.0.0", "Forces a node to save the cluster configuration to disk.", s(SessionCmd::Cluster(ClusterCmd::Saveconfig))),
    cmd("set-config-epoch", 3, Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING), NONE, &["admin", "slow", "dangerous"], CLUSTER, "3.0.0", "Sets the configuration epoch for a new node.", s(SessionCmd::Cluster(ClusterCmd::SetConfigEpoch))),
    cmd("bumpepoch", 2, Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING), NONE, &["admin", "slow", "dangerous"], CLUSTER, "3.0.0", "Advances the cluster config epoch.", s(SessionCmd::Cluster(ClusterCmd::Bumpepoch))).with_tips(&["nondeterministic_output"]),
    cmd("sharddigest", 3, Flags::STALE, NONE, &["slow"], CLUSTER, "7.0.15", "Kvasir: this node's replica of a shard: applied index, keys and content digest.", s(SessionCmd::Cluster(ClusterCmd::Sharddigest))),
    cmd("help", 2, Flags::LOADING.union(Flags::STALE), NONE, &["slow"], CLUSTER, "3.0.0", "Returns helpful text about the different subcommands.", s(SessionCmd::Cluster(ClusterCmd::Help))),
];

#[rustfmt::skip]
const CLIENT_SUBS: &[CommandSpec] = &[
    sub("id", 2, NOSCRIPT_STALE, &["slow", "connection"], CONN, "Returns the unique client ID of the connection.", SessionCmd::Client(ClientCmd::Id)),
    sub("setname", 3, NOSCRIPT_STALE, &["slow", "connection"], CONN, "Sets the connection name.", SessionCmd::Client(ClientCmd::Setname)),
    sub("getname", 2, NOSCRIPT_STALE, &["slow", "connection"], CONN, "Returns the name of the connection.", SessionCmd::Client(ClientCmd::Getname)),
    sub("list", -2, ADMIN, &["admin", "slow", "dangerous", "connection"], CONN, "Lists open connections.", SessionCmd::Client(ClientCmd::List)).with_tips(&["nondeterministic_output"]),
    sub("info", 2, NOSCRIPT_STALE, &["slow", "connection"], CONN, "Returns information about the connection.", SessionCmd::Client(ClientCmd::Info)).with_tips(&["nondeterministic_output"]),
    sub("kill", -3, ADMIN, &["admin", "slow", "dangerous", "connection"], CONN, "Terminates open connections.", SessionCmd::Client(ClientCmd::Kill)),
    sub("no-evict", 3, ADMIN, &["admin", "slow", "dangerous", "connection"], CONN, "Sets the client eviction mode of the connection.", SessionCmd::Client(ClientCmd::NoEvict)),
    sub("no-touch", 3, NOSCRIPT_STALE, &["slow", "connection"], CONN, "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.", SessionCmd::Client(ClientCmd::NoTouch)).since("7.2.0"),
    sub("setinfo", 4, NOSCRIPT_STALE, &["slow", "connection"], CONN, "Sets information specific to the client or connection.", SessionCmd::Client(ClientCmd::Setinfo)).since("7.2.0"),
    sub("reply", 3, NOSCRIPT_STALE, &["slow", "connection"], CONN, "Instructs the server whether to reply to commands.", SessionCmd::Client(ClientCmd::Reply)),
    sub("tracking", -3, NOSCRIPT_STALE, &["slow", "connection"], CONN, "Controls server-assisted client-side caching for the connection.", SessionCmd::Client(ClientCmd::Tracking)),
    sub("trackinginfo", 2, NOSCRIPT_STALE, &["slow", "connection"], CONN, "Returns information about server-assisted client-side caching for the connection.", SessionCmd::Client(ClientCmd::Trackinginfo)),
    sub("getredir", 2, NOSCRIPT_STALE, &["slow", "connection"], CONN, "Returns the client ID to which the connection's tracking notifications are redirected.", SessionCmd::Client(ClientCmd::Getredir)),
    sub("caching", 3, NOSCRIPT_STALE, &["slow", "connection"], CONN, "Instructs the server whether to track the keys in the next request.", SessionCmd::Client(ClientCmd::Caching)),
    sub("pause", -3, ADMIN, &["admin", "slow", "dangerous", "connection"], CONN, "Suspends commands processing.", SessionCmd::Client(ClientCmd::Pause)),
    sub("unblock", -3, ADMIN, &["admin", "slow", "dangerous", "connection"], CONN, "Unblocks a client blocked by a blocking command from a different connection.", SessionCmd::Client(ClientCmd::Unblock)),
    sub("unpause", 2, ADMIN, &["admin", "slow", "dangerous", "connection"], CONN, "Resumes processing commands from paused clients.", SessionCmd::Client(ClientCmd::Unpause)),
    sub("help", 2, LOADING_STALE, &["slow", "connection"], CONN, "Returns helpful text about the different subcommands.", SessionCmd::Client(ClientCmd::Help)),
];

#[rustfmt::skip]
const CONFIG_SUBS: &[CommandSpec] = &[
    sub("get", -3, ADMIN, &["admin", "slow", "dangerous"], SRV, "Returns the effective values of configuration parameters.", SessionCmd::Config(ConfigCmd::Get)),
    sub("set", -4, ADMIN, &["admin", "slow", "dangerous"], SRV, "Sets configuration parameters in-flight.", SessionCmd::Config(ConfigCmd::Set)).with_tips(&["request_policy:all_nodes", "response_policy:all_succeeded"]),
    sub("rewrite", 2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Persists the effective configuration to file.", SessionCmd::Config(ConfigCmd::Rewrite)),
    sub("resetstat", 2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Resets the server's statistics.", SessionCmd::Config(ConfigCmd::Resetstat)),
    sub("help", 2, LOADING_STALE, &["slow"], SRV, "Returns helpful text about the different subcommands.", SessionCmd::Config(ConfigCmd::Help)),
];

#[rustfmt::skip]
const COMMAND_SUBS: &[CommandSpec] = &[
    sub("count", 2, LOADING_STALE, &["slow", "connection"], SRV, "Returns a count of commands.", SessionCmd::Command(CommandCmd::Count)),
    sub("info", -2, LOADING_STALE, &["slow", "connection"], SRV, "Returns information about one, multiple or all commands.", SessionCmd::Command(CommandCmd::Info)).with_tips(&["nondeterministic_output_order"]),
    sub("docs", -2, LOADING_STALE, &["slow", "connection"], SRV, "Returns documentary information about one, multiple or all commands.", SessionCmd::Command(CommandCmd::Docs)).with_tips(&["nondeterministic_output_order"]),
    sub("getkeys", -4, LOADING_STALE, &["slow", "connection"], SRV, "Extracts the key names from an arbitrary command.", SessionCmd::Command(CommandCmd::Getkeys)),
    sub("getkeysandflags", -4, LOADING_STALE, &["slow", "connection"], SRV, "Extracts the key names and access flags for an arbitrary command.", SessionCmd::Command(CommandCmd::Getkeysandflags)),
    sub("list", -2, LOADING_STALE, &["slow", "connection"], SRV, "Returns a list of command names.", SessionCmd::Command(CommandCmd::List)).with_tips(&["nondeterministic_output_order"]),
    sub("help", 2, LOADING_STALE, &["slow", "connection"], SRV, "Returns helpful text about the different subcommands.", SessionCmd::Command(CommandCmd::Help)),
];

#[rustfmt::skip]
const SLOWLOG_SUBS: &[CommandSpec] = &[
    sub("get", -2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Returns the slow log's entries.", SessionCmd::Slowlog(SlowlogCmd::Get)).with_tips(&["request_policy:all_nodes", "nondeterministic_output"]),
    sub("len", 2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Returns the number of entries in the slow log.", SessionCmd::Slowlog(SlowlogCmd::Len)).with_tips(&["request_policy:all_nodes", "response_policy:agg_sum", "nondeterministic_output"]),
    sub("reset", 2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Clears all entries from the slow log.", SessionCmd::Slowlog(SlowlogCmd::Reset)).with_tips(&["request_policy:all_nodes", "response_policy:all_succeeded"]),
    sub("help", 2, LOADING_STALE, &["slow"], SRV, "Show helpful text about the different subcommands.", SessionCmd::Slowlog(SlowlogCmd::Help)),
];

#[rustfmt::skip]
const ACL_SUBS: &[CommandSpec] = &[
    sub("cat", -2, NOSCRIPT_STALE, &["slow"], SRV, "Lists the ACL categories, or the commands inside a category.", SessionCmd::Acl(AclCmd::Cat)),
    sub("deluser", -3, ADMIN, &["admin", "slow", "dangerous"], SRV, "Deletes ACL users, and terminates their connections.", SessionCmd::Acl(AclCmd::Deluser)),
    sub("dryrun", -4, ADMIN, &["admin", "slow", "dangerous"], SRV, "Simulates the execution of a command by a user, without executing the command.", SessionCmd::Acl(AclCmd::Dryrun)),
    sub("genpass", -2, NOSCRIPT_STALE, &["slow"], SRV, "Generates a pseudorandom, secure password that can be used to identify ACL users.", SessionCmd::Acl(AclCmd::Genpass)),
    sub("getuser", 3, ADMIN, &["admin", "slow", "dangerous"], SRV, "Lists the ACL rules of a user.", SessionCmd::Acl(AclCmd::Getuser)),
    sub("list", 2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Dumps the effective rules in ACL file format.", SessionCmd::Acl(AclCmd::List)),
    sub("load", 2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Reloads the rules from the configured ACL file.", SessionCmd::Acl(AclCmd::Load)),
    sub("log", -2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Lists recent security events generated due to ACL rules.", SessionCmd::Acl(AclCmd::Log)),
    sub("save", 2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Saves the effective ACL rules in the configured ACL file.", SessionCmd::Acl(AclCmd::Save)),
    sub("setuser", -3, ADMIN, &["admin", "slow", "dangerous"], SRV, "Creates and modifies an ACL user and its rules.", SessionCmd::Acl(AclCmd::Setuser)),
    sub("users", 2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Lists all ACL users.", SessionCmd::Acl(AclCmd::Users)),
    sub("whoami", 2, NOSCRIPT_STALE, &["slow"], SRV, "Returns the authenticated username of the current connection.", SessionCmd::Acl(AclCmd::Whoami)),
    sub("help", 2, LOADING_STALE, &["slow"], SRV, "Returns helpful text about the different subcommands.", SessionCmd::Acl(AclCmd::Help)),
];

#[rustfmt::skip]
const MODULE_SUBS: &[CommandSpec] = &[
    sub("list", 2, Flags::ADMIN.union(Flags::NOSCRIPT), &["admin", "slow", "dangerous"], SRV, "Returns all loaded modules.", SessionCmd::Module(ModuleCmd::List)).with_tips(&["nondeterministic_output_order"]),
    sub("load", -3, Flags::ADMIN.union(Flags::NOSCRIPT).union(Flags::NO_ASYNC_LOADING), &["admin", "slow", "dangerous"], SRV, "Loads a module.", SessionCmd::Module(ModuleCmd::Load)),
    sub("loadex", -3, Flags::ADMIN.union(Flags::NOSCRIPT).union(Flags::NO_ASYNC_LOADING), &["admin", "slow", "dangerous"], SRV, "Loads a module using extended parameters.", SessionCmd::Module(ModuleCmd::Load)),
    sub("unload", 3, Flags::ADMIN.union(Flags::NOSCRIPT).union(Flags::NO_ASYNC_LOADING), &["admin", "slow", "dangerous"], SRV, "Unloads a module.", SessionCmd::Module(ModuleCmd::Unload)),
    sub("help", 2, Flags::LOADING.union(Flags::STALE), &["slow"], SRV, "Returns helpful text about the different subcommands.", SessionCmd::Module(ModuleCmd::Help)),
];

#[rustfmt::skip]
const LATENCY_SUBS: &[CommandSpec] = &[
    sub("latest", 2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Returns the latest latency samples for all events.", SessionCmd::Latency(LatencyCmd::Latest)).with_tips(&["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    sub("history", 3, ADMIN, &["admin", "slow", "dangerous"], SRV, "Returns timestamp-latency samples for an event.", SessionCmd::Latency(LatencyCmd::History)).with_tips(&["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    sub("reset", -2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Resets the latency data for one or more events.", SessionCmd::Latency(LatencyCmd::Reset)).with_tips(&["request_policy:all_nodes", "response_policy:all_succeeded"]),
    sub("doctor", 2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Returns a human-readable latency analysis report.", SessionCmd::Latency(LatencyCmd::Doctor)).with_tips(&["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    sub("graph", 3, ADMIN, &["admin", "slow", "dangerous"], SRV, "Returns a latency graph for an event.", SessionCmd::Latency(LatencyCmd::Graph)).with_tips(&["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    sub("histogram", -2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Returns the cumulative distribution of latencies of a subset or all commands.", SessionCmd::Latency(LatencyCmd::Histogram)).with_tips(&["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    sub("help", 2, LOADING_STALE, &["slow"], SRV, "Returns helpful text about the different subcommands.", SessionCmd::Latency(LatencyCmd::Help)),
];

#[rustfmt::skip]
const PUBSUB_SUBS: &[CommandSpec] = &[
    sub("channels", -2, Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE), &["pubsub", "slow"], PUBSUB, "Returns the active channels.", SessionCmd::Pubsub(PubsubCmd::Channels)),
    sub("numsub", -2, Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE), &["pubsub", "slow"], PUBSUB, "Returns a count of subscribers to channels.", SessionCmd::Pubsub(PubsubCmd::Numsub)),
    sub("numpat", 2, Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE), &["pubsub", "slow"], PUBSUB, "Returns a count of unique pattern subscriptions.", SessionCmd::Pubsub(PubsubCmd::Numpat)),
    sub("shardchannels", -2, Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE), &["pubsub", "slow"], PUBSUB, "Returns the active shard channels.", SessionCmd::Pubsub(PubsubCmd::Shardchannels)),
    sub("shardnumsub", -2, Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE), &["pubsub", "slow"], PUBSUB, "Returns the count of subscribers of shard channels.", SessionCmd::Pubsub(PubsubCmd::Shardnumsub)),
    sub("help", 2, LOADING_STALE, &["slow"], PUBSUB, "Returns helpful text about the different subcommands.", SessionCmd::Pubsub(PubsubCmd::Help)),
];

const TXN: Flags = Flags::NOSCRIPT
    .union(Flags::LOADING)
    .union(Flags::STALE)
    .union(Flags::FAST)
    .union(Flags::ALLOW_BUSY);
const SUBSCRIBE: Flags = Flags::PUBSUB
    .union(Flags::NOSCRIPT)
    .union(Flags::LOADING)
    .union(Flags::STALE);

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("ping", -1, Flags::FAST, NONE, &["fast", "connection"], CONN, "1.0.0", "Returns the server's liveliness response.", s(SessionCmd::Ping)).with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    cmd("echo", 2, FAST_STALE, NONE, &["fast", "connection"], CONN, "1.0.0", "Returns the given string.", s(SessionCmd::Echo)),
    cmd("select", 2, FAST_STALE, NONE, &["fast", "connection"], CONN, "1.0.0", "Changes the selected database.", s(SessionCmd::Select)),
    cmd("auth", -2, Flags::NOSCRIPT.union(Flags::LOADING).union(Flags::STALE).union(Flags::FAST).union(Flags::NO_AUTH).union(Flags::ALLOW_BUSY), NONE, &["fast", "connection"], CONN, "1.0.0", "Authenticates the connection.", s(SessionCmd::Auth)),
    cmd("hello", -1, Flags::NOSCRIPT.union(Flags::LOADING).union(Flags::STALE).union(Flags::FAST).union(Flags::NO_AUTH).union(Flags::ALLOW_BUSY), NONE, &["fast", "connection"], CONN, "6.0.0", "Handshakes with the Redis server.", s(SessionCmd::Hello)),
    cmd("quit", -1, Flags::NOSCRIPT.union(Flags::LOADING).union(Flags::STALE).union(Flags::FAST).union(Flags::NO_AUTH).union(Flags::ALLOW_BUSY), NONE, &["fast", "connection"], CONN, "1.0.0", "Closes the connection.", s(SessionCmd::Quit)),
    cmd("reset", 1, Flags::NOSCRIPT.union(Flags::LOADING).union(Flags::STALE).union(Flags::FAST).union(Flags::NO_AUTH).union(Flags::ALLOW_BUSY), NONE, &["fast", "connection"], CONN, "6.2.0", "Resets the connection.", s(SessionCmd::Reset)),
    container("client", -2, &["slow"], CONN, "2.4.0", "A container for client connection commands.", CLIENT_SUBS),
    cmd("info", -1, Flags::LOADING.union(Flags::STALE), NONE, &["slow", "dangerous"], SRV, "1.0.0", "Returns information and statistics about the server.", s(SessionCmd::Info)).with_tips(&["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    container("config", -2, &["slow"], SRV, "2.4.0", "A container for server configuration commands.", CONFIG_SUBS),
    CommandSpec { handler: s(SessionCmd::CommandAll), flags: Flags::LOADING.union(Flags::STALE), ..container("command", -1, &["slow", "connection"], SRV, "2.4.0", "Returns detailed information about all commands.", COMMAND_SUBS) }.with_tips(&["nondeterministic_output_order"]),
    cmd("multi", 1, TXN, NONE, &["fast", "transaction"], TRANSACTIONS, "1.2.0", "Starts a transaction.", s(SessionCmd::Multi)),
    cmd("exec", 1, Flags::NOSCRIPT.union(Flags::LOADING).union(Flags::STALE).union(Flags::SKIP_SLOWLOG), NONE, &["slow", "transaction"], TRANSACTIONS, "1.2.0", "Executes all commands in a transaction.", s(SessionCmd::Exec)),
    cmd("discard", 1, TXN, NONE, &["fast", "transaction"], TRANSACTIONS, "2.0.0", "Discards a transaction.", s(SessionCmd::Discard)),
    cmd("watch", -2, TXN, (1, -1, 1), &["fast", "transaction"], TRANSACTIONS, "2.2.0", "Monitors changes to keys to determine the execution of a transaction.", s(SessionCmd::Watch)).keys_access(crate::table::KeyAccess::Existence),
    cmd("unwatch", 1, TXN, NONE, &["fast", "transaction"], TRANSACTIONS, "2.2.0", "Forgets about watched keys of a transaction.", s(SessionCmd::Unwatch)),
    cmd("subscribe", -2, SUBSCRIBE, NONE, &["pubsub", "slow"], PUBSUB, "2.0.0", "Listens for messages published to channels.", s(SessionCmd::Subscribe)),
    cmd("unsubscribe", -1, SUBSCRIBE, NONE, &["pubsub", "slow"], PUBSUB, "2.0.0", "Stops listening to messages posted to channels.", s(SessionCmd::Unsubscribe)),
    cmd("psubscribe", -2, SUBSCRIBE, NONE, &["pubsub", "slow"], PUBSUB, "2.0.0", "Listens for messages published to channels that match one or more patterns.", s(SessionCmd::Psubscribe)),
    cmd("punsubscribe", -1, SUBSCRIBE, NONE, &["pubsub", "slow"], PUBSUB, "2.0.0", "Stops listening to messages published to channels that match one or more patterns.", s(SessionCmd::Punsubscribe)),
    cmd("publish", 3, Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE).union(Flags::FAST).union(Flags::MAY_REPLICATE), NONE, &["pubsub", "fast"], PUBSUB, "2.0.0", "Posts a message to a channel.", s(SessionCmd::Publish)),
    cmd("ssubscribe", -2, SUBSCRIBE, (1, -1, 1), &["pubsub", "slow"], PUBSUB, "7.0.0", "Listens for messages published to shard channels.", s(SessionCmd::Ssubscribe)).with_key_specs(&[crate::table::KeySpec::NOT_KEY]),
    cmd("sunsubscribe", -1, SUBSCRIBE, (1, -1, 1), &["pubsub", "slow"], PUBSUB, "7.0.0", "Stops listening to messages posted to shard channels.", s(SessionCmd::Sunsubscribe)).with_key_specs(&[crate::table::KeySpec::NOT_KEY]),
    cmd("spublish", 3, Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE).union(Flags::FAST).union(Flags::MAY_REPLICATE), (1, 1, 1), &["pubsub", "fast"], PUBSUB, "7.0.0", "Post a message to a shard channel", s(SessionCmd::Spublish)).with_key_specs(&[crate::table::KeySpec::NOT_KEY]),
    container("pubsub", -2, &["slow"], PUBSUB, "2.8.0", "A container for Pub/Sub commands.", PUBSUB_SUBS),
    container("acl", -2, &["slow"], SRV, "6.0.0", "A container for Access List Control commands.", ACL_SUBS),
    container("latency", -2, &["slow"], SRV, "2.8.13", "A container for latency diagnostics commands.", LATENCY_SUBS),
    container("module", -2, &["slow"], SRV, "4.0.0", "A container for module commands.", MODULE_SUBS),
    CommandSpec { key_finder: Some(migrate_keys), ..cmd("migrate", -6, Flags::WRITE.union(Flags::MOVABLEKEYS), (3, 3, 1), &["keyspace", "write", "slow", "dangerous"], "generic", "2.6.0", "Atomically transfers a key from one Redis instance to another.", s(SessionCmd::Migrate)) }.with_key_specs(&[crate::table::ks::RW_ACCESS_DELETE, crate::table::KeySpec::RW.union(crate::table::KeySpec::ACCESS).union(crate::table::KeySpec::DELETE).union(crate::table::KeySpec::INCOMPLETE)]).with_tips(&["nondeterministic_output"]),
    cmd("replicaof", 3, ADMIN_NOT_LOADING.union(Flags::NO_ASYNC_LOADING).union(Flags::STALE), NONE, &["admin", "slow", "dangerous"], SRV, "5.0.0", "Configures a server as replica of another, or promotes it to a master.", s(SessionCmd::Replicaof)),
    cmd("slaveof", 3, ADMIN_NOT_LOADING.union(Flags::NO_ASYNC_LOADING).union(Flags::STALE), NONE, &["admin", "slow", "dangerous"], SRV, "1.0.0", "Sets a Redis server as a replica of another, or promotes it to being a master.", s(SessionCmd::Replicaof)),
    container("slowlog", -2, &["slow"], SRV, "2.4.0", "A container for slow log commands.", SLOWLOG_SUBS),
    cmd("time", 1, FAST_STALE, NONE, &["fast"], SRV, "2.6.0", "Returns the server time.", s(SessionCmd::Time)).with_tips(&["nondeterministic_output"]),
    cmd("lastsave", 1, FAST_STALE, NONE, &["admin", "fast", "dangerous"], SRV, "1.0.0", "Returns the Unix timestamp of the last successful save to disk.", s(SessionCmd::Lastsave)).with_tips(&["nondeterministic_output"]),
    container("cluster", -2, &["slow"], CLUSTER, "3.0.0", "A container for Redis Cluster commands.", CLUSTER_SUBS),
    cmd("role", 1, Flags::NOSCRIPT.union(Flags::LOADING).union(Flags::STALE).union(Flags::FAST), NONE, &["admin", "fast", "dangerous"], SRV, "2.8.12", "Returns the replication role.", s(SessionCmd::Role)),
    cmd("readonly", 1, FAST_STALE, NONE, &["fast", "connection"], CLUSTER, "3.0.0", "Enables read-only queries for a connection to a Redis Cluster replica node.", s(SessionCmd::Readonly)),
    cmd("readwrite", 1, FAST_STALE, NONE, &["fast", "connection"], CLUSTER, "3.0.0", "Enables read-write queries for a connection to a Redis Cluster replica node.", s(SessionCmd::Readwrite)),
    cmd("asking", 1, Flags::FAST, NONE, &["fast", "connection"], CLUSTER, "3.0.0", "Signals that a cluster client is following an -ASK redirect.", s(SessionCmd::Asking)),
    cmd("save", 1, ADMIN_NOT_LOADING.union(Flags::NO_ASYNC_LOADING).union(Flags::NO_MULTI), NONE, &["admin", "slow", "dangerous"], SRV, "1.0.0", "Synchronously saves the database(s) to disk.", s(SessionCmd::Save)),
    cmd("bgsave", -1, ADMIN_NOT_LOADING.union(Flags::NO_ASYNC_LOADING), NONE, &["admin", "slow", "dangerous"], SRV, "1.0.0", "Asynchronously saves the database(s) to disk.", s(SessionCmd::Bgsave)),
    cmd("bgrewriteaof", 1, ADMIN_NOT_LOADING.union(Flags::NO_ASYNC_LOADING), NONE, &["admin", "slow", "dangerous"], SRV, "1.0.0", "Asynchronously rewrites the append-only file to disk.", s(SessionCmd::Bgrewriteaof)),
    cmd("sync", 1, ADMIN_NOT_LOADING.union(Flags::NO_ASYNC_LOADING).union(Flags::NO_MULTI), NONE, &["admin", "slow", "dangerous"], SRV, "1.0.0", "An internal command used in replication.", s(SessionCmd::Sync)),
    cmd("replconf", -1, ADMIN.union(Flags::NO_MULTI), NONE, &["admin", "slow", "dangerous"], SRV, "3.0.0", "An internal command for configuring the replication stream.", s(SessionCmd::Replconf)),
    cmd("lolwut", -1, Flags::READONLY.union(Flags::FAST), NONE, &["read", "fast"], SRV, "5.0.0", "Displays computer art and the Redis version", s(SessionCmd::Lolwut)),
    cmd("debug", -2, ADMIN, NONE, &["admin", "slow", "dangerous"], SRV, "1.0.0", "A container for debugging commands.", s(SessionCmd::Debug)),
    cmd("monitor", 1, ADMIN, NONE, &["admin", "slow", "dangerous"], SRV, "1.0.0", "Listens for all requests received by the server in real-time.", s(SessionCmd::Monitor)),
    cmd("wait", 3, Flags::NOSCRIPT, NONE, &["slow", "connection"], "generic", "3.0.0", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.", s(SessionCmd::Wait)).with_tips(&["request_policy:all_shards", "response_policy:agg_min"]),
    cmd("waitaof", 4, Flags::NOSCRIPT, NONE, &["slow", "connection"], "generic", "7.2.0", "Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas.", s(SessionCmd::Waitaof)),
    cmd("shutdown", -1, ADMIN.union(Flags::NO_MULTI).union(Flags::ALLOW_BUSY), NONE, &["admin", "slow", "dangerous"], SRV, "1.0.0", "Synchronously saves the database(s) to disk and shuts down the Redis server.", s(SessionCmd::Shutdown)),
];

/// MIGRATE's keys: the key argument, or (when it is empty) those after the
/// KEYS option; AUTH and AUTH2 take one and two arguments (Redis's
/// migrateGetKeys).
pub fn migrate_keys(args: &[Bytes]) -> Vec<usize> {
    let mut i = 6;
    while i < args.len() {
        let a = &args[i];
        if crate::args::eq_ic(a, "auth") {
            i += 1;
        } else if crate::args::eq_ic(a, "auth2") {
            i += 2;
        } else if crate::args::eq_ic(a, "keys") {
            if args.get(3).is_some_and(|k| k.is_empty()) {
                return (i + 1..args.len()).collect();
            }
            break;
        }
        i += 1;
    }
    if args.len() > 3 {
        vec![3]
    } else {
        Vec::new()
    }
}

//! Table entries of the commands answered by the session and server layer
//! (connection state, server introspection, administration). Their code is
//! in the server crate; their arity, flags and categories are here, in the
//! one command table.

use crate::table::{cmd, container, CommandSpec, Flags, Handler};

const S: Handler = Handler::Session;
const NONE: (i32, i32, i32) = (0, 0, 0);
const CONN: &str = "connection";
const TRANSACTIONS: &str = "transactions";
const PUBSUB: &str = "pubsub";
const SRV: &str = "server";

const FAST_STALE: Flags = Flags::FAST.union(Flags::STALE).union(Flags::LOADING);
const NOSCRIPT_STALE: Flags = Flags::NOSCRIPT.union(Flags::LOADING).union(Flags::STALE);
const ADMIN: Flags = Flags::ADMIN
    .union(Flags::NOSCRIPT)
    .union(Flags::LOADING)
    .union(Flags::STALE);

const fn sub(
    name: &'static str,
    arity: i32,
    flags: Flags,
    acl: &'static [&'static str],
    group: &'static str,
    summary: &'static str,
) -> CommandSpec {
    cmd(name, arity, flags, NONE, acl, group, "2.4.0", summary, S)
}

const CLUSTER: &str = "cluster";

#[rustfmt::skip]
const CLUSTER_SUBS: &[CommandSpec] = &[
    cmd("slots", 2, Flags::LOADING.union(Flags::STALE), NONE, &["slow"], CLUSTER, "3.0.0", "Returns the mapping of cluster slots to nodes.", S),
    cmd("shards", 2, Flags::LOADING.union(Flags::STALE), NONE, &["slow"], CLUSTER, "7.0.0", "Returns the mapping of cluster slots to shards.", S),
    cmd("nodes", 2, Flags::LOADING.union(Flags::STALE), NONE, &["slow"], CLUSTER, "3.0.0", "Returns the cluster configuration for a node.", S),
    cmd("info", 2, Flags::LOADING.union(Flags::STALE), NONE, &["slow"], CLUSTER, "3.0.0", "Returns information about the state of a node.", S),
    cmd("myid", 2, Flags::LOADING.union(Flags::STALE), NONE, &["slow"], CLUSTER, "3.0.0", "Returns the ID of a node.", S),
    cmd("keyslot", 3, Flags::LOADING.union(Flags::STALE), NONE, &["slow"], CLUSTER, "3.0.0", "Returns the hash slot for a key.", S),
    cmd("countkeysinslot", 3, Flags::LOADING.union(Flags::STALE), NONE, &["slow"], CLUSTER, "3.0.0", "Returns the number of keys in a hash slot.", S),
    cmd("getkeysinslot", 4, Flags::LOADING.union(Flags::STALE), NONE, &["slow"], CLUSTER, "3.0.0", "Returns the key names in a hash slot.", S),
    cmd("myshardid", 2, Flags::LOADING.union(Flags::STALE), NONE, &["slow"], CLUSTER, "7.2.0", "Returns the shard ID of a node.", S),
    cmd("links", 2, Flags::LOADING.union(Flags::STALE), NONE, &["slow"], CLUSTER, "7.0.0", "Returns a list of all TCP links to and from peer nodes.", S),
    cmd("replicas", 3, Flags::ADMIN.union(Flags::STALE), NONE, &["admin", "slow", "dangerous"], CLUSTER, "5.0.0", "Lists the replica nodes of a master node.", S),
    cmd("slaves", 3, Flags::ADMIN.union(Flags::STALE), NONE, &["admin", "slow", "dangerous"], CLUSTER, "3.0.0", "Lists the replica nodes of a master node.", S),
    cmd("sharddigest", 3, Flags::LOADING.union(Flags::STALE), NONE, &["slow"], CLUSTER, "7.0.15", "Kvasir: this node's replica of a shard: applied index, keys and content digest.", S),
    cmd("help", 2, Flags::LOADING.union(Flags::STALE), NONE, &["slow"], CLUSTER, "3.0.0", "Returns helpful text about the different subcommands.", S),
];

#[rustfmt::skip]
const CLIENT_SUBS: &[CommandSpec] = &[
    sub("id", 2, NOSCRIPT_STALE, &["slow", "connection"], CONN, "Returns the unique client ID of the connection."),
    sub("setname", 3, NOSCRIPT_STALE, &["slow", "connection"], CONN, "Sets the connection name."),
    sub("getname", 2, NOSCRIPT_STALE, &["slow", "connection"], CONN, "Returns the name of the connection."),
    sub("list", -2, ADMIN, &["admin", "slow", "dangerous", "connection"], CONN, "Lists open connections."),
    sub("info", 2, NOSCRIPT_STALE, &["slow", "connection"], CONN, "Returns information about the connection."),
    sub("kill", -3, ADMIN, &["admin", "slow", "dangerous", "connection"], CONN, "Terminates open connections."),
    sub("no-evict", 3, ADMIN, &["admin", "slow", "dangerous", "connection"], CONN, "Sets the client eviction mode of the connection."),
    sub("help", 2, FAST_STALE, &["slow", "connection"], CONN, "Returns helpful text about the different subcommands."),
];

#[rustfmt::skip]
const CONFIG_SUBS: &[CommandSpec] = &[
    sub("get", -3, ADMIN, &["admin", "slow", "dangerous"], SRV, "Returns the effective values of configuration parameters."),
    sub("set", -4, ADMIN, &["admin", "slow", "dangerous"], SRV, "Sets configuration parameters in-flight."),
    sub("resetstat", 2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Resets the server's statistics."),
    sub("help", 2, FAST_STALE, &["slow"], SRV, "Returns helpful text about the different subcommands."),
];

#[rustfmt::skip]
const COMMAND_SUBS: &[CommandSpec] = &[
    sub("count", 2, FAST_STALE, &["slow", "connection"], SRV, "Returns a count of commands."),
    sub("info", -2, FAST_STALE, &["slow", "connection"], SRV, "Returns information about one, multiple or all commands."),
    sub("docs", -2, FAST_STALE, &["slow", "connection"], SRV, "Returns documentary information about one, multiple or all commands."),
    sub("getkeys", -4, FAST_STALE, &["slow", "connection"], SRV, "Extracts the key names from an arbitrary command."),
    sub("list", -2, FAST_STALE, &["slow", "connection"], SRV, "Returns a list of command names."),
    sub("help", 2, FAST_STALE, &["slow", "connection"], SRV, "Returns helpful text about the different subcommands."),
];

#[rustfmt::skip]
const SLOWLOG_SUBS: &[CommandSpec] = &[
    sub("get", -2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Returns the slow log's entries."),
    sub("len", 2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Returns the number of entries in the slow log."),
    sub("reset", 2, ADMIN, &["admin", "slow", "dangerous"], SRV, "Clears all entries from the slow log."),
    sub("help", 2, FAST_STALE, &["slow"], SRV, "Show helpful text about the different subcommands."),
];

#[rustfmt::skip]
const PUBSUB_SUBS: &[CommandSpec] = &[
    sub("channels", -2, Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE), &["pubsub", "slow"], PUBSUB, "Returns the active channels."),
    sub("numsub", -2, Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE), &["pubsub", "slow"], PUBSUB, "Returns a count of subscribers to channels."),
    sub("numpat", 2, Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE), &["pubsub", "slow"], PUBSUB, "Returns a count of unique pattern subscriptions."),
    sub("shardchannels", -2, Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE), &["pubsub", "slow"], PUBSUB, "Returns the active shard channels."),
    sub("shardnumsub", -2, Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE), &["pubsub", "slow"], PUBSUB, "Returns the count of subscribers of shard channels."),
    sub("help", 2, FAST_STALE, &["slow"], PUBSUB, "Returns helpful text about the different subcommands."),
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
    cmd("ping", -1, FAST_STALE, NONE, &["fast", "connection"], CONN, "1.0.0", "Returns the server's liveliness response.", S),
    cmd("echo", 2, FAST_STALE, NONE, &["fast", "connection"], CONN, "1.0.0", "Returns the given string.", S),
    cmd("select", 2, FAST_STALE, NONE, &["fast", "connection"], CONN, "1.0.0", "Changes the selected database.", S),
    cmd("auth", -2, Flags::NOSCRIPT.union(Flags::LOADING).union(Flags::STALE).union(Flags::FAST).union(Flags::NO_AUTH), NONE, &["fast", "connection"], CONN, "1.0.0", "Authenticates the connection.", S),
    cmd("hello", -1, Flags::NOSCRIPT.union(Flags::LOADING).union(Flags::STALE).union(Flags::FAST).union(Flags::NO_AUTH), NONE, &["fast", "connection"], CONN, "6.0.0", "Handshakes with the Redis server.", S),
    cmd("quit", -1, Flags::NOSCRIPT.union(Flags::LOADING).union(Flags::STALE).union(Flags::FAST).union(Flags::NO_AUTH).union(Flags::ALLOW_BUSY), NONE, &["fast", "connection"], CONN, "1.0.0", "Closes the connection.", S),
    cmd("reset", 1, Flags::NOSCRIPT.union(Flags::LOADING).union(Flags::STALE).union(Flags::FAST).union(Flags::NO_AUTH), NONE, &["fast", "connection"], CONN, "6.2.0", "Resets the connection.", S),
    container("client", -2, &["slow"], CONN, "2.4.0", "A container for client connection commands.", CLIENT_SUBS),
    cmd("info", -1, Flags::LOADING.union(Flags::STALE), NONE, &["slow", "dangerous"], SRV, "1.0.0", "Returns information and statistics about the server.", S),
    container("config", -2, &["slow"], SRV, "2.4.0", "A container for server configuration commands.", CONFIG_SUBS),
    container("command", -1, &["slow", "connection"], SRV, "2.4.0", "Returns detailed information about all commands.", COMMAND_SUBS),
    cmd("multi", 1, TXN, NONE, &["fast", "transaction"], TRANSACTIONS, "1.2.0", "Starts a transaction.", S),
    cmd("exec", 1, Flags::NOSCRIPT.union(Flags::LOADING).union(Flags::STALE).union(Flags::SKIP_SLOWLOG), NONE, &["slow", "transaction"], TRANSACTIONS, "1.2.0", "Executes all commands in a transaction.", S),
    cmd("discard", 1, TXN, NONE, &["fast", "transaction"], TRANSACTIONS, "2.0.0", "Discards a transaction.", S),
    cmd("watch", -2, TXN, (1, -1, 1), &["fast", "transaction"], TRANSACTIONS, "2.2.0", "Monitors changes to keys to determine the execution of a transaction.", S),
    cmd("unwatch", 1, TXN, NONE, &["fast", "transaction"], TRANSACTIONS, "2.2.0", "Forgets about watched keys of a transaction.", S),
    cmd("subscribe", -2, SUBSCRIBE, NONE, &["pubsub", "slow"], PUBSUB, "2.0.0", "Listens for messages published to channels.", S),
    cmd("unsubscribe", -1, SUBSCRIBE, NONE, &["pubsub", "slow"], PUBSUB, "2.0.0", "Stops listening to messages posted to channels.", S),
    cmd("psubscribe", -2, SUBSCRIBE, NONE, &["pubsub", "slow"], PUBSUB, "2.0.0", "Listens for messages published to channels that match one or more patterns.", S),
    cmd("punsubscribe", -1, SUBSCRIBE, NONE, &["pubsub", "slow"], PUBSUB, "2.0.0", "Stops listening to messages published to channels that match one or more patterns.", S),
    cmd("publish", 3, Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE).union(Flags::FAST).union(Flags::MAY_REPLICATE), NONE, &["pubsub", "fast"], PUBSUB, "2.0.0", "Posts a message to a channel.", S),
    cmd("ssubscribe", -2, SUBSCRIBE, (1, -1, 1), &["pubsub", "slow"], PUBSUB, "7.0.0", "Listens for messages published to shard channels.", S),
    cmd("sunsubscribe", -1, SUBSCRIBE, (1, -1, 1), &["pubsub", "slow"], PUBSUB, "7.0.0", "Stops listening to messages posted to shard channels.", S),
    cmd("spublish", 3, Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE).union(Flags::FAST).union(Flags::MAY_REPLICATE), (1, 1, 1), &["pubsub", "fast"], PUBSUB, "7.0.0", "Post a message to a shard channel", S),
    container("pubsub", -2, &["slow"], PUBSUB, "2.8.0", "A container for Pub/Sub commands.", PUBSUB_SUBS),
    container("slowlog", -2, &["slow"], SRV, "2.4.0", "A container for slow log commands.", SLOWLOG_SUBS),
    cmd("time", 1, FAST_STALE, NONE, &["fast"], SRV, "2.6.0", "Returns the server time.", S),
    cmd("lastsave", 1, FAST_STALE, NONE, &["admin", "fast", "dangerous"], SRV, "1.0.0", "Returns the Unix timestamp of the last successful save to disk.", S),
    container("cluster", -2, &["slow"], CLUSTER, "3.0.0", "A container for Redis Cluster commands.", CLUSTER_SUBS),
    cmd("role", 1, Flags::NOSCRIPT.union(Flags::LOADING).union(Flags::STALE).union(Flags::FAST), NONE, &["admin", "fast", "dangerous"], SRV, "2.8.12", "Returns the replication role.", S),
    cmd("readonly", 1, FAST_STALE, NONE, &["fast", "connection"], CLUSTER, "3.0.0", "Enables read-only queries for a connection to a Redis Cluster replica node.", S),
    cmd("readwrite", 1, FAST_STALE, NONE, &["fast", "connection"], CLUSTER, "3.0.0", "Enables read-write queries for a connection to a Redis Cluster replica node.", S),
    cmd("asking", 1, FAST_STALE, NONE, &["fast", "connection"], CLUSTER, "3.0.0", "Signals that a cluster client is following an -ASK redirect.", S),
    cmd("shutdown", -1, ADMIN.union(Flags::NO_MULTI).union(Flags::ALLOW_BUSY), NONE, &["admin", "slow", "dangerous"], SRV, "1.0.0", "Synchronously saves the database(s) to disk and shuts down the Redis server.", S),
];

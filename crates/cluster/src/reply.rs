//! CLUSTER SLOTS / SHARDS / NODES / INFO, shaped exactly as Redis 7.0
//! shapes them, so that cluster-aware clients (redis-rs, redis-cli -c,
//! Lettuce, go-redis...) discover the topology unchanged.
//!
//! Kvasir differs from Redis in one way these replies must hide: each shard
//! (Raft group) has its own leader, so a node is "master" of the shards it
//! currently leads and a replica of the others. The replies therefore list
//! each shard's current leader as its master, and the map itself is only
//! read through a [`View`] that supplies the live leadership and health.

use kvasir_resp::Reply;

use crate::map::{node_name, shard_name, ClusterMap, ShardInfo};
use crate::slot::SLOTS;

/// The map as one node sees it right now.
pub struct View<'a> {
    pub map: &'a ClusterMap,
    /// The node answering.
    pub myself: u64,
    /// The current leader of a shard (by group id), if known.
    pub leader_of: &'a dyn Fn(u64) -> Option<u64>,
    /// Whether a node is reachable.
    pub node_up: &'a dyn Fn(u64) -> bool,
    /// Whether a majority of the nodes report a node unreachable (Redis's
    /// FAIL, against PFAIL when only this node has lost it).
    pub fail_agreed: &'a dyn Fn(u64) -> bool,
    /// How many other nodes report a node unreachable.
    pub failure_reports: &'a dyn Fn(u64) -> usize,
    /// The bus connections with a peer.
    pub links: &'a dyn Fn(u64) -> Links,
}

/// A node's two bus connections with a peer (CLUSTER LINKS).
#[derive(Clone, Copy, Debug, Default)]
pub struct Links {
    /// Unix ms when this node's connection to the peer was made (0: none).
    pub to_since: u64,
    /// Unix ms when the peer's connection to this node was accepted (0:
    /// none).
    pub from_since: u64,
    /// Bytes queued for the peer and not yet written.
    pub queued: usize,
}

impl View<'_> {
    /// The shard's leader, if it is known and a member of the map.
    pub fn leader(&self, shard: &ShardInfo) -> Option<u64> {
        (self.leader_of)(shard.id).filter(|id| self.map.node(*id).is_some())
    }

    /// The node clients should send the shard's commands to: its leader,
    /// or while it has none (an election) its preferred leader, which
    /// holds the request until a leader is known and redirects if needed.
    pub fn master(&self, shard: &ShardInfo) -> Option<u64> {
        self.leader(shard)
            .or_else(|| shard.preferred_leader())
            .filter(|id| self.map.node(*id).is_some())
    }

    /// Slot ranges in slot order with the node that masters each; adjacent
    /// shards with the same master are merged, as Redis writes a master's
    /// contiguous slots as one range.
    pub fn master_ranges(&self) -> Vec<(u16, u16, u64)> {
        let mut out: Vec<(u16, u16, u64)> = Vec::new();
        for shard in &self.map.shards {
            let Some(master) = self.master(shard) else {
                continue;
            };
            match out.last_mut() {
                Some(last)
                    if last.2 == master && u32::from(last.1) + 1 == u32::from(shard.slots.0) =>
                {
                    last.1 = shard.slots.1
                }
                _ => out.push((shard.slots.0, shard.slots.1, master)),
            }
        }
        out
    }

    /// Whether every slot has a master whose client address is known: the
    /// only topology a client may be given (a port 0 would be cached).
    pub fn resolved(&self) -> bool {
        self.map.shards.iter().all(|shard| {
            self.master(shard)
                .and_then(|id| self.map.node(id))
                .is_some_and(|n| n.client_port != 0)
        })
    }

    fn name(&self, node: u64) -> String {
        node_name(self.map.cluster_id, node)
    }
}

/// The answer to a topology request while some master's client address is
/// still unknown (only before the first announcement of a cluster started
/// without client addresses in `--initial-cluster`).
fn not_ready() -> Reply {
    Reply::error("CLUSTERDOWN The cluster is down: client addresses are not known yet")
}

/// `CLUSTER SLOTS`: `[start, end, master]` for every range of slots in
/// slot order, each slot exactly once, the node as `[ip, port, name, {}]`
/// (the trailing map is Redis 7's "additional networking metadata", empty
/// without hostnames).
///
/// Only masters are listed. In Kvasir every node leads some shards and
/// follows in others; listing followers as replicas would make each node
/// appear both as a master and as a replica, which clients that keep one
/// role per address (redis-py, go-redis) resolve by demoting masters. A
/// follower still serves reads of its shards to READONLY connections.
pub fn cluster_slots(view: &View) -> Reply {
    if !view.resolved() {
        return not_ready();
    }
    let entries = view
        .master_ranges()
        .into_iter()
        .filter_map(|(start, end, master)| {
            let node = view.map.node(master)?;
            Some(Reply::Array(vec![
                Reply::Int(i64::from(start)),
                Reply::Int(i64::from(end)),
                Reply::Array(vec![
                    Reply::bulk_str(&node.client_host),
                    Reply::Int(i64::from(node.client_port)),
                    Reply::bulk_str(&view.name(node.id)),
                    Reply::Map(Vec::new()),
                ]),
            ]))
        })
        .collect();
    Reply::Array(entries)
}

/// `CLUSTER SHARDS`: one map per node, as Redis has one shard per master:
/// `slots` as a flat `[start, end, ...]` list of the ranges it masters and
/// `nodes` holding that node with Redis 7's fields in Redis 7's order (id,
/// port, ip, endpoint, role, replication-offset, health). A node that
/// masters nothing is a shard without slots. Maps become flat arrays for
/// RESP2 clients, as in Redis.
pub fn cluster_shards(view: &View) -> Reply {
    if !view.resolved() {
        return not_ready();
    }
    let ranges = view.master_ranges();
    let shards = view
        .map
        .nodes
        .iter()
        .map(|node| {
            let slots = ranges
                .iter()
                .filter(|r| r.2 == node.id)
                .flat_map(|r| [Reply::Int(i64::from(r.0)), Reply::Int(i64::from(r.1))])
                .collect();
            let health = if node.id == view.myself || (view.node_up)(node.id) {
                "online"
            } else {
                "failed"
            };
            let me = Reply::Map(vec![
                (Reply::bulk_str("id"), Reply::bulk_str(&view.name(node.id))),
                (
                    Reply::bulk_str("port"),
                    Reply::Int(i64::from(node.client_port)),
                ),
                (Reply::bulk_str("ip"), Reply::bulk_str(&node.client_host)),
                (
                    Reply::bulk_str("endpoint"),
                    Reply::bulk_str(&node.client_host),
                ),
                (Reply::bulk_str("role"), Reply::bulk_str("master")),
                (Reply::bulk_str("replication-offset"), Reply::Int(0)),
                (Reply::bulk_str("health"), Reply::bulk_str(health)),
            ]);
            Reply::Map(vec![
                (Reply::bulk_str("slots"), Reply::Array(slots)),
                (Reply::bulk_str("nodes"), Reply::Array(vec![me])),
            ])
        })
        .collect();
    Reply::Array(shards)
}

/// `CLUSTER NODES`: one line per node, `\n`-terminated, in Redis's format
/// `<name> <ip:port@cport> <flags> - 0 0 <epoch> <link> <slot ranges>`.
/// Every node is a master; its slots are the ranges it masters now (see
/// [`View::master`]), written as Redis writes them (adjacent ranges merged,
/// single slots alone). A node that masters nothing is a master without
/// slots; a node this one cannot reach carries `fail?` (Redis's PFAIL) or,
/// once a majority of nodes report it unreachable, `fail`, and a
/// `disconnected` link.
pub fn cluster_nodes(view: &View) -> String {
    let ranges = view.master_ranges();
    let mut out = String::new();
    for node in &view.map.nodes {
        let me = node.id == view.myself;
        let up = me || (view.node_up)(node.id);
        out.push_str(&format!(
            "{} {}:{}@{} {}master{} - 0 0 {} {}",
            view.name(node.id),
            node.client_host,
            node.client_port,
            node.cluster_port(),
            if me { "myself," } else { "" },
            match (up, (view.fail_agreed)(node.id)) {
                (true, _) => "",
                (false, true) => ",fail",
                (false, false) => ",fail?",
            },
            view.map.epoch,
            if up { "connected" } else { "disconnected" },
        ));
        for &(a, b, _) in ranges.iter().filter(|r| r.2 == node.id) {
            if a == b {
                out.push_str(&format!(" {a}"));
            } else {
                out.push_str(&format!(" {a}-{b}"));
            }
        }
        out.push('\n');
    }
    out
}

/// `CLUSTER NODES` for the client: the text, or CLUSTERDOWN while a
/// master's address is unknown.
pub fn cluster_nodes_checked(view: &View) -> Reply {
    if !view.resolved() {
        return not_ready();
    }
    cluster_nodes_reply(view)
}

/// `CLUSTER INFO`, CRLF-terminated lines as Redis 7.0 writes them. A slot
/// is ok when its shard's leader is up, pfail when the leader is known but
/// unreachable, fail when the shard has no leader (or its client address
/// is unknown); the state is `fail` as soon as one slot fails, so `ok`
/// means a client gets a complete, address-resolved map. `cluster_size` counts the nodes that
/// lead at least one shard (Redis: masters serving at least one slot).
pub fn cluster_info(view: &View) -> String {
    let (mut ok, mut pfail, mut fail) = (0u32, 0u32, 0u32);
    let mut leaders: Vec<u64> = Vec::new();
    for shard in &view.map.shards {
        let count = u32::from(shard.slots.1 - shard.slots.0) + 1;
        let addressed = |id: u64| view.map.node(id).is_some_and(|n| n.client_port != 0);
        match view.leader(shard).filter(|&l| addressed(l)) {
            Some(l) => {
                if (view.node_up)(l) || l == view.myself {
                    ok += count;
                } else {
                    pfail += count;
                }
                leaders.push(l);
            }
            None => fail += count,
        }
    }
    leaders.sort_unstable();
    leaders.dedup();
    let state = if fail == 0 { "ok" } else { "fail" };
    let epoch = view.map.epoch;
    let lines = [
        format!("cluster_state:{state}"),
        format!("cluster_slots_assigned:{SLOTS}"),
        format!("cluster_slots_ok:{ok}"),
        format!("cluster_slots_pfail:{pfail}"),
        format!("cluster_slots_fail:{fail}"),
        format!("cluster_known_nodes:{}", view.map.nodes.len()),
        format!("cluster_size:{}", leaders.len()),
        format!("cluster_current_epoch:{epoch}"),
        format!("cluster_my_epoch:{epoch}"),
        "cluster_stats_messages_sent:0".to_string(),
        "cluster_stats_messages_received:0".to_string(),
        "total_cluster_links_buffer_limit_exceeded:0".to_string(),
    ];
    let mut out = String::new();
    for line in lines {
        out.push_str(&line);
        out.push_str("\r\n");
    }
    out
}

/// `CLUSTER NODES` as the reply Redis 7 sends: a verbatim `txt` string (a
/// plain bulk string for RESP2 clients).
pub fn cluster_nodes_reply(view: &View) -> Reply {
    Reply::Verbatim("txt", cluster_nodes(view).into())
}

/// `CLUSTER INFO` as the reply Redis 7 sends (verbatim `txt`).
pub fn cluster_info_reply(view: &View) -> Reply {
    Reply::Verbatim("txt", cluster_info(view).into())
}

/// `CLUSTER MYID`: the answering node's name.
pub fn cluster_myid(view: &View) -> Reply {
    Reply::bulk_str(&view.name(view.myself))
}

/// `CLUSTER MYSHARDID`: the id of the answering node's shard in the Redis
/// model, where every node is the one master of its own shard.
pub fn cluster_myshardid(view: &View) -> Reply {
    Reply::bulk_str(&shard_name(view.map.cluster_id, view.myself))
}

/// `CLUSTER LINKS`: for each peer its open bus connections, as Redis 7
/// lists them: the one this node dialled ("to", which carries this node's
/// messages: its send buffer is what is queued for the peer) and the one
/// the peer dialled ("from").
pub fn cluster_links(view: &View) -> Reply {
    let link = |direction: &str, name: &str, since: u64, events: &str, queued: usize| {
        Reply::Map(vec![
            (Reply::bulk_str("direction"), Reply::bulk_str(direction)),
            (Reply::bulk_str("node"), Reply::bulk_str(name)),
            (Reply::bulk_str("create-time"), Reply::Int(since as i64)),
            (Reply::bulk_str("events"), Reply::bulk_str(events)),
            (
                Reply::bulk_str("send-buffer-allocated"),
                Reply::Int(queued as i64),
            ),
            (
                Reply::bulk_str("send-buffer-used"),
                Reply::Int(queued as i64),
            ),
        ])
    };
    let mut links = Vec::new();
    for n in view.map.nodes.iter().filter(|n| n.id != view.myself) {
        let name = view.name(n.id);
        let state = (view.links)(n.id);
        if state.to_since != 0 {
            links.push(link("to", &name, state.to_since, "rw", state.queued));
        }
        if state.from_since != 0 {
            links.push(link("from", &name, state.from_since, "r", 0));
        }
    }
    Reply::Array(links)
}

/// `CLUSTER REPLICAS <node-id>`: a known node has no replicas in the Redis
/// model Kvasir presents; an unknown one is Redis's error.
pub fn cluster_replicas(view: &View, name: &[u8]) -> Reply {
    match named_node(view, name) {
        Ok(_) => Reply::Array(Vec::new()),
        Err(e) => e,
    }
}

/// The member named `name` (a CLUSTER NODES id), or Redis's error for an
/// unknown node.
fn named_node(view: &View, name: &[u8]) -> Result<u64, Reply> {
    view.map
        .nodes
        .iter()
        .find(|n| view.name(n.id).as_bytes() == name)
        .map(|n| n.id)
        .ok_or_else(|| {
            Reply::error(format!(
                "ERR Unknown node {}",
                String::from_utf8_lossy(name)
            ))
        })
}

/// Why a member cannot be added, removed or made a replica by a CLUSTER
/// command: membership and replication are Raft's.
const MEMBERSHIP_FIXED: &str = "members and replicas are fixed when the cluster is bootstrapped (every node replicates every shard through Raft)";

/// `CLUSTER MEET ip port [bus-port]`: Redis's errors for an address that
/// is not one; OK for a member's own address (a handshake already done);
/// an error for a new node, which cannot join a running Kvasir cluster.
pub fn cluster_meet(view: &View, args: &[&[u8]]) -> Reply {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let (ip, port) = (text(args[0]), text(args[1]));
    let Ok(port_n) = port.parse::<i64>() else {
        return Reply::error(format!("ERR Invalid TCP base port specified: {port}"));
    };
    let bus_port = match args.get(2) {
        Some(b) => match text(b).parse::<i64>() {
            Ok(n) => n,
            Err(_) => {
                return Reply::error(format!("ERR Invalid TCP bus port specified: {}", text(b)))
            }
        },
        None => port_n + 10000,
    };
    let valid_port = |p: i64| (1..=65535).contains(&p);
    if ip.parse::<std::net::IpAddr>().is_err() || !valid_port(port_n) || !valid_port(bus_port) {
        return Reply::error(format!("ERR Invalid node address specified: {ip}:{port}"));
    }
    let member = view.map.nodes.iter().any(|n| {
        n.client_port as i64 == port_n
            && n.client_host.parse::<std::net::IpAddr>().ok() == ip.parse().ok()
    });
    if member {
        Reply::ok()
    } else {
        Reply::error(format!(
            "ERR {ip}:{port} cannot join a running Kvasir cluster: {MEMBERSHIP_FIXED}"
        ))
    }
}

/// `CLUSTER RESET [HARD|SOFT]`: Redis's syntax check, then a refusal (a
/// node leaves its cluster and forgets its slots only through a new
/// bootstrap).
pub fn cluster_reset(args: &[bytes::Bytes]) -> Reply {
    match args {
        [] => {}
        [mode] if mode.eq_ignore_ascii_case(b"hard") || mode.eq_ignore_ascii_case(b"soft") => {}
        _ => return Reply::error("ERR syntax error"),
    }
    Reply::error(format!(
        "ERR a Kvasir node cannot be reset: {MEMBERSHIP_FIXED}"
    ))
}

/// `CLUSTER FORGET node-id`.
pub fn cluster_forget(view: &View, name: &[u8]) -> Reply {
    match named_node(view, name) {
        Err(e) => e,
        Ok(id) if id == view.myself => {
            Reply::error("ERR I tried hard but I can't forget myself...")
        }
        Ok(_) => Reply::error(format!(
            "ERR a Kvasir node cannot be forgotten: {MEMBERSHIP_FIXED}"
        )),
    }
}

/// `CLUSTER REPLICATE node-id`.
pub fn cluster_replicate(view: &View, name: &[u8]) -> Reply {
    match named_node(view, name) {
        Err(e) => e,
        Ok(id) if id == view.myself => Reply::error("ERR Can't replicate myself"),
        Ok(_) => Reply::error(format!(
            "ERR a Kvasir node is no replica of another: {MEMBERSHIP_FIXED}"
        )),
    }
}

/// `CLUSTER COUNT-FAILURE-REPORTS node-id`: how many other nodes
/// currently report the node unreachable.
pub fn cluster_count_failure_reports(view: &View, name: &[u8]) -> Reply {
    match named_node(view, name) {
        Err(e) => e,
        Ok(id) => Reply::Int((view.failure_reports)(id) as i64),
    }
}

/// Why a slot cannot be assigned, unassigned or moved by a CLUSTER
/// command: the map gives every slot to a shard, and shards move between
/// nodes as Raft leadership does.
const SLOTS_FIXED: &str = "every slot belongs to a shard of the map made at bootstrap, and a shard moves between nodes with its Raft leadership";

/// A slot argument as Redis's getSlotOrReply reads it.
fn slot_arg(arg: &[u8]) -> Result<u16, Reply> {
    let canonical = !arg.is_empty()
        && arg.len() <= 5
        && arg.iter().all(u8::is_ascii_digit)
        && (arg[0] != b'0' || arg.len() == 1);
    let slot = if canonical {
        std::str::from_utf8(arg)
            .ok()
            .and_then(|s| s.parse::<u16>().ok())
    } else {
        None
    };
    match slot {
        Some(slot) if slot < SLOTS => Ok(slot),
        _ => Err(Reply::error("ERR Invalid or out of range slot")),
    }
}

/// The slots of `CLUSTER ADDSLOTS|DELSLOTS` (one per argument) or of
/// `ADDSLOTSRANGE|DELSLOTSRANGE` (start and end pairs), checked as Redis
/// checks them: every argument parses, a range runs upwards, no slot is
/// named twice.
fn slot_list(args: &[bytes::Bytes], ranges: bool) -> Result<Vec<u16>, Reply> {
    let mut named = Vec::new();
    if ranges {
        for pair in args.chunks(2) {
            let start = slot_arg(&pair[0])?;
            let end = slot_arg(&pair[1])?;
            if start > end {
                return Err(Reply::error(format!(
                    "ERR start slot number {start} is greater than end slot number {end}"
                )));
            }
            named.extend(start..=end);
        }
    } else {
        for arg in args {
            named.push(slot_arg(arg)?);
        }
    }
    let mut seen = vec![false; SLOTS as usize];
    for &slot in &named {
        if std::mem::replace(&mut seen[slot as usize], true) {
            return Err(Reply::error(format!(
                "ERR Slot {slot} specified multiple times"
            )));
        }
    }
    Ok(named)
}

/// `CLUSTER ADDSLOTS slot...` and `ADDSLOTSRANGE start end...`: every slot
/// is assigned already, so Redis's answer for a busy slot is the answer.
pub fn cluster_addslots(args: &[bytes::Bytes], ranges: bool) -> Reply {
    match slot_list(args, ranges) {
        Err(e) => e,
        Ok(slots) => Reply::error(format!("ERR Slot {} is already busy", slots[0])),
    }
}

/// `CLUSTER DELSLOTS slot...` and `DELSLOTSRANGE start end...`: Redis's
/// checks of the arguments, then a refusal.
pub fn cluster_delslots(args: &[bytes::Bytes], ranges: bool) -> Reply {
    match slot_list(args, ranges) {
        Err(e) => e,
        Ok(_) => Reply::error(format!(
            "ERR a Kvasir node's slots cannot be unassigned: {SLOTS_FIXED}"
        )),
    }
}

/// `CLUSTER FLUSHSLOTS`.
pub fn cluster_flushslots() -> Reply {
    Reply::error(format!(
        "ERR a Kvasir node's slots cannot be unassigned: {SLOTS_FIXED}"
    ))
}

/// `CLUSTER SETSLOT slot IMPORTING|MIGRATING node-id | NODE node-id |
/// STABLE`: Redis's syntax and node checks, then a refusal.
pub fn cluster_setslot(view: &View, args: &[bytes::Bytes]) -> Reply {
    if let Err(e) = slot_arg(&args[0]) {
        return e;
    }
    let action = &args[1];
    let is = |name: &[u8]| action.eq_ignore_ascii_case(name);
    // Redis checks the action and the count together.
    let node = match args.len() {
        2 if is(b"stable") => None,
        3 if is(b"importing") || is(b"migrating") || is(b"node") => Some(&args[2]),
        _ => {
            return Reply::error(
                "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP",
            )
        }
    };
    if let Some(name) = node {
        if view
            .map
            .nodes
            .iter()
            .all(|n| view.name(n.id).as_bytes() != name.as_ref())
        {
            let name = String::from_utf8_lossy(name);
            return Reply::error(if is(b"node") {
                format!("ERR Unknown node {name}")
            } else {
                format!("ERR I don't know about node {name}")
            });
        }
    }
    Reply::error(format!(
        "ERR a Kvasir node's slots are not set by hand: {SLOTS_FIXED}"
    ))
}

/// `CLUSTER FAILOVER [FORCE|TAKEOVER]`: a Kvasir node shows itself as a
/// master of the slots it serves (its shards' leaders fail over by Raft
/// election), so Redis's answer to a master is the answer.
/// `typed` is the subcommand as the client spelled it (Redis's error
/// quotes it so).
pub fn cluster_failover(typed: &[u8], args: &[bytes::Bytes]) -> Reply {
    match args {
        [] => {}
        [mode] if mode.eq_ignore_ascii_case(b"force") || mode.eq_ignore_ascii_case(b"takeover") => {
        }
        [_] => return Reply::error("ERR syntax error"),
        _ => {
            return Reply::error(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLUSTER HELP.",
                String::from_utf8_lossy(typed)
            ))
        }
    }
    Reply::error("ERR You should send CLUSTER FAILOVER to a replica")
}

/// `CLUSTER SET-CONFIG-EPOCH epoch`: Redis's checks, in its order; a
/// Kvasir node always knows its peers (a one-node cluster's epoch is set).
pub fn cluster_set_config_epoch(view: &View, arg: &[u8]) -> Reply {
    let epoch = std::str::from_utf8(arg)
        .ok()
        .filter(|s| {
            // string2ll's form: no plus sign, no leading zero.
            let digits = s.strip_prefix('-').unwrap_or(s);
            !s.starts_with('+') && (digits.len() == 1 || !digits.starts_with('0'))
        })
        .and_then(|s| s.parse::<i64>().ok());
    match epoch {
        None => Reply::error("ERR value is not an integer or out of range"),
        Some(e) if e < 0 => Reply::error(format!("ERR Invalid config epoch specified: {e}")),
        Some(_) if view.map.nodes.len() > 1 => Reply::error(
            "ERR The user can assign a config epoch only when the node does not know any other node.",
        ),
        Some(_) => Reply::error("ERR Node config epoch is already non-zero"),
    }
}

/// `CLUSTER BUMPEPOCH`: the map's epoch changes only with the map, so it
/// is STILL the current one.
pub fn cluster_bumpepoch(view: &View) -> Reply {
    Reply::Simple(format!("STILL {}", view.map.epoch).into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::{shard_name, NodeInfo};
    use kvasir_resp::{encode, Protocol};

    fn nodes(n: u64) -> Vec<NodeInfo> {
        (1..=n)
            .map(|id| NodeInfo {
                id,
                client_host: "127.0.0.1".into(),
                client_port: 7000 + id as u16,
                cluster_addr: format!("127.0.0.1:{}", 17000 + id),
            })
            .collect()
    }

    fn map(n: u64, spn: usize, rf: usize) -> ClusterMap {
        ClusterMap::bootstrap(5, nodes(n), spn, rf).unwrap()
    }

    fn preferred(m: &ClusterMap) -> impl Fn(u64) -> Option<u64> + '_ {
        move |s| m.shard(s).and_then(|s| s.preferred_leader())
    }

    fn all_up(_: u64) -> bool {
        true
    }

    /// Down nodes are agreed down by a majority.
    fn agreed(_: u64) -> bool {
        true
    }

    fn no_reports(_: u64) -> usize {
        0
    }

    fn no_links(_: u64) -> Links {
        Links::default()
    }

    fn view_of<'a>(
        map: &'a ClusterMap,
        myself: u64,
        leader_of: &'a dyn Fn(u64) -> Option<u64>,
        node_up: &'a dyn Fn(u64) -> bool,
    ) -> View<'a> {
        View {
            map,
            myself,
            leader_of,
            node_up,
            fail_agreed: &agreed,
            failure_reports: &no_reports,
            links: &no_links,
        }
    }

    fn wire(r: &Reply, proto: Protocol) -> String {
        let mut out = bytes::BytesMut::new();
        encode(r, proto, &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    fn ints(r: &Reply) -> i64 {
        match r {
            Reply::Int(v) => *v,
            other => panic!("not an int: {other:?}"),
        }
    }

    fn items(r: &Reply) -> &[Reply] {
        match r {
            Reply::Array(v) => v,
            other => panic!("not an array: {other:?}"),
        }
    }

    fn bulk(r: &Reply) -> String {
        match r {
            Reply::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
            other => panic!("not a bulk: {other:?}"),
        }
    }

    #[test]
    fn slots_cover_every_slot_once_master_only() {
        let m = map(3, 8, 3);
        let leader = preferred(&m);
        let view = view_of(&m, 1, &leader, &all_up);
        let reply = cluster_slots(&view);
        let entries = items(&reply);
        assert_eq!(entries.len(), 24);
        let mut next = 0;
        for (entry, shard) in entries.iter().zip(&m.shards) {
            let e = items(entry);
            assert_eq!(ints(&e[0]), next);
            next = ints(&e[1]) + 1;
            assert_eq!(e.len(), 3, "masters only");
            let master = items(&e[2]);
            assert_eq!(master.len(), 4);
            assert_eq!(bulk(&master[0]), "127.0.0.1");
            assert_eq!(ints(&master[1]), 7000 + shard.replicas[0] as i64);
            assert_eq!(bulk(&master[2]), node_name(5, shard.replicas[0]));
            assert_eq!(master[3], Reply::Map(vec![]));
        }
        assert_eq!(next, 16384);
        let first = wire(&entries[0], Protocol::Resp2);
        assert!(
            first.starts_with(&format!(
                "*3\r\n:0\r\n:682\r\n*4\r\n$9\r\n127.0.0.1\r\n:7001\r\n$40\r\n{}\r\n*0\r\n",
                node_name(5, 1)
            )),
            "{first}"
        );
        let resp3 = wire(&entries[0], Protocol::Resp3);
        assert!(resp3.contains("\r\n%0\r\n"), "{resp3}");
    }

    #[test]
    fn slots_follow_the_live_leader_and_merge_ranges() {
        let m = map(3, 1, 3);
        // Shard 1 is led by node 3; shard 2 has no leader (its preferred
        // leader, node 2, stands in); shard 3 is led by node 3.
        let leader = |s: u64| match s {
            1 => Some(3),
            2 => None,
            _ => Some(3),
        };
        let up = |n: u64| n != 2;
        let view = view_of(&m, 1, &leader, &up);
        let reply = cluster_slots(&view);
        let entry = |i: usize| -> (i64, i64, i64) {
            let e = items(&items(&reply)[i]);
            (ints(&e[0]), ints(&e[1]), ints(&items(&e[2])[1]))
        };
        assert_eq!(items(&reply).len(), 3);
        assert_eq!(entry(0), (0, 5460, 7003));
        assert_eq!(entry(1), (5461, 10922, 7002));
        assert_eq!(entry(2), (10923, 16383, 7003));
        // Adjacent shards with one master are one range.
        let all3 = |_: u64| Some(3);
        let view = view_of(&m, 1, &all3, &all_up);
        let reply = cluster_slots(&view);
        assert_eq!(items(&reply).len(), 1);
        assert_eq!(ints(&items(&items(&reply)[0])[1]), 16383);
    }

    #[test]
    fn no_topology_with_unknown_addresses() {
        let mut ns = nodes(3);
        ns[1].client_host = String::new();
        ns[1].client_port = 0;
        let m = ClusterMap::bootstrap(5, ns, 1, 3).unwrap();
        let leader = preferred(&m);
        let view = view_of(&m, 1, &leader, &all_up);
        assert!(!view.resolved());
        for r in [
            cluster_slots(&view),
            cluster_shards(&view),
            cluster_nodes_checked(&view),
        ] {
            assert!(
                matches!(&r, Reply::Error(e) if e.starts_with("CLUSTERDOWN")),
                "{r:?}"
            );
        }
        assert!(cluster_info(&view).starts_with("cluster_state:fail\r\n"));
        // Once the shard node 2 would stand in for is led by node 1, no
        // master lacks an address and the map is served.
        let others = |s: u64| Some(if s == 2 { 1 } else { s });
        let view = view_of(&m, 1, &others, &all_up);
        assert!(view.resolved());
        assert!(matches!(cluster_slots(&view), Reply::Array(_)));
    }

    #[test]
    fn shards_have_redis_7_fields() {
        let m = map(3, 1, 2);
        // Node 2 leads shards 1 and 2, node 3 leads shard 3, node 1 none.
        let leader = |s: u64| Some(if s == 3 { 3 } else { 2 });
        let up = |n: u64| n != 1;
        let view = view_of(&m, 2, &leader, &up);
        let reply = cluster_shards(&view);
        assert_eq!(items(&reply).len(), 3);
        let shard = |i: usize| -> &[(Reply, Reply)] {
            match &items(&reply)[i] {
                Reply::Map(kv) => kv,
                _ => panic!("shard is not a map"),
            }
        };
        let fields = |n: &Reply| -> Vec<(String, String)> {
            let Reply::Map(kv) = n else {
                panic!("node is not a map")
            };
            kv.iter()
                .map(|(k, v)| {
                    let v = match v {
                        Reply::Int(i) => i.to_string(),
                        other => bulk(other),
                    };
                    (bulk(k), v)
                })
                .collect()
        };
        let expect = |id: &str, port: &str, health: &str| {
            [
                ("id", id),
                ("port", port),
                ("ip", "127.0.0.1"),
                ("endpoint", "127.0.0.1"),
                ("role", "master"),
                ("replication-offset", "0"),
                ("health", health),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
        };
        // Node 1: no slots, down.
        assert_eq!(bulk(&shard(0)[0].0), "slots");
        assert_eq!(shard(0)[0].1, Reply::Array(vec![]));
        assert_eq!(bulk(&shard(0)[1].0), "nodes");
        let n1 = items(&shard(0)[1].1);
        assert_eq!(n1.len(), 1);
        assert_eq!(fields(&n1[0]), expect(&node_name(5, 1), "7001", "failed"));
        // Node 2: shards 1 and 2 merged.
        assert_eq!(
            shard(1)[0].1,
            Reply::Array(vec![Reply::Int(0), Reply::Int(10922)])
        );
        let n2 = items(&shard(1)[1].1);
        assert_eq!(fields(&n2[0]), expect(&node_name(5, 2), "7002", "online"));
        assert_eq!(
            shard(2)[0].1,
            Reply::Array(vec![Reply::Int(10923), Reply::Int(16383)])
        );
        // RESP2 flattens maps, as Redis does.
        let w = wire(&items(&reply)[1], Protocol::Resp2);
        assert!(w.starts_with("*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:10922\r\n$5\r\nnodes\r\n*1\r\n*14\r\n$2\r\nid\r\n"), "{w}");
    }

    #[test]
    fn nodes_lines_are_parseable() {
        let m = map(3, 2, 3);
        // Node 1 leads shards 1 and 2 (adjacent: merged), node 2 leads 5;
        // shards 3, 4 and 6 have no leader, so their preferred leaders
        // (3, 1 and 3) stand in.
        let leader = |s: u64| match s {
            1 | 2 => Some(1),
            5 => Some(2),
            _ => None,
        };
        let up = |n: u64| n != 3;
        let view = view_of(&m, 2, &leader, &up);
        let text = cluster_nodes(&view);
        let lines: Vec<&str> = text.lines().collect();
        assert!(text.ends_with('\n'));
        assert_eq!(lines.len(), 3);
        let s = |i: usize| m.shards[i].slots;
        assert_eq!(
            lines[0],
            format!(
                "{} 127.0.0.1:7001@17001 master - 0 0 1 connected 0-{} {}-{}",
                node_name(5, 1),
                s(1).1,
                s(3).0,
                s(3).1
            )
        );
        assert_eq!(
            lines[1],
            format!(
                "{} 127.0.0.1:7002@17002 myself,master - 0 0 1 connected {}-{}",
                node_name(5, 2),
                s(4).0,
                s(4).1
            )
        );
        assert_eq!(
            lines[2],
            format!(
                "{} 127.0.0.1:7003@17003 master,fail - 0 0 1 disconnected {}-{} {}-{}",
                node_name(5, 3),
                s(2).0,
                s(2).1,
                s(5).0,
                s(5).1
            )
        );
        for line in &lines {
            let f: Vec<&str> = line.split(' ').collect();
            assert!(f.len() >= 8, "{line}");
            assert_eq!(f[0].len(), 40);
            assert!(f[1].contains('@'));
        }
    }

    #[test]
    fn unreachable_nodes_are_pfail_until_a_majority_agrees() {
        let m = map(3, 1, 3);
        let leader = preferred(&m);
        let down3 = |n: u64| n != 3;
        let line3 = |agreed: &dyn Fn(u64) -> bool| {
            let view = View {
                map: &m,
                myself: 1,
                leader_of: &leader,
                node_up: &down3,
                fail_agreed: agreed,
                failure_reports: &no_reports,
                links: &no_links,
            };
            cluster_nodes(&view).lines().nth(2).unwrap().to_string()
        };
        assert!(
            line3(&|_| false).contains(" master,fail? - "),
            "{}",
            line3(&|_| false)
        );
        assert!(line3(&|_| true).contains(" master,fail - "));
    }

    #[test]
    fn nodes_write_single_slot_ranges_alone() {
        let m = ClusterMap::new(
            5,
            3,
            nodes(2),
            vec![
                ShardInfo {
                    id: 1,
                    slots: (0, 0),
                    replicas: vec![1],
                },
                ShardInfo {
                    id: 2,
                    slots: (1, 16382),
                    replicas: vec![2],
                },
                ShardInfo {
                    id: 3,
                    slots: (16383, 16383),
                    replicas: vec![1],
                },
            ],
        )
        .unwrap();
        let leader = preferred(&m);
        let view = view_of(&m, 1, &leader, &all_up);
        let text = cluster_nodes(&view);
        assert!(
            text.lines()
                .next()
                .unwrap()
                .ends_with(" 3 connected 0 16383"),
            "{text}"
        );
        assert!(
            text.lines().nth(1).unwrap().ends_with(" connected 1-16382"),
            "{text}"
        );
    }

    #[test]
    fn info_ok_and_fail() {
        let m = map(3, 8, 3);
        let leader = preferred(&m);
        let view = view_of(&m, 1, &leader, &all_up);
        assert_eq!(
            cluster_info(&view),
            "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n\
             cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:3\r\n\
             cluster_size:3\r\ncluster_current_epoch:1\r\ncluster_my_epoch:1\r\n\
             cluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\n\
             total_cluster_links_buffer_limit_exceeded:0\r\n"
        );
        // Shard 1 has no leader, node 2 (leading shards 2, 5...) is down.
        let leader = |s: u64| {
            if s == 1 {
                None
            } else {
                m.shard(s).map(|s| s.replicas[0])
            }
        };
        let up = |n: u64| n != 2;
        let view = view_of(&m, 1, &leader, &up);
        let info = cluster_info(&view);
        let field = |k: &str| -> u32 {
            info.split("\r\n")
                .find_map(|l| l.strip_prefix(k).and_then(|v| v.strip_prefix(':')))
                .and_then(|v| v.parse().ok())
                .unwrap_or(u32::MAX)
        };
        assert!(info.starts_with("cluster_state:fail\r\n"));
        let led_by_2: u32 = m
            .shards
            .iter()
            .filter(|s| s.replicas[0] == 2)
            .map(|s| u32::from(s.slots.1 - s.slots.0) + 1)
            .sum();
        let s1 = u32::from(m.shards[0].slots.1) + 1;
        assert_eq!(field("cluster_slots_fail"), s1);
        assert_eq!(field("cluster_slots_pfail"), led_by_2);
        assert_eq!(field("cluster_slots_ok"), 16384 - s1 - led_by_2);
        assert_eq!(field("cluster_size"), 3);
    }

    #[test]
    fn verbatim_replies_and_myid() {
        let m = map(1, 1, 1);
        let leader = preferred(&m);
        let view = view_of(&m, 1, &leader, &all_up);
        let nodes = wire(&cluster_nodes_reply(&view), Protocol::Resp2);
        assert!(nodes.starts_with("$"), "{nodes}");
        assert!(nodes.contains("myself,master - 0 0 1 connected 0-16383\n"));
        let info = wire(&cluster_info_reply(&view), Protocol::Resp3);
        assert!(info.starts_with("="), "{info}");
        assert!(info.contains("txt:cluster_state:ok\r\n"));
        assert_eq!(cluster_myid(&view), Reply::bulk_str(&node_name(5, 1)));
    }

    #[test]
    fn shard_ids_links_and_replicas() {
        let m = map(3, 1, 3);
        let leader = preferred(&m);
        let down3 = |n: u64| n != 3;
        let links = |n: u64| match n {
            2 => Links {
                to_since: 1_700_000_000_000,
                from_since: 1_700_000_000_500,
                queued: 64,
            },
            _ => Links::default(),
        };
        let view = View {
            links: &links,
            ..view_of(&m, 1, &leader, &down3)
        };
        let shard_id = bulk(&cluster_myshardid(&view));
        assert_eq!(shard_id.len(), 40);
        assert!(shard_id.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(shard_id, bulk(&cluster_myid(&view)));
        assert_ne!(shard_id, shard_name(5, 2));
        // A link per open connection: to and from node 2, none with 3.
        let listed = cluster_links(&view);
        assert_eq!(items(&listed).len(), 2);
        for (link, (direction, since, queued)) in items(&listed).iter().zip([
            ("to", 1_700_000_000_000, 64),
            ("from", 1_700_000_000_500, 0),
        ]) {
            let Reply::Map(kv) = link else {
                panic!("link is not a map")
            };
            assert_eq!(bulk(&kv[0].1), direction);
            assert_eq!(bulk(&kv[1].1), node_name(5, 2));
            assert_eq!(kv[2].1, Reply::Int(since));
            assert_eq!(kv[5].1, Reply::Int(queued));
        }
        // Membership is Raft's: Redis's errors for unknown nodes and
        // itself, a refusal for the others.
        let me = node_name(5, 1);
        let other = node_name(5, 2);
        assert_eq!(
            cluster_forget(&view, b"1"),
            Reply::error("ERR Unknown node 1")
        );
        assert_eq!(
            cluster_forget(&view, me.as_bytes()),
            Reply::error("ERR I tried hard but I can't forget myself...")
        );
        assert!(matches!(
            cluster_forget(&view, other.as_bytes()),
            Reply::Error(_)
        ));
        assert_eq!(
            cluster_replicate(&view, b"1"),
            Reply::error("ERR Unknown node 1")
        );
        assert_eq!(
            cluster_replicate(&view, me.as_bytes()),
            Reply::error("ERR Can't replicate myself")
        );
        assert_eq!(
            cluster_count_failure_reports(&view, other.as_bytes()),
            Reply::Int(0)
        );
        assert_eq!(
            cluster_meet(&view, &[b"localhost", b"8080"]),
            Reply::error("ERR Invalid node address specified: localhost:8080")
        );
        assert_eq!(
            cluster_meet(&view, &[b"127.0.0.1", b"x"]),
            Reply::error("ERR Invalid TCP base port specified: x")
        );
        let member = &m.nodes[1];
        let port = member.client_port.to_string();
        assert_eq!(
            cluster_meet(&view, &[member.client_host.as_bytes(), port.as_bytes()]),
            Reply::ok()
        );
        assert!(matches!(
            cluster_meet(&view, &[b"10.9.9.9", b"7000"]),
            Reply::Error(e) if e.contains("cannot join")
        ));
        // No replicas of a known node; Redis's error for an unknown one.
        assert_eq!(
            cluster_replicas(&view, node_name(5, 2).as_bytes()),
            Reply::Array(vec![])
        );
        assert_eq!(
            cluster_replicas(&view, b"nope"),
            Reply::error("ERR Unknown node nope")
        );
    }

    #[test]
    fn unknown_leaders_are_ignored() {
        let m = map(3, 1, 3);
        let leader = |_: u64| Some(99);
        let view = view_of(&m, 1, &leader, &all_up);
        assert!(cluster_info(&view).starts_with("cluster_state:fail"));
        // The preferred leaders stand in for the unknown one.
        let reply = cluster_slots(&view);
        assert_eq!(items(&items(&reply)[0]).len(), 3);
        assert_eq!(ints(&items(&items(&items(&reply)[0])[2])[1]), 7001);
    }
}

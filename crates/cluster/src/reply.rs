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

use crate::map::{node_name, ClusterMap, NodeInfo, ShardInfo};
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
}

impl View<'_> {
    /// The shard's leader, if it is known and a member of the map.
    pub fn leader(&self, shard: &ShardInfo) -> Option<u64> {
        (self.leader_of)(shard.id).filter(|id| self.map.node(*id).is_some())
    }

    /// The shard's nodes as clients should see them: the leader first
    /// (`replicas[0]` when there is none), then the other replicas in
    /// placement order. The flag says whether the first is a real leader.
    fn ordered_replicas<'m>(&'m self, shard: &ShardInfo) -> (bool, Vec<&'m NodeInfo>) {
        let leader = self.leader(shard);
        let first = leader.or(shard.replicas.first().copied());
        let order = first
            .into_iter()
            .chain(shard.replicas.iter().copied().filter(|r| Some(*r) != first));
        (
            leader.is_some(),
            order.filter_map(|id| self.map.node(id)).collect(),
        )
    }

    fn name(&self, node: u64) -> String {
        node_name(self.map.cluster_id, node)
    }
}

/// `CLUSTER SLOTS`: one entry per shard, in slot order, so every slot
/// appears exactly once: `[start, end, master, replicas...]`, each node as
/// `[ip, port, name, {}]` (the trailing map is Redis 7's "additional
/// networking metadata", empty without hostnames). As in Redis, replicas
/// that are down are left out; the master is always listed.
pub fn cluster_slots(view: &View) -> Reply {
    let entries = view
        .map
        .shards
        .iter()
        .map(|shard| {
            let (_, nodes) = view.ordered_replicas(shard);
            let mut entry = vec![
                Reply::Int(i64::from(shard.slots.0)),
                Reply::Int(i64::from(shard.slots.1)),
            ];
            for (i, node) in nodes.into_iter().enumerate() {
                if i > 0 && !(view.node_up)(node.id) {
                    continue;
                }
                entry.push(Reply::Array(vec![
                    Reply::bulk_str(&node.client_host),
                    Reply::Int(i64::from(node.client_port)),
                    Reply::bulk_str(&view.name(node.id)),
                    Reply::Map(Vec::new()),
                ]));
            }
            Reply::Array(entry)
        })
        .collect();
    Reply::Array(entries)
}

/// `CLUSTER SHARDS`: one map per shard, `slots` as a flat `[start, end]`
/// list and `nodes` as maps with Redis 7's fields in Redis 7's order (id,
/// port, ip, endpoint, role, replication-offset, health). Maps become flat
/// arrays for RESP2 clients, as in Redis.
pub fn cluster_shards(view: &View) -> Reply {
    let shards = view
        .map
        .shards
        .iter()
        .map(|shard| {
            let (_, nodes) = view.ordered_replicas(shard);
            let nodes = nodes
                .into_iter()
                .enumerate()
                .map(|(i, node)| {
                    let health = if (view.node_up)(node.id) {
                        "online"
                    } else {
                        "failed"
                    };
                    Reply::Map(vec![
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
                        (
                            Reply::bulk_str("role"),
                            Reply::bulk_str(if i == 0 { "master" } else { "replica" }),
                        ),
                        (Reply::bulk_str("replication-offset"), Reply::Int(0)),
                        (Reply::bulk_str("health"), Reply::bulk_str(health)),
                    ])
                })
                .collect();
            Reply::Map(vec![
                (
                    Reply::bulk_str("slots"),
                    Reply::Array(vec![
                        Reply::Int(i64::from(shard.slots.0)),
                        Reply::Int(i64::from(shard.slots.1)),
                    ]),
                ),
                (Reply::bulk_str("nodes"), Reply::Array(nodes)),
            ])
        })
        .collect();
    Reply::Array(shards)
}

/// `CLUSTER NODES`: one line per node, `\n`-terminated, in Redis's format
/// `<name> <ip:port@cport> <flags> - 0 0 <epoch> <link> <slot ranges>`.
/// Every node is a master; its slots are those of the shards it leads now
/// (adjacent ranges merged, single slots written alone, as Redis writes
/// them). A node that leads nothing is a master without slots; a node that
/// is down carries the `fail` flag and a `disconnected` link.
pub fn cluster_nodes(view: &View) -> String {
    // Slot ranges led by each node, in slot order.
    let mut led: Vec<Vec<(u16, u16)>> = vec![Vec::new(); view.map.nodes.len()];
    for shard in &view.map.shards {
        let Some(leader) = view.leader(shard) else {
            continue;
        };
        let Some(i) = view.map.nodes.iter().position(|n| n.id == leader) else {
            continue;
        };
        match led[i].last_mut() {
            Some(last) if u32::from(last.1) + 1 == u32::from(shard.slots.0) => {
                last.1 = shard.slots.1
            }
            _ => led[i].push(shard.slots),
        }
    }
    let mut out = String::new();
    for (node, ranges) in view.map.nodes.iter().zip(&led) {
        let me = node.id == view.myself;
        let up = me || (view.node_up)(node.id);
        out.push_str(&format!(
            "{} {}:{}@{} {}master{} - 0 0 {} {}",
            view.name(node.id),
            node.client_host,
            node.client_port,
            node.cluster_port(),
            if me { "myself," } else { "" },
            if up { "" } else { ",fail" },
            view.map.epoch,
            if up { "connected" } else { "disconnected" },
        ));
        for &(a, b) in ranges {
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

/// `CLUSTER INFO`, CRLF-terminated lines as Redis 7.0 writes them. A slot
/// is ok when its shard's leader is up, pfail when the leader is known but
/// unreachable, fail when the shard has no leader; the state is `fail` as
/// soon as one shard has no leader. `cluster_size` counts the nodes that
/// lead at least one shard (Redis: masters serving at least one slot).
pub fn cluster_info(view: &View) -> String {
    let (mut ok, mut pfail, mut fail) = (0u32, 0u32, 0u32);
    let mut leaders: Vec<u64> = Vec::new();
    for shard in &view.map.shards {
        let count = u32::from(shard.slots.1 - shard.slots.0) + 1;
        match view.leader(shard) {
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

#[cfg(test)]
mod tests {
    use super::*;
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
    fn slots_cover_every_slot_once_leader_first() {
        let m = map(3, 8, 3);
        let leader = preferred(&m);
        let view = View {
            map: &m,
            myself: 1,
            leader_of: &leader,
            node_up: &all_up,
        };
        let reply = cluster_slots(&view);
        let entries = items(&reply);
        assert_eq!(entries.len(), 24);
        let mut next = 0;
        for (entry, shard) in entries.iter().zip(&m.shards) {
            let e = items(entry);
            assert_eq!(ints(&e[0]), next);
            next = ints(&e[1]) + 1;
            assert_eq!(e.len(), 2 + 3);
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
                "*5\r\n:0\r\n:682\r\n*4\r\n$9\r\n127.0.0.1\r\n:7001\r\n$40\r\n{}\r\n*0\r\n",
                node_name(5, 1)
            )),
            "{first}"
        );
        let resp3 = wire(&entries[0], Protocol::Resp3);
        assert!(resp3.contains("\r\n%0\r\n"), "{resp3}");
    }

    #[test]
    fn slots_follow_the_live_leader_and_skip_down_replicas() {
        let m = map(3, 1, 3);
        // Shard 1 is led by node 3; shard 2 has no leader; node 2 is down.
        let leader = |s: u64| match s {
            1 => Some(3),
            2 => None,
            _ => Some(3),
        };
        let up = |n: u64| n != 2;
        let view = View {
            map: &m,
            myself: 1,
            leader_of: &leader,
            node_up: &up,
        };
        let reply = cluster_slots(&view);
        let ports = |i: usize| -> Vec<i64> {
            items(&items(&reply)[i])[2..]
                .iter()
                .map(|n| ints(&items(n)[1]))
                .collect()
        };
        // Shard 1: replicas [1, 2, 3] led by 3, 2 is down.
        assert_eq!(ports(0), vec![7003, 7001]);
        // Shard 2: replicas [2, 3, 1], no leader: replicas[0] first even if down.
        assert_eq!(ports(1), vec![7002, 7003, 7001]);
        assert_eq!(ports(2), vec![7003, 7001]);
    }

    #[test]
    fn shards_have_redis_7_fields() {
        let m = map(3, 1, 2);
        let leader = |s: u64| Some(if s == 1 { 2 } else { s });
        let up = |n: u64| n != 1;
        let view = View {
            map: &m,
            myself: 2,
            leader_of: &leader,
            node_up: &up,
        };
        let reply = cluster_shards(&view);
        assert_eq!(items(&reply).len(), 3);
        let Reply::Map(first) = &items(&reply)[0] else {
            panic!("shard is not a map")
        };
        assert_eq!(bulk(&first[0].0), "slots");
        assert_eq!(
            first[0].1,
            Reply::Array(vec![Reply::Int(0), Reply::Int(5460)])
        );
        assert_eq!(bulk(&first[1].0), "nodes");
        let nodes = items(&first[1].1);
        assert_eq!(nodes.len(), 2);
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
        let name2 = node_name(5, 2);
        let expect = |id: &str, port: &str, role: &str, health: &str| {
            [
                ("id", id),
                ("port", port),
                ("ip", "127.0.0.1"),
                ("endpoint", "127.0.0.1"),
                ("role", role),
                ("replication-offset", "0"),
                ("health", health),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
        };
        assert_eq!(
            fields(&nodes[0]),
            expect(&name2, "7002", "master", "online")
        );
        let name1 = node_name(5, 1);
        assert_eq!(
            fields(&nodes[1]),
            expect(&name1, "7001", "replica", "failed")
        );
        // RESP2 flattens maps, as Redis does.
        let w = wire(&items(&reply)[0], Protocol::Resp2);
        assert!(w.starts_with("*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:5460\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\nid\r\n"), "{w}");
    }

    #[test]
    fn nodes_lines_are_parseable() {
        let m = map(3, 2, 3);
        // Node 1 leads shards 1 and 2 (adjacent: merged), node 2 leads 5,
        // node 3 leads nothing, shards 3, 4 and 6 have no leader.
        let leader = |s: u64| match s {
            1 | 2 => Some(1),
            5 => Some(2),
            _ => None,
        };
        let up = |n: u64| n != 3;
        let view = View {
            map: &m,
            myself: 2,
            leader_of: &leader,
            node_up: &up,
        };
        let text = cluster_nodes(&view);
        let lines: Vec<&str> = text.lines().collect();
        assert!(text.ends_with('\n'));
        assert_eq!(lines.len(), 3);
        let s = |i: usize| m.shards[i].slots;
        assert_eq!(
            lines[0],
            format!(
                "{} 127.0.0.1:7001@17001 master - 0 0 1 connected 0-{}",
                node_name(5, 1),
                s(1).1
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
                "{} 127.0.0.1:7003@17003 master,fail - 0 0 1 disconnected",
                node_name(5, 3)
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
        let view = View {
            map: &m,
            myself: 1,
            leader_of: &leader,
            node_up: &all_up,
        };
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
        let view = View {
            map: &m,
            myself: 1,
            leader_of: &leader,
            node_up: &all_up,
        };
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
        let view = View {
            map: &m,
            myself: 1,
            leader_of: &leader,
            node_up: &up,
        };
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
        let view = View {
            map: &m,
            myself: 1,
            leader_of: &leader,
            node_up: &all_up,
        };
        let nodes = wire(&cluster_nodes_reply(&view), Protocol::Resp2);
        assert!(nodes.starts_with("$"), "{nodes}");
        assert!(nodes.contains("myself,master - 0 0 1 connected 0-16383\n"));
        let info = wire(&cluster_info_reply(&view), Protocol::Resp3);
        assert!(info.starts_with("="), "{info}");
        assert!(info.contains("txt:cluster_state:ok\r\n"));
        assert_eq!(cluster_myid(&view), Reply::bulk_str(&node_name(5, 1)));
    }

    #[test]
    fn unknown_leaders_are_ignored() {
        let m = map(3, 1, 3);
        let leader = |_: u64| Some(99);
        let view = View {
            map: &m,
            myself: 1,
            leader_of: &leader,
            node_up: &all_up,
        };
        assert!(cluster_info(&view).starts_with("cluster_state:fail"));
        let reply = cluster_slots(&view);
        assert_eq!(items(&items(&reply)[0]).len(), 5);
    }
}

//! `kvasir cluster status --node HOST:PORT`: the cluster as one node sees
//! it (CLUSTER NODES, CLUSTER INFO), completed with every reachable node's
//! INFO raft (shards as Raft groups: slots, replicas, leaders, applied
//! indexes, lag). CLUSTER SHARDS shows the Redis Cluster model (one shard
//! per master), so the Raft groups come from INFO raft.

use crate::resp_client::{info_fields, info_get, Conn, Value};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(2);

/// One line of CLUSTER NODES.
struct NodeLine {
    id: u64,
    name: String,
    addr: String,
    bus: String,
    myself: bool,
    /// As the queried node sees it.
    seen_up: bool,
}

/// One `groupN:` line of INFO raft.
#[derive(Default, Clone)]
struct Group {
    role: String,
    term: u64,
    leader: u64,
    commit: u64,
    applied: u64,
    slots: String,
    voters: Vec<u64>,
}

/// What one node told us about itself.
#[derive(Default)]
struct NodeReport {
    reachable: bool,
    error: Option<String>,
    led: String,
    followed: String,
    state: String,
    groups: BTreeMap<u64, Group>,
    /// Nodes this node's failure detector sees disconnected.
    sees_down: Vec<u64>,
}

/// The node id at the end of a node name (its last 16 hex digits).
fn id_of_name(name: &str) -> Option<u64> {
    let tail = name.get(name.len().checked_sub(16)?..)?;
    u64::from_str_radix(tail, 16).ok()
}

fn parse_nodes(text: &str) -> Vec<NodeLine> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            let (addr, cport) = f[1].split_once('@').unwrap_or((f[1], ""));
            let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or("");
            Some(NodeLine {
                id: id_of_name(f[0])?,
                name: f[0].to_string(),
                addr: addr.to_string(),
                bus: format!("{host}:{cport}"),
                myself: f[2].split(',').any(|x| x == "myself"),
                seen_up: !f[2].split(',').any(|x| x == "fail" || x == "fail?")
                    && f[7] == "connected",
            })
        })
        .collect()
}

fn parse_group(v: &str) -> Group {
    let mut g = Group::default();
    for kv in v.split(',') {
        let Some((k, v)) = kv.split_once('=') else {
            continue;
        };
        let n = || v.parse::<u64>().unwrap_or(0);
        match k {
            "role" => g.role = v.to_string(),
            "term" => g.term = n(),
            "leader" => g.leader = n(),
            "commit" => g.commit = n(),
            "applied" => g.applied = n(),
            "slots" => g.slots = v.to_string(),
            "voters" => g.voters = v.split('/').filter_map(|x| x.parse().ok()).collect(),
            _ => {}
        }
    }
    g
}

fn report_of(addr: &str) -> NodeReport {
    let mut r = NodeReport::default();
    let text = Conn::connect(addr, TIMEOUT).and_then(|mut c| {
        let raft = c.call_text(&["INFO", "raft"])?;
        let cluster = c.call_text(&["INFO", "cluster"])?;
        // A node still starting may refuse CLUSTER NODES; its view is then
        // simply unknown.
        r.sees_down = c
            .call_text(&["CLUSTER", "NODES"])
            .map(|t| {
                parse_nodes(&t)
                    .into_iter()
                    .filter(|n| !n.myself && !n.seen_up)
                    .map(|n| n.id)
                    .collect()
            })
            .unwrap_or_default();
        Ok(format!("{raft}\r\n{cluster}"))
    });
    let text = match text {
        Ok(t) => t,
        Err(e) => {
            r.error = Some(e);
            return r;
        }
    };
    r.reachable = true;
    let fields = info_fields(&text);
    r.led = info_get(&fields, "cluster_shards_led")
        .unwrap_or("?")
        .into();
    r.followed = info_get(&fields, "cluster_shards_followed")
        .unwrap_or("?")
        .into();
    r.state = info_get(&fields, "cluster_state").unwrap_or("?").into();
    for (k, v) in &fields {
        if let Some(id) = k.strip_prefix("group").and_then(|n| n.parse::<u64>().ok()) {
            r.groups.insert(id, parse_group(v));
        }
    }
    r
}

pub fn run(node: &str) -> ExitCode {
    match status(node) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kvasir cluster status: {e}");
            ExitCode::FAILURE
        }
    }
}

fn status(node: &str) -> Result<String, String> {
    let mut conn = Conn::connect(node, TIMEOUT)
        .map_err(|e| format!("{e} (is a Kvasir node listening there?)"))?;
    match conn.call(&["CLUSTER", "MYID"])? {
        Value::Error(e) if e.contains("cluster support disabled") => {
            return Err(format!(
                "{node} is not in cluster mode (it was started without --initial-cluster)"
            ))
        }
        Value::Error(e) => return Err(format!("{node}: CLUSTER MYID: {e}")),
        _ => {}
    }
    let nodes = parse_nodes(&conn.call_text(&["CLUSTER", "NODES"])?);
    let info = info_fields(&conn.call_text(&["CLUSTER", "INFO"])?);
    drop(conn);

    let mut reports: BTreeMap<u64, NodeReport> = BTreeMap::new();
    for n in &nodes {
        // The queried node is reached the way the user reached it.
        let addr = if n.myself {
            node.to_string()
        } else {
            n.addr.clone()
        };
        reports.insert(n.id, report_of(&addr));
    }
    // Every shard (Raft group) any reachable node holds, with its slots
    // and replicas.
    let mut shards: BTreeMap<u64, (String, Vec<u64>)> = BTreeMap::new();
    for r in reports.values() {
        for (id, g) in &r.groups {
            if g.slots != "meta" && !g.slots.is_empty() {
                shards
                    .entry(*id)
                    .or_insert_with(|| (g.slots.clone(), g.voters.clone()));
            }
        }
    }

    let mut out = String::new();
    out.push_str(&format!(
        "Cluster as seen by {node}: cluster_state:{}, {} nodes, {} shards, slots ok {}/16384\n\n",
        info_get(&info, "cluster_state").unwrap_or("?"),
        nodes.len(),
        shards.len(),
        info_get(&info, "cluster_slots_ok").unwrap_or("?"),
    ));
    out.push_str(&format!(
        "{:<6} {:<12} {:<9} {:<7} {:<5} {:<7} {:<8} {}\n",
        "SHARD", "SLOTS", "REPLICAS", "LEADER", "TERM", "COMMIT", "MAX_LAG", "APPLIED (node=index)"
    ));
    let mut leaderless = 0;
    for (&id, (slots, replicas)) in &shards {
        let mut sorted = replicas.clone();
        sorted.sort_unstable();
        // The leader is the replica that says so itself.
        let leader = sorted.iter().copied().find(|r| {
            reports
                .get(r)
                .and_then(|rep| rep.groups.get(&id))
                .is_some_and(|g| g.role == "leader")
        });
        let leader_group = leader.and_then(|l| reports.get(&l)?.groups.get(&id).cloned());
        let (term, commit) = leader_group
            .as_ref()
            .map(|g| (g.term.to_string(), g.commit))
            .unwrap_or(("-".into(), 0));
        let mut max_lag: Option<u64> = None;
        let applied: Vec<String> = sorted
            .iter()
            .map(
                |r| match reports.get(r).and_then(|rep| rep.groups.get(&id)) {
                    Some(g) => {
                        if leader_group.is_some() {
                            let lag = commit.saturating_sub(g.applied);
                            max_lag = Some(max_lag.unwrap_or(0).max(lag));
                        }
                        format!("{r}={}", g.applied)
                    }
                    None => format!("{r}=?"),
                },
            )
            .collect();
        if leader.is_none() {
            leaderless += 1;
        }
        let repl: Vec<String> = sorted.iter().map(u64::to_string).collect();
        out.push_str(&format!(
            "{:<6} {:<12} {:<9} {:<7} {:<5} {:<7} {:<8} {}\n",
            id,
            slots,
            repl.join(","),
            leader
                .map(|l| l.to_string())
                .unwrap_or_else(|| "none".into()),
            term,
            if leader_group.is_some() {
                commit.to_string()
            } else {
                "-".into()
            },
            max_lag.map(|l| l.to_string()).unwrap_or_else(|| "-".into()),
            applied.join(" "),
        ));
    }
    out.push_str(&format!(
        "\n{:<5} {:<21} {:<21} {:<6} {:<6} {:<8} {}\n",
        "NODE", "ADDRESS", "CLUSTER BUS", "STATUS", "LEADS", "FOLLOWS", "NAME"
    ));
    let mut down = 0;
    for n in &nodes {
        let r = &reports[&n.id];
        let status = if r.reachable { "up" } else { "down" };
        if !r.reachable {
            down += 1;
        }
        let me = if n.myself { " (queried)" } else { "" };
        // The failure detectors' view: which nodes have lost their link to
        // this one (a partition this tool, outside it, cannot see).
        let seen_by: Vec<String> = reports
            .iter()
            .filter(|(id, r)| **id != n.id && r.sees_down.contains(&n.id))
            .map(|(id, _)| id.to_string())
            .collect();
        let seen = if seen_by.is_empty() {
            String::new()
        } else {
            format!(" [seen down by node {}]", seen_by.join(", "))
        };
        out.push_str(&format!(
            "{:<5} {:<21} {:<21} {:<6} {:<6} {:<8} {}{me}{seen}\n",
            n.id,
            n.addr,
            n.bus,
            status,
            if r.reachable { r.led.as_str() } else { "-" },
            if r.reachable {
                r.followed.as_str()
            } else {
                "-"
            },
            n.name,
        ));
    }
    for n in &nodes {
        if let Some(e) = &reports[&n.id].error {
            out.push_str(&format!("node {} unreachable: {e}\n", n.id));
        }
    }
    out.push_str(&format!(
        "\n{} of {} shards have a leader; {} of {} nodes up\n",
        shards.len() - leaderless,
        shards.len(),
        nodes.len() - down,
        nodes.len()
    ));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cluster_nodes_lines() {
        let text = "23bf83975f81ba3235f9de3d0000000000000001 127.0.0.1:7001@17001 myself,master - 0 0 4 connected 0-10\n\
                    23bf80975f81ba3235f9de3d0000000000000002 127.0.0.1:7002@17002 master,fail - 0 0 4 disconnected\n";
        let n = parse_nodes(text);
        assert_eq!(n.len(), 2);
        assert_eq!((n[0].id, n[0].myself, n[0].seen_up), (1, true, true));
        assert_eq!(n[0].bus, "127.0.0.1:17001");
        assert_eq!((n[1].id, n[1].seen_up), (2, false));
    }

    #[test]
    fn parses_group_lines() {
        let g =
            parse_group("role=leader,term=2,leader=1,commit=10,applied=9,voters=1/2/3,slots=0-682");
        assert_eq!(g.role, "leader");
        assert_eq!((g.term, g.leader, g.commit, g.applied), (2, 1, 10, 9));
        assert_eq!(g.slots, "0-682");
        assert_eq!(g.voters, vec![1, 2, 3]);
    }
}

//! The cluster map: which nodes exist, which shards (Raft groups) own which
//! slot ranges, and which nodes hold each shard's replicas.
//!
//! The map lives in the metadata Raft group (group 0) and every node caches
//! it, so it has to be deterministic (every node bootstraps the same map
//! from the same flags) and its binary encoding has to round-trip exactly
//! and reject any malformed bytes without panicking.

use crate::slot::SLOTS;

/// One Kvasir process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    /// Raft node id (never 0: raft-rs reserves it).
    pub id: u64,
    /// Where clients connect (the RESP listener).
    pub client_host: String,
    pub client_port: u16,
    /// Where peers connect (the Raft transport), `host:port`.
    pub cluster_addr: String,
}

impl NodeInfo {
    /// `host:port` of the client listener, as `-MOVED` shows it.
    pub fn client_addr(&self) -> String {
        format!("{}:{}", self.client_host, self.client_port)
    }

    /// The port of `cluster_addr` (the `@cport` of CLUSTER NODES), 0 when
    /// it has none.
    pub fn cluster_port(&self) -> u16 {
        self.cluster_addr
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .unwrap_or(0)
    }
}

/// One shard: a Raft group serving one contiguous slot range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardInfo {
    /// Raft group id; shards are 1..=n, group 0 is the metadata group.
    pub id: u64,
    /// Inclusive slot range.
    pub slots: (u16, u16),
    /// Node ids holding a replica; `replicas[0]` is the preferred leader.
    pub replicas: Vec<u64>,
}

impl ShardInfo {
    pub fn contains(&self, slot: u16) -> bool {
        self.slots.0 <= slot && slot <= self.slots.1
    }

    /// The preferred leader (`replicas[0]`).
    pub fn preferred_leader(&self) -> Option<u64> {
        self.replicas.first().copied()
    }
}

/// The whole cluster layout. Build it with [`ClusterMap::new`],
/// [`ClusterMap::bootstrap`] or [`ClusterMap::decode`], which all check
/// that every slot belongs to exactly one shard; after changing the public
/// fields, rebuild it with `new` so that the slot index follows.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterMap {
    pub cluster_id: u64,
    /// Configuration epoch, bumped by every change of the map.
    pub epoch: u64,
    /// Sorted by id.
    pub nodes: Vec<NodeInfo>,
    /// Sorted by first slot.
    pub shards: Vec<ShardInfo>,
    /// Shard index of every slot: O(1) routing.
    slot_index: Box<[u16]>,
}

impl std::fmt::Debug for ClusterMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterMap")
            .field("cluster_id", &self.cluster_id)
            .field("epoch", &self.epoch)
            .field("nodes", &self.nodes)
            .field("shards", &self.shards)
            .finish()
    }
}

/// Format version of [`ClusterMap::encode`].
const ENCODING_VERSION: u8 = 1;
const MAGIC: &[u8; 4] = b"KVCM";

impl ClusterMap {
    /// Checks a layout and indexes it. Nodes are sorted by id and shards by
    /// first slot, so equal layouts compare (and encode) equal.
    ///
    /// Rules: node ids are non-zero and unique; shard ids are non-zero
    /// (group 0 is metadata) and unique; every slot belongs to exactly one
    /// shard; every shard has at least one replica, on distinct known nodes.
    pub fn new(
        cluster_id: u64,
        epoch: u64,
        mut nodes: Vec<NodeInfo>,
        mut shards: Vec<ShardInfo>,
    ) -> Result<ClusterMap, String> {
        nodes.sort_by_key(|n| n.id);
        if let Some(n) = nodes.iter().find(|n| n.id == 0) {
            return Err(format!("node {}:{} has id 0", n.client_host, n.client_port));
        }
        if let Some(w) = nodes.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(format!("node id {} appears twice", w[0].id));
        }
        shards.sort_by_key(|s| s.slots.0);
        if shards.len() > SLOTS as usize {
            return Err(format!("{} shards for {SLOTS} slots", shards.len()));
        }
        let mut ids: Vec<u64> = shards.iter().map(|s| s.id).collect();
        ids.sort_unstable();
        if ids.first() == Some(&0) {
            return Err("shard id 0 is reserved for the metadata group".into());
        }
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("shard id {} appears twice", w[0]));
        }
        let mut slot_index = vec![0u16; SLOTS as usize].into_boxed_slice();
        let mut next = 0u32;
        for (i, s) in shards.iter().enumerate() {
            let (start, end) = s.slots;
            if start > end || end >= SLOTS {
                return Err(format!("shard {} has bad slot range {start}-{end}", s.id));
            }
            if u32::from(start) != next {
                return Err(if u32::from(start) < next {
                    format!("slot {start} belongs to more than one shard")
                } else {
                    format!("slot {next} belongs to no shard")
                });
            }
            slot_index[start as usize..=end as usize].fill(i as u16);
            next = u32::from(end) + 1;
            if s.replicas.is_empty() {
                return Err(format!("shard {} has no replicas", s.id));
            }
            for (k, r) in s.replicas.iter().enumerate() {
                if nodes.binary_search_by_key(r, |n| n.id).is_err() {
                    return Err(format!("shard {} has a replica on unknown node {r}", s.id));
                }
                if s.replicas[..k].contains(r) {
                    return Err(format!("shard {} has two replicas on node {r}", s.id));
                }
            }
        }
        if next != u32::from(SLOTS) {
            return Err(format!("slot {next} belongs to no shard"));
        }
        Ok(ClusterMap {
            cluster_id,
            epoch,
            nodes,
            shards,
            slot_index,
        })
    }

    /// The initial map of a new cluster (epoch 1): `nodes * shards_per_node`
    /// shards over contiguous slot ranges as even as Redis's create-cluster
    /// makes them (three shards: 0-5460, 5461-10922, 10923-16383), each
    /// with `replicas` replicas on distinct nodes.
    ///
    /// With nodes sorted by id, shard `i` is preferred-led by node `i % n`,
    /// so leadership alternates along the slot space and every node leads
    /// `shards_per_node` shards. Its followers are taken from the other
    /// nodes in ring order, starting at an offset that turns with the round
    /// `i / n`: the layout is invariant under rotating the nodes, so every
    /// node holds exactly `shards_per_node * replicas` replicas, and the
    /// shards a node leads fail over to different nodes.
    pub fn bootstrap(
        cluster_id: u64,
        nodes: Vec<NodeInfo>,
        shards_per_node: usize,
        replicas: usize,
    ) -> Result<ClusterMap, String> {
        let n = nodes.len();
        if n == 0 {
            return Err("a cluster needs at least one node".into());
        }
        if shards_per_node == 0 {
            return Err("shards per node must be at least 1".into());
        }
        if replicas == 0 {
            return Err("the replication factor must be at least 1".into());
        }
        if replicas > n {
            return Err(format!(
                "replication factor {replicas} needs at least {replicas} nodes, the cluster has {n}"
            ));
        }
        let total = n
            .checked_mul(shards_per_node)
            .filter(|&t| t <= SLOTS as usize)
            .ok_or_else(|| {
                format!("{n} nodes x {shards_per_node} shards is more shards than {SLOTS} slots")
            })?;
        let mut ids: Vec<u64> = nodes.iter().map(|n| n.id).collect();
        ids.sort_unstable();
        let slots = SLOTS as usize;
        let mut shards = Vec::with_capacity(total);
        let mut start = 0usize;
        for i in 0..total {
            // Rounded boundary of (i + 1) * 16384 / total, in integers.
            let end = ((i + 1) * 2 * slots + total) / (2 * total) - 1;
            let leader = i % n;
            let round = i / n;
            let mut set = Vec::with_capacity(replicas);
            set.push(ids[leader]);
            for k in 0..replicas - 1 {
                let d = 1 + (round + k) % (n - 1);
                set.push(ids[(leader + d) % n]);
            }
            shards.push(ShardInfo {
                id: i as u64 + 1,
                slots: (start as u16, end as u16),
                replicas: set,
            });
            start = end + 1;
        }
        ClusterMap::new(cluster_id, 1, nodes, shards)
    }

    /// The shard serving a slot (slots above 16383 wrap, as `key_slot`
    /// never returns them).
    pub fn shard_of_slot(&self, slot: u16) -> &ShardInfo {
        &self.shards[self.slot_index[(slot & (SLOTS - 1)) as usize] as usize]
    }

    /// A shard by its group id.
    pub fn shard(&self, id: u64) -> Option<&ShardInfo> {
        self.shards.iter().find(|s| s.id == id)
    }

    /// A node by its id.
    pub fn node(&self, id: u64) -> Option<&NodeInfo> {
        self.nodes
            .binary_search_by_key(&id, |n| n.id)
            .ok()
            .and_then(|i| self.nodes.get(i))
    }

    /// The shards that have a replica on `node`: the groups it must run.
    pub fn shards_with_replica(&self, node: u64) -> impl Iterator<Item = &ShardInfo> + '_ {
        self.shards
            .iter()
            .filter(move |s| s.replicas.contains(&node))
    }

    /// Binary form, stored in the metadata group: magic `KVCM`, a version
    /// byte, then little-endian fixed-width integers and length-prefixed
    /// UTF-8 strings.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.nodes.len() * 48 + self.shards.len() * 40);
        out.extend_from_slice(MAGIC);
        out.push(ENCODING_VERSION);
        out.extend_from_slice(&self.cluster_id.to_le_bytes());
        out.extend_from_slice(&self.epoch.to_le_bytes());
        out.extend_from_slice(&(self.nodes.len() as u32).to_le_bytes());
        for n in &self.nodes {
            out.extend_from_slice(&n.id.to_le_bytes());
            put_str(&mut out, &n.client_host);
            out.extend_from_slice(&n.client_port.to_le_bytes());
            put_str(&mut out, &n.cluster_addr);
        }
        out.extend_from_slice(&(self.shards.len() as u32).to_le_bytes());
        for s in &self.shards {
            out.extend_from_slice(&s.id.to_le_bytes());
            out.extend_from_slice(&s.slots.0.to_le_bytes());
            out.extend_from_slice(&s.slots.1.to_le_bytes());
            out.extend_from_slice(&(s.replicas.len() as u32).to_le_bytes());
            for r in &s.replicas {
                out.extend_from_slice(&r.to_le_bytes());
            }
        }
        out
    }

    /// Reads [`ClusterMap::encode`]'s output. Any other bytes give an
    /// error (never a panic or a huge allocation), and the decoded layout
    /// is checked as [`ClusterMap::new`] checks it.
    pub fn decode(bytes: &[u8]) -> Result<ClusterMap, String> {
        let mut r = Reader(bytes);
        if r.take(4)? != MAGIC {
            return Err("not a cluster map (bad magic)".into());
        }
        let version = r.u8()?;
        if version != ENCODING_VERSION {
            return Err(format!("unsupported cluster map version {version}"));
        }
        let cluster_id = r.u64()?;
        let epoch = r.u64()?;
        // Smallest encodings: a node is id + two empty strings + port, a
        // shard is id + range + replica count.
        let count = r.count(8 + 4 + 2 + 4)?;
        let mut nodes = Vec::with_capacity(count);
        for _ in 0..count {
            nodes.push(NodeInfo {
                id: r.u64()?,
                client_host: r.string()?,
                client_port: r.u16()?,
                cluster_addr: r.string()?,
            });
        }
        let count = r.count(8 + 2 + 2 + 4)?;
        let mut shards = Vec::with_capacity(count);
        for _ in 0..count {
            let id = r.u64()?;
            let slots = (r.u16()?, r.u16()?);
            let n = r.count(8)?;
            let mut replicas = Vec::with_capacity(n);
            for _ in 0..n {
                replicas.push(r.u64()?);
            }
            shards.push(ShardInfo {
                id,
                slots,
                replicas,
            });
        }
        if !r.0.is_empty() {
            return Err(format!(
                "{} trailing bytes after the cluster map",
                r.0.len()
            ));
        }
        ClusterMap::new(cluster_id, epoch, nodes, shards)
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Bounds-checked reading of the encoded map.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("truncated cluster map".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// An element count, refused when the remaining bytes cannot hold that
    /// many elements of at least `min_size` bytes (bounds allocations).
    fn count(&mut self, min_size: usize) -> Result<usize, String> {
        let n = self.u32()? as usize;
        if n > self.0.len() / min_size {
            return Err("truncated cluster map".into());
        }
        Ok(n)
    }

    fn string(&mut self) -> Result<String, String> {
        let n = self.u32()? as usize;
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| "cluster map string is not UTF-8".into())
    }
}

/// FNV-1a, 64 bits: a stable hash (std's hashers are not stable across
/// releases, and these values are persisted and compared between nodes).
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The cluster id of a bootstrap: a hash of the member list (in canonical
/// form: sorted by id, no spaces) and the placement parameters, so nodes
/// started with the same flags agree and nodes started with different
/// ones get different ids (and refuse to talk to each other).
pub fn cluster_id_from(initial_cluster: &str, shards_per_node: usize, replicas: usize) -> u64 {
    let members = match parse_initial_cluster(initial_cluster) {
        Ok(mut m) => {
            m.sort();
            m.iter()
                .map(|(id, addr)| format!("{id}={addr}"))
                .collect::<Vec<_>>()
                .join(",")
        }
        Err(_) => initial_cluster.trim().to_string(),
    };
    let canonical =
        format!("kvasir-cluster/1;{members};shards_per_node={shards_per_node};replicas={replicas}");
    fnv1a64(canonical.as_bytes())
}

/// The 40-hex-character node name Redis Cluster clients expect (CLUSTER
/// NODES, SLOTS, SHARDS). It is a hash prefix (so names of different nodes
/// look different at a glance) followed by the cluster id and node id, so
/// it is stable and distinct for every (cluster, node) pair.
pub fn node_name(cluster_id: u64, node_id: u64) -> String {
    let mut both = [0u8; 16];
    both[..8].copy_from_slice(&cluster_id.to_be_bytes());
    both[8..].copy_from_slice(&node_id.to_be_bytes());
    let prefix = (fnv1a64(&both) >> 32) as u32;
    format!("{prefix:08x}{cluster_id:016x}{node_id:016x}")
}

/// One entry of `--initial-cluster`: a node id, its cluster bus address
/// and, when the entry is written in Redis's `ip:port@cport` form, where its
/// clients connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub id: u64,
    /// `host:port` of the cluster bus (Raft transport).
    pub bus_addr: String,
    /// `(host, port)` of the client listener, if the entry gives it.
    pub client: Option<(String, u16)>,
}

fn parse_host_port(addr: &str) -> Option<(&str, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let port = port.parse::<u16>().ok().filter(|&p| p > 0)?;
    (!host.is_empty()).then_some((host, port))
}

/// The 40-hex-character id of a node's shard in the Redis model (CLUSTER
/// MYSHARDID, Redis 7.2): every node is the master of its own shard, so it
/// is derived from the node, distinct from its name.
pub fn shard_name(cluster_id: u64, node_id: u64) -> String {
    let mut both = [0u8; 17];
    both[..8].copy_from_slice(&cluster_id.to_be_bytes());
    both[8..16].copy_from_slice(&node_id.to_be_bytes());
    both[16] = b's';
    let a = fnv1a64(&both);
    let b = fnv1a64(&a.to_be_bytes());
    format!("{:08x}{a:016x}{b:016x}", (b >> 32) as u32)
}

/// Parses `--initial-cluster`: comma-separated entries, each either
/// `id=host:port` (the cluster bus address; the node announces its client
/// address once the cluster runs) or `id=host:port@cport` (the client
/// address and the cluster bus port on the same host, as CLUSTER NODES
/// writes a node), which makes every client address known from the start.
/// Ids are positive integers, ids and addresses are unique. Entries are
/// returned in the given order.
pub fn parse_members(s: &str) -> Result<Vec<Member>, String> {
    if s.trim().is_empty() {
        return Err("the initial cluster is empty (expected id=host:port,...)".into());
    }
    let mut out: Vec<Member> = Vec::new();
    for entry in s.split(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            return Err(format!("empty entry in initial cluster '{s}'"));
        }
        let Some((id, addr)) = entry.split_once('=') else {
            return Err(format!(
                "initial cluster entry '{entry}' has no '=' (expected id=host:port or id=host:port@cport)"
            ));
        };
        let (id, addr) = (id.trim(), addr.trim());
        let id: u64 = match id.parse() {
            Ok(v) if v > 0 => v,
            _ => {
                return Err(format!(
                    "bad node id '{id}' in initial cluster entry '{entry}' (expected a positive integer)"
                ))
            }
        };
        let bad = || {
            format!(
                "bad address '{addr}' in initial cluster entry '{entry}' (expected host:port or host:port@cport)"
            )
        };
        let (bus_addr, client) = match addr.split_once('@') {
            Some((client, cport)) => {
                let (host, port) = parse_host_port(client).ok_or_else(bad)?;
                let cport = cport
                    .parse::<u16>()
                    .ok()
                    .filter(|&p| p > 0)
                    .ok_or_else(bad)?;
                if cport == port {
                    return Err(format!(
                        "initial cluster entry '{entry}' uses port {port} for both clients and the cluster bus"
                    ));
                }
                (format!("{host}:{cport}"), Some((host.to_string(), port)))
            }
            None => {
                parse_host_port(addr).ok_or_else(bad)?;
                (addr.to_string(), None)
            }
        };
        if out.iter().any(|m| m.id == id) {
            return Err(format!("node id {id} appears twice in the initial cluster"));
        }
        if out.iter().any(|m| m.bus_addr == bus_addr) {
            return Err(format!(
                "address {bus_addr} appears twice in the initial cluster"
            ));
        }
        if let Some(c) = &client {
            if out.iter().any(|m| m.client.as_ref() == Some(c)) {
                return Err(format!(
                    "client address {}:{} appears twice in the initial cluster",
                    c.0, c.1
                ));
            }
        }
        out.push(Member {
            id,
            bus_addr,
            client,
        });
    }
    Ok(out)
}

/// The `(id, cluster bus address)` pairs of `--initial-cluster`.
pub fn parse_initial_cluster(s: &str) -> Result<Vec<(u64, String)>, String> {
    Ok(parse_members(s)?
        .into_iter()
        .map(|m| (m.id, m.bus_addr))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn nodes(n: u64) -> Vec<NodeInfo> {
        (1..=n)
            .map(|id| NodeInfo {
                id,
                client_host: "127.0.0.1".into(),
                client_port: 7000 + id as u16,
                cluster_addr: format!("127.0.0.1:{}", 17000 + id),
            })
            .collect()
    }

    fn counts(map: &ClusterMap) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
        let leads = map
            .nodes
            .iter()
            .map(|n| map.shards.iter().filter(|s| s.replicas[0] == n.id).count())
            .collect();
        let holds = map
            .nodes
            .iter()
            .map(|n| map.shards_with_replica(n.id).count())
            .collect();
        let firsts = map
            .nodes
            .iter()
            .map(|n| {
                map.shards
                    .iter()
                    .filter(|s| s.replicas.get(1) == Some(&n.id))
                    .count()
            })
            .collect();
        (leads, holds, firsts)
    }

    fn check_coverage(map: &ClusterMap) {
        let mut owners = vec![0u32; SLOTS as usize];
        for s in &map.shards {
            for slot in s.slots.0..=s.slots.1 {
                owners[slot as usize] += 1;
            }
        }
        assert!(owners.iter().all(|&c| c == 1));
        for slot in 0..SLOTS {
            assert!(map.shard_of_slot(slot).contains(slot), "slot {slot}");
        }
    }

    #[test]
    fn three_nodes_eight_shards_rf3() {
        let map = ClusterMap::bootstrap(7, nodes(3), 8, 3).unwrap();
        assert_eq!(map.shards.len(), 24);
        assert_eq!(map.epoch, 1);
        check_coverage(&map);
        let (leads, holds, _) = counts(&map);
        assert_eq!(leads, vec![8, 8, 8]);
        assert_eq!(holds, vec![24, 24, 24]);
        let sizes: Vec<u32> = map
            .shards
            .iter()
            .map(|s| u32::from(s.slots.1 - s.slots.0) + 1)
            .collect();
        assert!(sizes.iter().all(|&n| n == 682 || n == 683), "{sizes:?}");
        let ids: Vec<u64> = map.shards.iter().map(|s| s.id).collect();
        assert_eq!(ids, (1..=24).collect::<Vec<_>>());
        // Leadership alternates along the slot space.
        let first: Vec<u64> = map.shards[..3].iter().map(|s| s.replicas[0]).collect();
        assert_eq!(first, vec![1, 2, 3]);
    }

    #[test]
    fn redis_create_cluster_ranges() {
        let map = ClusterMap::bootstrap(1, nodes(3), 1, 1).unwrap();
        let ranges: Vec<(u16, u16)> = map.shards.iter().map(|s| s.slots).collect();
        assert_eq!(ranges, vec![(0, 5460), (5461, 10922), (10923, 16383)]);
    }

    #[test]
    fn placement_is_even_for_many_shapes() {
        for n in 1..=7u64 {
            for spn in [1usize, 2, 3, 8] {
                for rf in 1..=(n as usize).min(5) {
                    let map = ClusterMap::bootstrap(1, nodes(n), spn, rf).unwrap();
                    check_coverage(&map);
                    let (leads, holds, firsts) = counts(&map);
                    assert!(leads.iter().all(|&l| l == spn), "{n} {spn} {rf}");
                    assert!(holds.iter().all(|&h| h == spn * rf), "{n} {spn} {rf}");
                    if rf > 1 {
                        let (lo, hi) = (firsts.iter().min(), firsts.iter().max());
                        assert!(hi.unwrap() - lo.unwrap() <= 1, "{n} {spn} {rf} {firsts:?}");
                    }
                    for s in &map.shards {
                        let mut r = s.replicas.clone();
                        r.sort_unstable();
                        r.dedup();
                        assert_eq!(r.len(), rf);
                    }
                }
            }
        }
    }

    #[test]
    fn five_nodes_spread_failover_targets() {
        let map = ClusterMap::bootstrap(1, nodes(5), 8, 3).unwrap();
        // The shards node 1 leads fail over to each other node in turn.
        let mut targets: Vec<u64> = map
            .shards
            .iter()
            .filter(|s| s.replicas[0] == 1)
            .map(|s| s.replicas[1])
            .collect();
        targets.sort_unstable();
        assert_eq!(targets, vec![2, 2, 3, 3, 4, 4, 5, 5]);
    }

    #[test]
    fn bootstrap_is_deterministic_and_order_free() {
        let a = ClusterMap::bootstrap(9, nodes(4), 8, 3).unwrap();
        let mut shuffled = nodes(4);
        shuffled.reverse();
        let b = ClusterMap::bootstrap(9, shuffled, 8, 3).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.encode(), b.encode());
    }

    #[test]
    fn bootstrap_rejects_bad_shapes() {
        assert!(ClusterMap::bootstrap(1, nodes(2), 8, 3)
            .unwrap_err()
            .contains("at least 3"));
        assert!(ClusterMap::bootstrap(1, nodes(2), 8, 0).is_err());
        assert!(ClusterMap::bootstrap(1, nodes(2), 0, 1).is_err());
        assert!(ClusterMap::bootstrap(1, vec![], 8, 1).is_err());
        assert!(ClusterMap::bootstrap(1, nodes(3), 10_000, 1).is_err());
        let mut dup = nodes(3);
        dup[2].id = 1;
        assert!(ClusterMap::bootstrap(1, dup, 1, 1)
            .unwrap_err()
            .contains("twice"));
        // As many shards as slots is fine.
        let map = ClusterMap::bootstrap(1, nodes(2), 8192, 1).unwrap();
        assert!(map.shards.iter().all(|s| s.slots.0 == s.slots.1));
    }

    #[test]
    fn new_rejects_bad_layouts() {
        let shard = |id, a, b, r: Vec<u64>| ShardInfo {
            id,
            slots: (a, b),
            replicas: r,
        };
        let err = |shards| ClusterMap::new(1, 1, nodes(3), shards).unwrap_err();
        assert!(err(vec![shard(1, 0, 100, vec![1])]).contains("slot 101 belongs to no shard"));
        assert!(err(vec![shard(1, 1, 16383, vec![1])]).contains("slot 0 belongs to no shard"));
        assert!(err(vec![
            shard(1, 0, 100, vec![1]),
            shard(2, 100, 16383, vec![2])
        ])
        .contains("more than one"));
        assert!(err(vec![shard(0, 0, 16383, vec![1])]).contains("metadata"));
        assert!(err(vec![shard(1, 0, 16384, vec![1])]).contains("bad slot range"));
        assert!(err(vec![shard(1, 0, 16383, vec![])]).contains("no replicas"));
        assert!(err(vec![shard(1, 0, 16383, vec![9])]).contains("unknown node 9"));
        assert!(err(vec![shard(1, 0, 16383, vec![1, 1])]).contains("two replicas"));
        assert!(
            err(vec![shard(1, 0, 10, vec![1]), shard(1, 11, 16383, vec![2])]).contains("twice")
        );
        assert!(err(vec![]).contains("slot 0"));
    }

    #[test]
    fn lookups() {
        let map = ClusterMap::bootstrap(1, nodes(3), 8, 2).unwrap();
        assert_eq!(map.node(2).map(|n| n.client_port), Some(7002));
        assert_eq!(map.node(2).map(|n| n.cluster_port()), Some(17002));
        assert_eq!(
            map.node(2).map(|n| n.client_addr()).as_deref(),
            Some("127.0.0.1:7002")
        );
        assert!(map.node(4).is_none());
        assert_eq!(map.shard(24).map(|s| s.slots.1), Some(16383));
        assert!(map.shard(25).is_none());
        assert_eq!(map.shard_of_slot(0).id, 1);
        assert_eq!(map.shard_of_slot(16383).id, 24);
        assert_eq!(map.shards_with_replica(1).count(), 16);
        assert_eq!(map.shards_with_replica(9).count(), 0);
    }

    #[test]
    fn encode_decode_round_trip() {
        for (n, spn, rf) in [(1, 1, 1), (3, 8, 3), (5, 3, 2), (7, 8, 5)] {
            let mut map = ClusterMap::bootstrap(0xDEAD_BEEF, nodes(n), spn, rf).unwrap();
            map.epoch = 42;
            map.nodes[0].client_host = "höst-ü.example".into();
            let bytes = map.encode();
            let back = ClusterMap::decode(&bytes).unwrap();
            assert_eq!(back, map);
            assert_eq!(back.encode(), bytes);
        }
    }

    #[test]
    fn decode_rejects_every_truncation_and_extension() {
        let bytes = ClusterMap::bootstrap(3, nodes(3), 8, 3).unwrap().encode();
        for len in 0..bytes.len() {
            assert!(ClusterMap::decode(&bytes[..len]).is_err(), "prefix {len}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(ClusterMap::decode(&longer)
            .unwrap_err()
            .contains("trailing"));
        let mut v2 = bytes.clone();
        v2[4] = 2;
        assert!(ClusterMap::decode(&v2).unwrap_err().contains("version 2"));
        assert!(ClusterMap::decode(b"KVC")
            .unwrap_err()
            .contains("truncated"));
        assert!(ClusterMap::decode(b"XXXX\x01")
            .unwrap_err()
            .contains("magic"));
        // A huge count is refused before allocating.
        let mut huge = bytes[..21].to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(ClusterMap::decode(&huge).is_err());
    }

    #[test]
    fn decode_survives_corruption() {
        let bytes = ClusterMap::bootstrap(3, nodes(3), 2, 2).unwrap().encode();
        // Flip every byte in turn: an error or a valid map, never a panic.
        for i in 0..bytes.len() {
            for x in [0x01u8, 0x80, 0xFF] {
                let mut b = bytes.clone();
                b[i] ^= x;
                if let Ok(map) = ClusterMap::decode(&b) {
                    assert_eq!(ClusterMap::decode(&map.encode()), Ok(map));
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = ClusterMap::decode(&bytes);
            let mut framed = MAGIC.to_vec();
            framed.push(ENCODING_VERSION);
            framed.extend_from_slice(&bytes);
            let _ = ClusterMap::decode(&framed);
        }
    }

    #[test]
    fn cluster_ids_are_stable_and_parameter_sensitive() {
        let a = cluster_id_from("1=127.0.0.1:17001,2=127.0.0.1:17002", 8, 3);
        assert_eq!(
            a,
            cluster_id_from(" 2=127.0.0.1:17002 , 1=127.0.0.1:17001", 8, 3)
        );
        assert_eq!(
            a,
            cluster_id_from("1=127.0.0.1:17001,2=127.0.0.1:17002", 8, 3)
        );
        assert_ne!(
            a,
            cluster_id_from("1=127.0.0.1:17001,2=127.0.0.1:17002", 4, 3)
        );
        assert_ne!(
            a,
            cluster_id_from("1=127.0.0.1:17001,2=127.0.0.1:17002", 8, 2)
        );
        assert_ne!(
            a,
            cluster_id_from("1=127.0.0.1:17001,2=127.0.0.1:17003", 8, 3)
        );
        assert_ne!(a, cluster_id_from("1=127.0.0.1:17001", 8, 3));
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn node_names_are_40_hex_and_distinct() {
        let a = node_name(7, 1);
        assert_eq!(a.len(), 40);
        assert!(a
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_eq!(a, node_name(7, 1));
        assert_ne!(a, node_name(7, 2));
        assert_ne!(a, node_name(8, 1));
        assert_ne!(a[..8], node_name(7, 2)[..8]);
        assert!(a.ends_with("00000000000000070000000000000001"));
    }

    #[test]
    fn initial_cluster_parsing() {
        assert_eq!(
            parse_initial_cluster("1=127.0.0.1:17001,2=127.0.0.1:17002"),
            Ok(vec![
                (1, "127.0.0.1:17001".to_string()),
                (2, "127.0.0.1:17002".to_string())
            ])
        );
        assert_eq!(
            parse_initial_cluster(" 3 = node-c:9 "),
            Ok(vec![(3, "node-c:9".to_string())])
        );
        assert_eq!(
            parse_initial_cluster("1=[::1]:17001"),
            Ok(vec![(1, "[::1]:17001".to_string())])
        );
        let err = |s| parse_initial_cluster(s).unwrap_err();
        assert!(err("").contains("empty"));
        assert!(err("  ").contains("empty"));
        assert!(err("1=a:1,,2=b:2").contains("empty entry"));
        assert!(err("1=a:1,").contains("empty entry"));
        assert!(err("127.0.0.1:17001").contains("no '='"));
        assert!(err("x=a:1").contains("bad node id 'x'"));
        assert!(err("0=a:1").contains("bad node id '0'"));
        assert!(err("-1=a:1").contains("bad node id"));
        assert!(err("1=").contains("bad address"));
        assert!(err("1=host").contains("bad address"));
        assert!(err("1=host:0").contains("bad address"));
        assert!(err("1=host:99999").contains("bad address"));
        assert!(err("1=:80").contains("bad address"));
        assert!(err("1=a:1,1=b:2").contains("node id 1 appears twice"));
        assert!(err("1=a:1,2=a:1").contains("address a:1 appears twice"));
    }

    #[test]
    fn initial_cluster_with_client_addresses() {
        let m = parse_members("1=127.0.0.1:7001@17001, 2=10.0.0.2:6379@16379,3=c:9").unwrap();
        assert_eq!(
            m,
            vec![
                Member {
                    id: 1,
                    bus_addr: "127.0.0.1:17001".into(),
                    client: Some(("127.0.0.1".into(), 7001)),
                },
                Member {
                    id: 2,
                    bus_addr: "10.0.0.2:16379".into(),
                    client: Some(("10.0.0.2".into(), 6379)),
                },
                Member {
                    id: 3,
                    bus_addr: "c:9".into(),
                    client: None,
                },
            ]
        );
        // The cluster id depends on the bus addresses only, so writing the
        // client addresses into the list keeps an existing cluster's id.
        assert_eq!(
            cluster_id_from("1=h:7001@17001,2=h:7002@17002", 8, 3),
            cluster_id_from("1=h:17001,2=h:17002", 8, 3)
        );
        let err = |s| parse_members(s).unwrap_err();
        assert!(err("1=h:7001@").contains("bad address"));
        assert!(err("1=h:7001@0").contains("bad address"));
        assert!(err("1=h:@17001").contains("bad address"));
        assert!(err("1=h:7001@7001").contains("both clients and the cluster bus"));
        assert!(
            err("1=h:7001@17001,2=h:7001@17002").contains("client address h:7001 appears twice")
        );
        assert!(err("1=h:7001@17001,2=h:7002@17001").contains("address h:17001 appears twice"));
    }
}

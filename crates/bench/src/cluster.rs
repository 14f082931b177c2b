//! Redis Cluster routing on the client side: CRC16 key slots (with hash
//! tags, as the Redis Cluster specification defines them), the slot map read
//! from `CLUSTER SLOTS`, and the parsing of `-MOVED` / `-ASK` redirections.
//! The connections that use them live in `client.rs`.

use crate::resp::Reply;

/// Number of hash slots in a Redis Cluster.
pub const SLOTS: usize = kvasir_cluster::SLOTS as usize;

/// CRC16 and key slots come from the cluster crate, so that the load
/// generator and the server route keys with the very same function.
pub use kvasir_cluster::{crc16, key_slot};

/// Which node serves each slot. Nodes are "host:port" strings; `UNKNOWN`
/// marks slots that no node claimed.
#[derive(Clone, Debug)]
pub struct SlotMap {
    pub slots: Vec<u16>,
    pub nodes: Vec<String>,
}

impl SlotMap {
    pub const UNKNOWN: u16 = u16::MAX;

    pub fn empty() -> SlotMap {
        SlotMap {
            slots: vec![Self::UNKNOWN; SLOTS],
            nodes: Vec::new(),
        }
    }

    /// Index of a node, added if new.
    pub fn node_index(&mut self, addr: &str) -> u16 {
        match self.nodes.iter().position(|n| n == addr) {
            Some(i) => i as u16,
            None => {
                self.nodes.push(addr.to_string());
                (self.nodes.len() - 1) as u16
            }
        }
    }

    /// The node of a slot, if known.
    pub fn node_of(&self, slot: u16) -> Option<u16> {
        match self.slots.get(slot as usize) {
            Some(&n) if n != Self::UNKNOWN => Some(n),
            _ => None,
        }
    }

    /// Points one slot at a node (after a MOVED).
    pub fn set(&mut self, slot: u16, addr: &str) {
        let n = self.node_index(addr);
        if let Some(s) = self.slots.get_mut(slot as usize) {
            *s = n;
        }
    }

    /// Number of slots with a known node.
    pub fn covered(&self) -> usize {
        self.slots.iter().filter(|&&n| n != Self::UNKNOWN).count()
    }

    /// Builds the map from a `CLUSTER SLOTS` reply: each entry is
    /// `[start, end, [host, port, id...], replicas...]`; the first node is
    /// the master. An empty host means "the host you reached me on".
    pub fn from_cluster_slots(reply: Reply<'_>, default_host: &str) -> Result<SlotMap, String> {
        let entries = reply.array().ok_or_else(|| describe(reply))?;
        let mut map = SlotMap::empty();
        for entry in entries {
            let mut parts = entry.array().ok_or("CLUSTER SLOTS entry is not an array")?;
            let start = parts.next().and_then(|r| r.int());
            let end = parts.next().and_then(|r| r.int());
            let master = parts.next().and_then(|r| r.array());
            let (Some(start), Some(end), Some(mut master)) = (start, end, master) else {
                return Err("malformed CLUSTER SLOTS entry".into());
            };
            let host = master
                .next()
                .and_then(|r| r.bulk().flatten())
                .ok_or("CLUSTER SLOTS entry without a host")?;
            let port = master
                .next()
                .and_then(|r| r.int())
                .ok_or("CLUSTER SLOTS entry without a port")?;
            let host = std::str::from_utf8(host).map_err(|_| "host is not UTF-8")?;
            let host = if host.is_empty() || host == "?" {
                default_host
            } else {
                host
            };
            if !(0..SLOTS as i64).contains(&start) || !(start..SLOTS as i64).contains(&end) {
                return Err(format!("bad slot range {start}-{end}"));
            }
            let n = map.node_index(&format!("{host}:{port}"));
            for s in start..=end {
                map.slots[s as usize] = n;
            }
        }
        if map.nodes.is_empty() {
            return Err("CLUSTER SLOTS returned no slots".into());
        }
        Ok(map)
    }
}

fn describe(reply: Reply<'_>) -> String {
    match reply.error() {
        Some(e) => format!("CLUSTER SLOTS failed: {}", String::from_utf8_lossy(e)),
        None => "CLUSTER SLOTS reply is not an array".to_string(),
    }
}

/// A cluster redirection carried by an error reply.
#[derive(Debug, PartialEq, Eq)]
pub enum Redirect {
    /// `MOVED slot host:port`: the slot lives there now.
    Moved { slot: u16, addr: String },
    /// `ASK slot host:port`: ask there once, after `ASKING`.
    Ask { slot: u16, addr: String },
    /// `TRYAGAIN` / `CLUSTERDOWN`: retry shortly.
    Retry,
}

/// Parses `MOVED` / `ASK` / `TRYAGAIN` / `CLUSTERDOWN` error text; an empty
/// host in the address means the host of the node that answered.
pub fn parse_redirect(err: &[u8], answering_host: &str) -> Option<Redirect> {
    let text = std::str::from_utf8(err).ok()?;
    let mut words = text.split_ascii_whitespace();
    let kind = words.next()?;
    if kind == "TRYAGAIN" || kind == "CLUSTERDOWN" {
        return Some(Redirect::Retry);
    }
    if kind != "MOVED" && kind != "ASK" {
        return None;
    }
    let slot: u16 = words.next()?.parse().ok()?;
    let addr = words.next()?;
    let addr = if addr.starts_with(':') {
        format!("{answering_host}{addr}")
    } else {
        addr.to_string()
    };
    Some(if kind == "MOVED" {
        Redirect::Moved { slot, addr }
    } else {
        Redirect::Ask { slot, addr }
    })
}

/// The host part of "host:port" (IPv6 literals keep their colons).
pub fn host_of(addr: &str) -> &str {
    match addr.rfind(':') {
        Some(i) => addr[..i].trim_start_matches('[').trim_end_matches(']'),
        None => addr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_slots_come_from_the_cluster_crate() {
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), 3443);
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn slot_map_from_cluster_slots() {
        let reply = b"*2\r\n\
            *3\r\n:0\r\n:8191\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n\
            *4\r\n:8192\r\n:16383\r\n*2\r\n$0\r\n\r\n:7001\r\n*2\r\n$9\r\n127.0.0.1\r\n:7002\r\n";
        let map = SlotMap::from_cluster_slots(Reply(reply), "10.0.0.1").unwrap();
        assert_eq!(map.nodes, vec!["127.0.0.1:7000", "10.0.0.1:7001"]);
        assert_eq!(map.node_of(0), Some(0));
        assert_eq!(map.node_of(8191), Some(0));
        assert_eq!(map.node_of(8192), Some(1));
        assert_eq!(map.covered(), SLOTS);
        let err = SlotMap::from_cluster_slots(
            Reply(b"-ERR This instance has cluster support disabled\r\n"),
            "h",
        )
        .unwrap_err();
        assert!(err.contains("cluster support disabled"), "{err}");
    }

    #[test]
    fn redirects() {
        assert_eq!(
            parse_redirect(b"MOVED 3999 127.0.0.1:6381", "x"),
            Some(Redirect::Moved {
                slot: 3999,
                addr: "127.0.0.1:6381".into()
            })
        );
        assert_eq!(
            parse_redirect(b"ASK 12 :7000", "10.1.1.1"),
            Some(Redirect::Ask {
                slot: 12,
                addr: "10.1.1.1:7000".into()
            })
        );
        assert_eq!(
            parse_redirect(
                b"TRYAGAIN Multiple keys request during rehashing of slot",
                "x"
            ),
            Some(Redirect::Retry)
        );
        assert_eq!(parse_redirect(b"ERR unknown command", "x"), None);
        assert_eq!(host_of("127.0.0.1:7000"), "127.0.0.1");
        assert_eq!(host_of("[::1]:7000"), "::1");
    }
}

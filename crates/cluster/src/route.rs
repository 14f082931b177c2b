//! Routing a command in cluster mode: the one slot all of its keys hash to,
//! and the redirection errors Redis Cluster clients react to. The texts are
//! Redis 7's, byte for byte, because clients match on them.

use bytes::Bytes;
use kvasir_core::CommandSpec;
use kvasir_resp::Reply;

use crate::map::NodeInfo;
use crate::slot::key_slot;

/// Why a command cannot be routed to a single slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteError {
    /// Its keys hash to different slots.
    CrossSlot,
}

impl RouteError {
    /// The error reply Redis sends.
    pub fn reply(&self) -> Reply {
        Reply::error(self.message())
    }

    /// The error text without the leading dash.
    pub fn message(&self) -> &'static str {
        match self {
            RouteError::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot",
        }
    }
}

impl std::fmt::Display for RouteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for RouteError {}

/// The slot of every key argument of a command (`args[0]` is the command
/// name, as `CommandSpec::keys_of` expects), `None` for a command without
/// keys, `CrossSlot` when two keys hash to different slots (hash tags make
/// related keys share one).
pub fn command_slot(spec: &CommandSpec, args: &[Bytes]) -> Result<Option<u16>, RouteError> {
    let mut slot = None;
    for i in spec.keys_of(args) {
        let Some(key) = args.get(i) else { continue };
        let s = key_slot(key);
        match slot {
            None => slot = Some(s),
            Some(prev) if prev != s => return Err(RouteError::CrossSlot),
            Some(_) => {}
        }
    }
    Ok(slot)
}

/// `-MOVED <slot> <host>:<port>`: the slot is served elsewhere for good
/// (the client updates its slot map). The host is written as is, without
/// brackets for IPv6, as Redis does.
pub fn moved(slot: u16, host: &str, port: u16) -> Reply {
    Reply::error(format!("MOVED {slot} {host}:{port}"))
}

/// `-MOVED` to a node's client address.
pub fn moved_to(slot: u16, node: &NodeInfo) -> Reply {
    moved(slot, &node.client_host, node.client_port)
}

/// `-ASK <slot> <host>:<port>`: ask that node once, after `ASKING`.
pub fn ask(slot: u16, host: &str, port: u16) -> Reply {
    Reply::error(format!("ASK {slot} {host}:{port}"))
}

/// `-TRYAGAIN`: the keys are momentarily unavailable (slot moving, leader
/// election); the client retries after a short delay.
pub fn try_again() -> Reply {
    Reply::error("TRYAGAIN Multiple keys request during rehashing of slot")
}

/// `-CLUSTERDOWN The cluster is down`: no quorum for the slot's shard.
pub fn cluster_down() -> Reply {
    Reply::error("CLUSTERDOWN The cluster is down")
}

/// `-CLUSTERDOWN Hash slot not served`: no shard owns the slot.
pub fn slot_not_served() -> Reply {
    Reply::error("CLUSTERDOWN Hash slot not served")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvasir_resp::{encode, Protocol};

    fn args(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn slot_of(words: &[&str]) -> Result<Option<u16>, RouteError> {
        let a = args(words);
        let spec = kvasir_core::lookup(words[0].as_bytes()).expect("known command");
        command_slot(spec, &a)
    }

    fn wire(r: &Reply) -> Vec<u8> {
        let mut out = bytes::BytesMut::new();
        encode(r, Protocol::Resp2, &mut out);
        out.to_vec()
    }

    #[test]
    fn single_key_commands() {
        assert_eq!(slot_of(&["GET", "foo"]), Ok(Some(12182)));
        assert_eq!(slot_of(&["set", "bar", "1"]), Ok(Some(5061)));
        assert_eq!(slot_of(&["PING"]), Ok(None));
        assert_eq!(slot_of(&["DBSIZE"]), Ok(None));
    }

    #[test]
    fn multi_key_commands_and_hash_tags() {
        assert_eq!(slot_of(&["DEL", "foo", "bar"]), Err(RouteError::CrossSlot));
        assert_eq!(slot_of(&["DEL", "foo", "foo"]), Ok(Some(12182)));
        assert_eq!(
            slot_of(&["MSET", "{user1000}.a", "x", "{user1000}.b", "y"]),
            Ok(Some(3443))
        );
        // Values of MSET are not keys.
        assert_eq!(
            slot_of(&["MSET", "{u}a", "foo", "{u}b", "bar"]),
            slot_of(&["GET", "u"])
        );
        assert_eq!(
            slot_of(&["MGET", "{user1000}.a", "user1000", "x"]),
            Err(RouteError::CrossSlot)
        );
    }

    #[test]
    fn movable_keys() {
        assert_eq!(
            slot_of(&["ZUNIONSTORE", "{t}d", "2", "{t}a", "{t}b"]),
            slot_of(&["GET", "t"])
        );
        assert_eq!(
            slot_of(&["ZUNIONSTORE", "{t}d", "2", "{t}a", "b"]),
            Err(RouteError::CrossSlot)
        );
        // Arguments after numkeys keys are not keys.
        assert_eq!(
            slot_of(&["LMPOP", "1", "{t}a", "LEFT"]),
            slot_of(&["GET", "t"])
        );
    }

    #[test]
    fn error_texts_match_redis() {
        assert_eq!(
            wire(&RouteError::CrossSlot.reply()),
            b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
        );
        assert_eq!(
            RouteError::CrossSlot.to_string(),
            "CROSSSLOT Keys in request don't hash to the same slot"
        );
        assert_eq!(
            wire(&moved(3999, "127.0.0.1", 7002)),
            b"-MOVED 3999 127.0.0.1:7002\r\n"
        );
        let node = NodeInfo {
            id: 1,
            client_host: "10.0.0.1".into(),
            client_port: 6381,
            cluster_addr: "10.0.0.1:16381".into(),
        };
        assert_eq!(wire(&moved_to(0, &node)), b"-MOVED 0 10.0.0.1:6381\r\n");
        assert_eq!(wire(&ask(12, "::1", 7000)), b"-ASK 12 ::1:7000\r\n");
        assert_eq!(
            wire(&try_again()),
            b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
        );
        assert_eq!(
            wire(&cluster_down()),
            b"-CLUSTERDOWN The cluster is down\r\n"
        );
        assert_eq!(
            wire(&slot_not_served()),
            b"-CLUSTERDOWN Hash slot not served\r\n"
        );
    }
}

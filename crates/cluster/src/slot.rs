//! Hash slots as the Redis Cluster specification defines them: CRC16
//! (XMODEM) of the key, or of its `{hash tag}`, modulo 16384. Clients
//! compute the same function to pick a node, so it must match bit for bit.

/// Number of hash slots in a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// The CRC16 lookup table, built at compile time (polynomial 0x1021).
const fn crc16_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

static CRC16_TABLE: [u16; 256] = crc16_table();

/// CRC16-CCITT (XMODEM), the checksum Redis Cluster uses.
pub fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16_TABLE[(((crc >> 8) as u8) ^ b) as usize]
    })
}

/// The hash slot of a key: CRC16 of the key, or of the part between the
/// first `{` and the next `}` when that part is not empty.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(s) => match key[s + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[s + 1..s + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) & (SLOTS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_and_key_slots_match_redis() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"hello"), 866);
        assert_eq!(key_slot(b""), 0);
    }

    #[test]
    fn hash_tags_follow_the_cluster_spec() {
        let a = key_slot(b"{user1000}.following");
        assert_eq!(a, key_slot(b"{user1000}.followers"));
        assert_eq!(a, key_slot(b"user1000"));
        assert_eq!(a, 3443);
        // Empty tag: the whole key is hashed.
        assert_eq!(key_slot(b"foo{}{bar}"), 8363);
        // First "{" to the next "}": hashes "{bar".
        assert_eq!(key_slot(b"foo{{bar}}zap"), 4015);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        // Only the first tag counts.
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"{}foo"), 9500);
        assert_eq!(key_slot(b"no}tag{"), crc16(b"no}tag{") & 0x3FFF);
    }

    #[test]
    fn slots_are_always_in_range() {
        for i in 0..10_000u32 {
            assert!(key_slot(format!("key:{i}").as_bytes()) < SLOTS);
        }
    }
}

//! The payload of one Raft entry: the leader's apply context (its clock and
//! a seed, so every replica applies identically) and a batch of encoded
//! proposals from any number of client connections.
//!
//! Layout: version u8 = 1 | now_ms u64 | seed u64 | count u32 |
//! count x (len u32 | bytes), little endian.

const VERSION: u8 = 1;
const HEADER: usize = 1 + 8 + 8 + 4;

/// The apply context of one proposal inside an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryCtx {
    pub index: u64,
    pub term: u64,
    /// The leader's wall clock when it proposed the entry.
    pub now_ms: u64,
    /// Distinct per proposal of the entry.
    pub seed: u64,
}

/// Builds an entry payload proposal by proposal.
pub struct EntryBuilder {
    buf: Vec<u8>,
    count: u32,
}

impl EntryBuilder {
    pub fn new(now_ms: u64, seed: u64) -> EntryBuilder {
        let mut buf = Vec::with_capacity(256);
        buf.push(VERSION);
        buf.extend_from_slice(&now_ms.to_le_bytes());
        buf.extend_from_slice(&seed.to_le_bytes());
        buf.extend_from_slice(&0u32.to_le_bytes());
        EntryBuilder { buf, count: 0 }
    }

    pub fn push(&mut self, proposal: &[u8]) {
        self.buf
            .extend_from_slice(&(proposal.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(proposal);
        self.count += 1;
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.buf[17..21].copy_from_slice(&self.count.to_le_bytes());
        self.buf
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

/// Splits an entry payload into (now_ms, seed, proposals). A malformed
/// payload is an error, never a panic: the log is read from disk.
pub fn decode(data: &[u8]) -> Result<(u64, u64, Vec<&[u8]>), String> {
    if data.len() < HEADER || data[0] != VERSION {
        return Err(format!(
            "entry payload of {} bytes has no valid header",
            data.len()
        ));
    }
    let now_ms = u64_at(data, 1);
    let seed = u64_at(data, 9);
    let count = u32_at(data, 17) as usize;
    let mut at = HEADER;
    let mut out = Vec::with_capacity(count.min(data.len() / 4));
    for i in 0..count {
        if data.len() < at + 4 {
            return Err(format!("entry payload truncated at proposal {i}"));
        }
        let len = u32_at(data, at) as usize;
        at += 4;
        if data.len() < at + len {
            return Err(format!("entry payload truncated inside proposal {i}"));
        }
        out.push(&data[at..at + len]);
        at += len;
    }
    Ok((now_ms, seed, out))
}

/// The seed of the `i`th proposal of an entry whose seed is `seed`.
pub fn proposal_seed(seed: u64, i: usize) -> u64 {
    seed.wrapping_add((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_never_panic_on_damage() {
        let mut b = EntryBuilder::new(1234, 99);
        b.push(b"SET a 1");
        b.push(b"");
        b.push(b"INCR x");
        let data = b.finish();
        let (now, seed, props) = decode(&data).unwrap();
        assert_eq!((now, seed), (1234, 99));
        assert_eq!(props, vec![&b"SET a 1"[..], b"", b"INCR x"]);
        for cut in 0..data.len() {
            assert!(decode(&data[..cut]).is_err());
        }
        let mut bad = data.clone();
        bad[17] = 0xff;
        assert!(decode(&bad).is_err());
    }
}

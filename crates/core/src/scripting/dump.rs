//! FUNCTION DUMP's payload in Redis 7.0's format, so a dump taken from
//! redis-server restores into Kvasir and back: for each library the RDB
//! opcode FUNCTION2 (245) and the library code as an RDB string, then the
//! RDB version (10, two bytes little-endian) and a CRC64 (Jones, as
//! Redis's crc64.c) of everything before it, little-endian.

use crate::error::CmdError;
use bytes::Bytes;

const OPCODE_FUNCTION2: u8 = 245;
const RDB_VERSION: u16 = 10;

pub fn encode(codes: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        put_len(&mut out, code.len() as u64);
        out.extend_from_slice(code);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn bad_payload() -> CmdError {
    CmdError::other("ERR payload version or checksum are wrong")
}

pub fn decode(payload: &[u8]) -> Result<Vec<Bytes>, CmdError> {
    if payload.len() < 10 {
        return Err(bad_payload());
    }
    let (body, trailer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([trailer[0], trailer[1]]);
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&trailer[2..]);
    if version > RDB_VERSION || crc64(0, &payload[..payload.len() - 8]) != u64::from_le_bytes(crc) {
        return Err(bad_payload());
    }
    let mut r = Reader { b: body };
    let mut codes = Vec::new();
    while !r.b.is_empty() {
        if r.u8()? != OPCODE_FUNCTION2 {
            return Err(CmdError::other("ERR given type is not a function"));
        }
        codes.push(Bytes::from(r.string()?));
    }
    Ok(codes)
}

fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 64 {
        out.push(n as u8);
    } else if n < 16384 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CmdError> {
        if self.b.len() < n {
            return Err(bad_payload());
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }

    fn u8(&mut self) -> Result<u8, CmdError> {
        Ok(self.take(1)?[0])
    }

    /// An RDB length; `Err` for the special string encodings' marker,
    /// which `string` handles.
    fn len(&mut self, first: u8) -> Result<u64, CmdError> {
        Ok(match first >> 6 {
            0 => (first & 0x3f) as u64,
            1 => (((first & 0x3f) as u64) << 8) | self.u8()? as u64,
            _ if first == 0x80 => {
                let b = self.take(4)?;
                u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u64
            }
            _ if first == 0x81 => {
                let mut a = [0u8; 8];
                a.copy_from_slice(self.take(8)?);
                u64::from_be_bytes(a)
            }
            _ => return Err(bad_payload()),
        })
    }

    fn string(&mut self) -> Result<Vec<u8>, CmdError> {
        let first = self.u8()?;
        if first >> 6 != 3 {
            let n = self.len(first)?;
            let n = usize::try_from(n).map_err(|_| bad_payload())?;
            return Ok(self.take(n)?.to_vec());
        }
        match first & 0x3f {
            0 => Ok((self.u8()? as i8).to_string().into_bytes()),
            1 => {
                let b = self.take(2)?;
                Ok(i16::from_le_bytes([b[0], b[1]]).to_string().into_bytes())
            }
            2 => {
                let b = self.take(4)?;
                Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]])
                    .to_string()
                    .into_bytes())
            }
            3 => {
                let f = self.u8()?;
                let clen = self.len(f)? as usize;
                let f = self.u8()?;
                let len = self.len(f)? as usize;
                let compressed = self.take(clen)?;
                lzf_decompress(compressed, len).ok_or_else(bad_payload)
            }
            _ => Err(bad_payload()),
        }
    }
}

/// LZF decompression (liblzf's format, used by RDB for long strings);
/// `None` if the input does not produce exactly `len` bytes.
fn lzf_decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    // The payload came from a client: never trust `len` for allocation
    // beyond what the input could expand to (at most 264 bytes per 2).
    if len > input.len().saturating_mul(132).saturating_add(64) {
        return None;
    }
    let mut out = Vec::with_capacity(len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            out.extend_from_slice(input.get(i..i + run)?);
            i += run;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += *input.get(i)? as usize;
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + *input.get(i)? as usize + 1;
            i += 1;
            let start = out.len().checked_sub(back)?;
            for k in 0..n + 2 {
                let b = out[start + k];
                out.push(b);
            }
        }
        if out.len() > len {
            return None;
        }
    }
    (out.len() == len).then_some(out)
}

/// Redis's CRC64 (Jones polynomial, reflected, no final xor).
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5;
    for &b in data {
        crc ^= b as u64;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_matches_redis_check_value() {
        // crc64.c's self-test: "123456789" gives 0xe9c6d914c4b8d9ca.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn payload_round_trips_and_damage_is_refused() {
        let a: &[u8] = b"#!lua name=a\nredis.register_function('f', function() return 1 end)";
        let long = vec![b'x'; 20000];
        let p = encode(&[a, &long]);
        assert_eq!(decode(&p).unwrap(), vec![Bytes::from(a), Bytes::from(long)]);
        for cut in 0..p.len() {
            assert!(decode(&p[..cut]).is_err());
        }
        let mut bad = p.clone();
        bad[3] ^= 1;
        assert!(decode(&bad).is_err());
    }

    #[test]
    fn lzf_back_references_expand() {
        // "abcabcabc": literal "abc", then a 6-byte copy from 3 back.
        let compressed = [2, b'a', b'b', b'c', (4 << 5), 2];
        assert_eq!(lzf_decompress(&compressed, 9).unwrap(), b"abcabcabc");
        assert!(lzf_decompress(&compressed, 10).is_none());
        assert!(lzf_decompress(&[0x20, 5], 3).is_none());
    }
}

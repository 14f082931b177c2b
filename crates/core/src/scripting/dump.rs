//! FUNCTION DUMP's payload in Redis 7.0's format, so a dump taken from
//! redis-server restores into Kvasir and back: for each library the RDB
//! opcode FUNCTION2 (245) and the library code as an RDB string, then the
//! RDB version and CRC64 trailer ([`crate::rdb::seal`]).

use crate::error::CmdError;
use crate::rdb::{self, Reader};
use bytes::Bytes;

const OPCODE_FUNCTION2: u8 = 245;

pub fn encode(codes: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        rdb::put_string(&mut out, code);
    }
    rdb::seal(&mut out);
    out
}

fn bad_payload() -> CmdError {
    CmdError::other("ERR payload version or checksum are wrong")
}

pub fn decode(payload: &[u8]) -> Result<Vec<Bytes>, CmdError> {
    let body = rdb::verify(payload).ok_or_else(bad_payload)?;
    let mut r = Reader::new(body);
    let mut codes = Vec::new();
    while !r.is_empty() {
        if r.u8().map_err(|_| bad_payload())? != OPCODE_FUNCTION2 {
            return Err(CmdError::other("ERR given type is not a function"));
        }
        let code = r.string().map_err(|_| bad_payload())?;
        codes.push(Bytes::from(code.into_owned()));
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

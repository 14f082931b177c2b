//! Mutual authentication of cluster bus connections by a shared secret,
//! never sent on the wire: an HMAC-SHA256 challenge-response in one and a
//! half round trips, bound to the connection's handshake (cluster id and
//! both node ids and the lane).
//!
//! ```text
//! connector -> acceptor   hello (36 bytes) | nonce_c (16)
//! acceptor  -> connector  nonce_a (16) | HMAC(secret, "A" hello nonce_c nonce_a)
//! connector -> acceptor   HMAC(secret, "C" hello nonce_a nonce_c)
//! ```
//!
//! Each side proves it knows the secret over a nonce the other side chose,
//! so a recorded exchange cannot be replayed, and neither side sends a Raft
//! frame to (or accepts one from) a peer that has not proven it. Without a
//! configured secret both sides use the empty key: the exchange still runs,
//! and a node with a secret refuses one without.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const HELLO_LEN: usize = 36;
pub const NONCE_LEN: usize = 16;
pub const MAC_LEN: usize = 32;
/// How long either side waits for the other's part of the exchange.
const STEP_TIMEOUT: Duration = Duration::from_secs(5);

type HmacSha256 = Hmac<Sha256>;

fn keyed(secret: &[u8], role: u8, hello: &[u8], first: &[u8], second: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length: this cannot fail.
    let mut m = match HmacSha256::new_from_slice(secret) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC accepts any key length"),
    };
    m.update(b"kvasir-bus-auth-v1");
    m.update(&[role]);
    m.update(hello);
    m.update(first);
    m.update(second);
    m
}

fn tag(secret: &[u8], role: u8, hello: &[u8], first: &[u8], second: &[u8]) -> [u8; MAC_LEN] {
    keyed(secret, role, hello, first, second)
        .finalize()
        .into_bytes()
        .into()
}

fn verify(secret: &[u8], role: u8, hello: &[u8], first: &[u8], second: &[u8], got: &[u8]) -> bool {
    keyed(secret, role, hello, first, second)
        .verify_slice(got)
        .is_ok()
}

fn nonce() -> Result<[u8; NONCE_LEN], String> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::fill(&mut n).map_err(|e| format!("no randomness for the bus handshake: {e}"))?;
    Ok(n)
}

async fn read_step<const N: usize>(stream: &mut TcpStream, what: &str) -> Result<[u8; N], String> {
    let mut buf = [0u8; N];
    tokio::time::timeout(STEP_TIMEOUT, stream.read_exact(&mut buf))
        .await
        .map_err(|_| format!("no {what} within {STEP_TIMEOUT:?}"))?
        .map_err(|e| format!("{what}: {e}"))?;
    Ok(buf)
}

/// The connecting side: sends the hello, then proves the secret and checks
/// the acceptor's proof.
pub async fn connect(
    stream: &mut TcpStream,
    hello: &[u8; HELLO_LEN],
    secret: &[u8],
) -> Result<(), String> {
    let nonce_c = nonce()?;
    let mut first = [0u8; HELLO_LEN + NONCE_LEN];
    first[..HELLO_LEN].copy_from_slice(hello);
    first[HELLO_LEN..].copy_from_slice(&nonce_c);
    stream
        .write_all(&first)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let reply: [u8; NONCE_LEN + MAC_LEN] = read_step(stream, "peer proof").await?;
    let (nonce_a, mac_a) = reply.split_at(NONCE_LEN);
    if !verify(secret, b'A', hello, &nonce_c, nonce_a, mac_a) {
        return Err(
            "the peer did not prove the cluster secret (different --cluster-secret?)".into(),
        );
    }
    let mac_c = tag(secret, b'C', hello, nonce_a, &nonce_c);
    stream
        .write_all(&mac_c)
        .await
        .map_err(|e| format!("handshake: {e}"))
}

/// The accepting side, after it read and checked `hello`: reads the
/// connector's nonce, proves the secret, and checks the connector's proof.
pub async fn accept(
    stream: &mut TcpStream,
    hello: &[u8; HELLO_LEN],
    secret: &[u8],
) -> Result<(), String> {
    let nonce_c: [u8; NONCE_LEN] = read_step(stream, "handshake nonce").await?;
    let nonce_a = nonce()?;
    let mut reply = [0u8; NONCE_LEN + MAC_LEN];
    reply[..NONCE_LEN].copy_from_slice(&nonce_a);
    reply[NONCE_LEN..].copy_from_slice(&tag(secret, b'A', hello, &nonce_c, &nonce_a));
    stream
        .write_all(&reply)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let mac_c: [u8; MAC_LEN] = read_step(stream, "peer proof").await?;
    if !verify(secret, b'C', hello, &nonce_a, &nonce_c, &mac_c) {
        return Err("it did not prove the cluster secret (different --cluster-secret?)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn pair() -> (TcpStream, TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, a) = tokio::join!(TcpStream::connect(addr), l.accept());
        (c.unwrap(), a.unwrap().0)
    }

    async fn run(sc: &'static [u8], sa: &'static [u8]) -> (Result<(), String>, Result<(), String>) {
        let (mut c, mut a) = pair().await;
        let hello = [7u8; HELLO_LEN];
        let acceptor = async move {
            let got: [u8; HELLO_LEN] = read_step(&mut a, "hello").await?;
            assert_eq!(got, hello);
            accept(&mut a, &got, sa).await
        };
        let connector = async move {
            let r = connect(&mut c, &hello, sc).await;
            drop(c);
            r
        };
        tokio::join!(connector, acceptor)
    }

    #[tokio::test]
    async fn same_secret_passes_both_ways() {
        let (c, a) = run(b"s3cret", b"s3cret").await;
        assert_eq!((c, a), (Ok(()), Ok(())));
        let (c, a) = run(b"", b"").await;
        assert_eq!((c, a), (Ok(()), Ok(())));
    }

    #[tokio::test]
    async fn a_different_or_missing_secret_is_refused() {
        for (sc, sa) in [(&b"a"[..], &b"b"[..]), (b"", b"secret"), (b"secret", b"")] {
            let (c, a) = run(sc, sa).await;
            // The connector checks the acceptor's proof first and hangs up.
            assert!(c.unwrap_err().contains("did not prove"));
            assert!(a.is_err());
        }
    }

    #[test]
    fn tags_bind_role_and_nonces() {
        let h = [1u8; HELLO_LEN];
        let (x, y) = ([2u8; NONCE_LEN], [3u8; NONCE_LEN]);
        let t = tag(b"k", b'A', &h, &x, &y);
        assert!(verify(b"k", b'A', &h, &x, &y, &t));
        assert!(!verify(b"k", b'C', &h, &x, &y, &t));
        assert!(!verify(b"k", b'A', &h, &y, &x, &t));
        assert!(!verify(b"K", b'A', &h, &x, &y, &t));
        let mut h2 = h;
        h2[0] ^= 1;
        assert!(!verify(b"k", b'A', &h2, &x, &y, &t));
    }
}

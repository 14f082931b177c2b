//! Bad input on raw sockets, answered with the exact bytes Redis 7.0 sends:
//! protocol errors get `-ERR Protocol error: ...` and a closed connection,
//! command errors get an error reply and the connection stays usable, and
//! after every bad client the server still serves others.

mod common;

use common::{reply_len, Kvasir};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(5);

/// Sends `bytes` on a fresh connection, and asserts that the server answers
/// exactly `reply` and then closes the connection; then that the server
/// still serves a new connection.
fn assert_protocol_error(server: &mut Kvasir, bytes: &[u8], reply: &str) {
    let mut r = server.raw_conn();
    r.send(bytes);
    let (got, closed) = r.read_until_close(LIMIT);
    assert_eq!(
        String::from_utf8_lossy(&got),
        reply,
        "reply to {:?}",
        String::from_utf8_lossy(bytes)
    );
    assert!(
        closed,
        "connection left open after {:?}",
        String::from_utf8_lossy(bytes)
    );
    server.assert_alive();
}

#[test]
fn negative_bulk_length_is_a_protocol_error() {
    let mut server = Kvasir::start(&[]);
    assert_protocol_error(
        &mut server,
        b"*1\r\n$-5\r\n",
        "-ERR Protocol error: invalid bulk length\r\n",
    );
}

#[test]
fn non_numeric_bulk_length_is_a_protocol_error() {
    let mut server = Kvasir::start(&[]);
    for bytes in [
        &b"*1\r\n$abc\r\n"[..],
        b"*2\r\n$3\r\nGET\r\n$1x\r\n",
        b"*1\r\n$\r\n",
    ] {
        assert_protocol_error(
            &mut server,
            bytes,
            "-ERR Protocol error: invalid bulk length\r\n",
        );
    }
}

#[test]
fn invalid_multibulk_length_is_a_protocol_error() {
    let mut server = Kvasir::start(&[]);
    for bytes in [&b"*abc\r\n"[..], b"*1x\r\n", b"*2147483648\r\n", b"*\r\n"] {
        assert_protocol_error(
            &mut server,
            bytes,
            "-ERR Protocol error: invalid multibulk length\r\n",
        );
    }
}

#[test]
fn missing_dollar_is_a_protocol_error() {
    let mut server = Kvasir::start(&[]);
    assert_protocol_error(
        &mut server,
        b"*1\r\n+x\r\n",
        "-ERR Protocol error: expected '$', got '+'\r\n",
    );
    assert_protocol_error(
        &mut server,
        b"*2\r\n$3\r\nGET\r\n:1\r\n",
        "-ERR Protocol error: expected '$', got ':'\r\n",
    );
}

#[test]
fn bulk_beyond_proto_max_bulk_len_is_refused() {
    let mut server = Kvasir::start(&["--proto-max-bulk-len", "1048576"]);
    assert_protocol_error(
        &mut server,
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n",
        "-ERR Protocol error: invalid bulk length\r\n",
    );
    assert_protocol_error(
        &mut server,
        b"*1\r\n$1048577\r\n",
        "-ERR Protocol error: invalid bulk length\r\n",
    );
    // A bulk of exactly the limit is accepted.
    let mut c = server.conn();
    let value = vec![b'v'; 1048576];
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg(value.as_slice())
        .query(&mut c)
        .unwrap();
    let n: usize = redis::cmd("STRLEN").arg("k").query(&mut c).unwrap();
    assert_eq!(n, 1048576);
}

#[test]
fn unbalanced_quotes_in_inline_command() {
    let mut server = Kvasir::start(&[]);
    for bytes in [
        &b"SET \"foo bar\r\n"[..],
        b"SET 'foo\r\n",
        b"SET \"foo\"bar v\r\n",
        b"ECHO 'a'b\r\n",
    ] {
        assert_protocol_error(
            &mut server,
            bytes,
            "-ERR Protocol error: unbalanced quotes in request\r\n",
        );
    }
}

#[test]
fn too_big_inline_request_is_refused() {
    let mut server = Kvasir::start(&[]);
    let mut bytes = b"SET k ".to_vec();
    bytes.extend(std::iter::repeat_n(b'a', 70 * 1024));
    assert_protocol_error(
        &mut server,
        &bytes,
        "-ERR Protocol error: too big inline request\r\n",
    );
}

#[test]
fn too_big_multibulk_count_string_is_refused() {
    let mut server = Kvasir::start(&[]);
    let mut bytes = b"*".to_vec();
    bytes.extend(std::iter::repeat_n(b'1', 70 * 1024));
    assert_protocol_error(
        &mut server,
        &bytes,
        "-ERR Protocol error: too big mbulk count string\r\n",
    );
}

#[test]
fn unauthenticated_clients_get_small_request_limits() {
    let mut server = Kvasir::start(&["--requirepass", "pw"]);
    assert_protocol_error(
        &mut server,
        b"*11\r\n",
        "-ERR Protocol error: unauthenticated multibulk length\r\n",
    );
    assert_protocol_error(
        &mut server,
        b"*2\r\n$4\r\nAUTH\r\n$16385\r\n",
        "-ERR Protocol error: unauthenticated bulk length\r\n",
    );
    // Once authenticated, the same shapes are fine.
    let mut r = server.raw_conn();
    assert_eq!(r.cmd_str(&["AUTH", "pw"]), "+OK\r\n");
    let mset = ["MSET", "a", "1", "b", "2", "c", "3", "d", "4", "e", "5"];
    assert_eq!(r.cmd_str(&mset), "+OK\r\n");
    let big = "x".repeat(16385);
    assert_eq!(r.cmd_str(&["SET", "big", &big]), "+OK\r\n");
}

#[test]
fn good_replies_before_a_protocol_error_are_sent() {
    let mut server = Kvasir::start(&[]);
    assert_protocol_error(
        &mut server,
        b"*1\r\n$4\r\nPING\r\nPING\r\n*1\r\n$-5\r\n*1\r\n$4\r\nPING\r\n",
        "+PONG\r\n+PONG\r\n-ERR Protocol error: invalid bulk length\r\n",
    );
}

#[test]
fn empty_requests_are_ignored() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    r.send(b"*0\r\n*-1\r\n\r\n   \r\n\n*1\r\n$4\r\nPING\r\n");
    assert_eq!(r.read_reply(), b"+PONG\r\n");
    assert_eq!(r.read_reply_within(Duration::from_millis(300)), None);
}

#[test]
fn unknown_command_reply_lists_its_arguments() {
    let mut server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    r.send(b"*3\r\n$3\r\nfoo\r\n$1\r\na\r\n$1\r\nb\r\n");
    assert_eq!(
        String::from_utf8_lossy(&r.read_reply()),
        "-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n"
    );
    r.send(b"foo a b\r\n");
    assert_eq!(
        String::from_utf8_lossy(&r.read_reply()),
        "-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n"
    );
    assert_eq!(
        r.cmd_str(&["nosuchcommand"]),
        "-ERR unknown command 'nosuchcommand', with args beginning with: \r\n"
    );
    // The connection stays usable.
    assert_eq!(r.cmd_str(&["PING"]), "+PONG\r\n");
    server.assert_alive();
}

#[test]
fn wrong_arity_reply_names_the_command_in_lower_case() {
    let mut server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    r.send(b"*1\r\n$3\r\nGET\r\n");
    assert_eq!(
        String::from_utf8_lossy(&r.read_reply()),
        "-ERR wrong number of arguments for 'get' command\r\n"
    );
    r.send(b"get\r\n");
    assert_eq!(
        String::from_utf8_lossy(&r.read_reply()),
        "-ERR wrong number of arguments for 'get' command\r\n"
    );
    assert_eq!(
        r.cmd_str(&["SET", "k"]),
        "-ERR wrong number of arguments for 'set' command\r\n"
    );
    assert_eq!(r.cmd_str(&["SET", "k", "v"]), "+OK\r\n");
    server.assert_alive();
}

/// xorshift64*: deterministic garbage, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[test]
fn random_binary_garbage_never_brings_the_server_down() {
    let mut server = Kvasir::start(&[]);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..40 {
        let len = (rng.next() % 4096) as usize + 1;
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        // Some rounds look like RESP at first, to get past the first byte.
        match round % 4 {
            1 => bytes[0] = b'*',
            2 => {
                bytes.splice(0..0, b"*3\r\n$3\r\nSET\r\n".iter().copied());
            }
            _ => {}
        }
        let mut r = server.raw_conn();
        r.send(&bytes);
        let (got, _closed) = r.read_until_close(Duration::from_millis(300));
        // Whatever came back is a sequence of error replies.
        let mut rest = &got[..];
        while !rest.is_empty() {
            let n = reply_len(rest).unwrap_or_else(|| {
                panic!(
                    "round {round}: incomplete reply {:?}",
                    String::from_utf8_lossy(rest)
                )
            });
            assert_eq!(
                rest[0],
                b'-',
                "round {round}: non-error reply {:?}",
                String::from_utf8_lossy(&rest[..n])
            );
            rest = &rest[n..];
        }
        drop(r);
        server.assert_alive();
    }
}

#[test]
fn client_vanishing_mid_command_does_not_hurt_the_server() {
    let mut server = Kvasir::start(&[]);
    for partial in [
        &b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nabc"[..],
        b"*2\r\n$3\r\nGET",
        b"*5\r\n",
        b"GET k",
    ] {
        let mut r = server.raw_conn();
        r.send(partial);
        drop(r);
        server.assert_alive();
    }
    let mut c = server.conn();
    let v: Option<String> = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, None, "a partial command must not run");
}

#[test]
fn unknown_command_reply_quotes_at_most_about_128_bytes_of_arguments() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    // Redis appends `'<arg>' ` while the list is shorter than 128 bytes,
    // cutting the last argument at the 128-byte mark.
    let args: Vec<String> = (1..=10)
        .map(|i| format!("arg{i:02}-xxxxxxxxxxxxxx"))
        .collect();
    let mut cmd = vec!["foo"];
    cmd.extend(args.iter().map(|s| s.as_str()));
    assert_eq!(
        r.cmd_str(&cmd),
        "-ERR unknown command 'foo', with args beginning with: 'arg01-xxxxxxxxxxxxxx' \
         'arg02-xxxxxxxxxxxxxx' 'arg03-xxxxxxxxxxxxxx' 'arg04-xxxxxxxxxxxxxx' \
         'arg05-xxxxxxxxxxxxxx' 'arg06-xxxxxxx' \r\n"
    );
    let long = "y".repeat(300);
    assert_eq!(
        r.cmd_str(&["foo", &long, "next"]),
        format!(
            "-ERR unknown command 'foo', with args beginning with: '{}' \r\n",
            "y".repeat(128)
        )
    );
}

#[test]
fn expected_dollar_error_echoes_the_raw_byte() {
    let mut server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    r.send(b"*1\r\n\xff\r\n");
    let (got, closed) = r.read_until_close(LIMIT);
    assert_eq!(
        got,
        b"-ERR Protocol error: expected '$', got '\xff'\r\n".to_vec()
    );
    assert!(closed);
    server.assert_alive();
}

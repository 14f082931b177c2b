//! Pipelining and large values: many commands in one write come back in
//! order, and a value of tens of megabytes round-trips byte for byte.

mod common;

use common::{encode_cmd, reply_len, Kvasir};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// Reads `n` complete replies from `stream` within `limit`.
fn read_replies(stream: &mut std::net::TcpStream, n: usize, limit: Duration) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + limit;
    let mut buf = Vec::new();
    let mut out = Vec::with_capacity(n);
    let mut chunk = vec![0u8; 1 << 16];
    while out.len() < n {
        while let Some(len) = reply_len(&buf) {
            out.push(buf.drain(..len).collect());
            if out.len() == n {
                return out;
            }
        }
        let now = Instant::now();
        assert!(now < deadline, "only {} of {n} replies arrived", out.len());
        stream
            .set_read_timeout(Some(deadline - now))
            .expect("timeout");
        match stream.read(&mut chunk) {
            Ok(0) => panic!("server closed after {} replies", out.len()),
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
            Err(e) => panic!("read failed after {} replies: {e}", out.len()),
        }
    }
    out
}

#[test]
fn ten_thousand_pipelined_commands_reply_in_order() {
    let mut server = Kvasir::start(&[]);
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let mut request = Vec::new();
    for _ in 0..10_000 {
        request.extend_from_slice(&encode_cmd(&[b"INCR", b"counter"]));
    }
    // One write; a second thread sends it so that reading never waits on
    // the write finishing.
    let mut writer = stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || writer.write_all(&request));
    let replies = read_replies(&mut stream, 10_000, Duration::from_secs(60));
    sender.join().unwrap().unwrap();
    for (i, r) in replies.iter().enumerate() {
        assert_eq!(
            String::from_utf8_lossy(r),
            format!(":{}\r\n", i + 1),
            "reply {i} out of order"
        );
    }
    server.assert_alive();
}

#[test]
fn mixed_pipeline_of_sets_gets_and_inline_commands_keeps_order() {
    let server = Kvasir::start(&[]);
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let mut request = Vec::new();
    let mut expected = Vec::new();
    for i in 0..3_000 {
        let k = format!("key:{i}");
        let v = format!("value-{i}");
        request.extend_from_slice(&encode_cmd(&[b"SET", k.as_bytes(), v.as_bytes()]));
        expected.push("+OK\r\n".to_string());
        request.extend_from_slice(&encode_cmd(&[b"GET", k.as_bytes()]));
        expected.push(format!("${}\r\n{v}\r\n", v.len()));
        // Inline commands mixed into the same stream.
        request.extend_from_slice(format!("STRLEN {k}\r\n").as_bytes());
        expected.push(format!(":{}\r\n", v.len()));
        request.extend_from_slice(format!("ECHO {i}\r\n").as_bytes());
        expected.push(format!("${}\r\n{i}\r\n", i.to_string().len()));
    }
    let mut writer = stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || writer.write_all(&request));
    let replies = read_replies(&mut stream, expected.len(), Duration::from_secs(60));
    sender.join().unwrap().unwrap();
    for (i, (got, want)) in replies.iter().zip(&expected).enumerate() {
        assert_eq!(String::from_utf8_lossy(got), *want, "reply {i}");
    }
}

#[test]
fn redis_rs_pipeline_of_ten_thousand_commands() {
    let server = Kvasir::start(&[]);
    let mut c = server.client_resp3().get_connection().unwrap();
    let mut p = redis::pipe();
    for i in 0..5_000 {
        p.cmd("SET").arg(format!("k{i}")).arg(i);
        p.cmd("GET").arg(format!("k{i}"));
    }
    let out: Vec<redis::Value> = p.query(&mut c).unwrap();
    assert_eq!(out.len(), 10_000);
    for i in 0..5_000 {
        assert_eq!(out[2 * i], redis::Value::Okay);
        assert_eq!(
            out[2 * i + 1],
            redis::Value::BulkString(i.to_string().into_bytes())
        );
    }
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 5_000);
}

fn pattern(len: usize) -> Vec<u8> {
    // Every byte value, in a sequence that does not repeat with a short
    // period, so a shifted or truncated copy cannot compare equal.
    let mut x: u32 = 0x1234_5678;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

#[test]
fn twenty_megabyte_value_round_trips_intact() {
    let mut server = Kvasir::start(&[]);
    let mut c = server.conn();
    let value = pattern(20 * 1024 * 1024);
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(value.as_slice())
        .query(&mut c)
        .unwrap();
    let len: usize = redis::cmd("STRLEN").arg("big").query(&mut c).unwrap();
    assert_eq!(len, value.len());
    let back: Vec<u8> = redis::cmd("GET").arg("big").query(&mut c).unwrap();
    assert_eq!(back.len(), value.len());
    assert!(back == value, "20 MB value came back different");
    let tail: Vec<u8> = redis::cmd("GETRANGE")
        .arg("big")
        .arg(-16)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(tail, value[value.len() - 16..]);
    // Appending to it and reading it on a fresh connection also works.
    let new_len: usize = redis::cmd("APPEND")
        .arg("big")
        .arg("END")
        .query(&mut c)
        .unwrap();
    assert_eq!(new_len, value.len() + 3);
    let mut other = server.conn();
    let back: Vec<u8> = redis::cmd("GET").arg("big").query(&mut other).unwrap();
    assert_eq!(&back[..value.len()], value.as_slice());
    assert_eq!(&back[value.len()..], b"END");
    server.assert_alive();
}

#[test]
fn large_value_sent_in_small_pieces_is_assembled() {
    let server = Kvasir::start(&[]);
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream.set_nodelay(true).unwrap();
    let value = pattern(3 * 1024 * 1024 + 7);
    let request = encode_cmd(&[b"SET", b"k", &value]);
    // Dribble it out in uneven pieces, with pauses now and then.
    let mut sent = 0;
    let mut piece = 1;
    while sent < request.len() {
        let end = (sent + piece).min(request.len());
        stream.write_all(&request[sent..end]).unwrap();
        sent = end;
        piece = (piece * 7 + 13) % 200_000 + 1;
        if sent % 5 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let replies = read_replies(&mut stream, 1, Duration::from_secs(30));
    assert_eq!(replies[0], b"+OK\r\n");
    stream.write_all(&encode_cmd(&[b"GET", b"k"])).unwrap();
    let replies = read_replies(&mut stream, 1, Duration::from_secs(30));
    let header = format!("${}\r\n", value.len());
    assert!(replies[0].starts_with(header.as_bytes()));
    assert_eq!(
        &replies[0][header.len()..replies[0].len() - 2],
        value.as_slice()
    );
}

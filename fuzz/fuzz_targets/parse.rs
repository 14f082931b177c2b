//! Fuzzes the RESP request parser.
//!
//! The input is fed to `parse_command` as one read and again split into two
//! reads (at a point derived from the first byte), with the default limits
//! and with tiny ones. It must never panic, never consume a partial command,
//! and give the same commands and error whichever way the bytes arrive. Every
//! parsed command is encoded back as a multibulk request and must parse to
//! exactly the same arguments.
//!
//! Run from this directory: `cargo +nightly fuzz run parse`.
#![no_main]

use kvasir_resp::{encode, parse_command, Limits, Parsed, Protocol, Reply};
use libfuzzer_sys::fuzz_target;

const TINY: Limits = Limits {
    max_bulk_len: 16,
    max_multibulk_len: 4,
    max_inline_len: 32,
    unauthenticated: false,
};

#[derive(Debug, Default, PartialEq)]
struct Outcome {
    commands: Vec<Vec<Vec<u8>>>,
    error: Option<String>,
}

/// Feeds `chunks` one read at a time, parsing as far as possible after each.
fn run(chunks: &[&[u8]], limits: &Limits) -> Outcome {
    let mut out = Outcome::default();
    let mut buf = Default::default();
    // This crate depends only on kvasir-resp and libfuzzer-sys, and
    // kvasir-resp does not re-export `bytes`: this first call (on an empty
    // buffer, so Incomplete) lets the compiler infer `BytesMut` for `buf`.
    let _ = parse_command(&mut buf, limits);
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            let before = buf.clone();
            match parse_command(&mut buf, limits) {
                Ok(Parsed::Command(args)) => {
                    assert!(buf.len() < before.len(), "a command consumed nothing");
                    assert_eq!(&before[before.len() - buf.len()..], &buf[..]);
                    let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
                    roundtrip(&args);
                    out.commands.push(args);
                }
                Ok(Parsed::Incomplete { min_total }) => {
                    assert_eq!(buf, before, "Incomplete consumed bytes");
                    assert!(min_total == 0 || min_total > buf.len());
                    break;
                }
                Err(e) => {
                    assert_eq!(&before[before.len() - buf.len()..], &buf[..]);
                    out.error = Some(e.0);
                    return out;
                }
            }
        }
    }
    out
}

/// Encodes `args` as a multibulk request and checks it parses back exactly.
fn roundtrip(args: &[Vec<u8>]) {
    let reply = Reply::Array(args.iter().map(|a| Reply::bulk(a.clone())).collect());
    let mut wire = Default::default();
    encode(&reply, Protocol::Resp2, &mut wire);
    // Inline arguments are not bound by max_bulk_len, so re-parse with the
    // default limits only.
    match parse_command(&mut wire, &Limits::default()) {
        Ok(Parsed::Command(again)) => {
            assert!(wire.is_empty(), "re-parse left {} bytes", wire.len());
            assert_eq!(again.len(), args.len());
            for (a, b) in again.iter().zip(args) {
                assert_eq!(&a[..], &b[..]);
            }
        }
        other => panic!("re-encoded {args:?} parsed as {other:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let cut = match data.first() {
        Some(&b) => (b as usize * 7919) % (data.len() + 1),
        None => 0,
    };
    let (a, b) = data.split_at(cut);
    for limits in [Limits::default(), TINY] {
        let whole = run(&[data], &limits);
        let split = run(&[a, b], &limits);
        assert_eq!(whole, split, "split at {cut}");
    }
});

//! Property tests for the request parser (`parse_command`).
//!
//! The parser must never panic, never consume a partial command, give the
//! same result however the bytes are split across reads, and report every
//! malformed input with one of Redis's `Protocol error` texts.

use bytes::BytesMut;
use kvasir_resp::{encode, parse_command, Limits, Parsed, Protocol, Reply};
use proptest::collection::vec;
use proptest::prelude::*;

type Cmd = Vec<Vec<u8>>;

/// Every reason text the parser may produce (the `{}` of
/// `Protocol error: {}`), as Redis 7 words them.
const FIXED_REASONS: &[&str] = &[
    "too big mbulk count string",
    "invalid multibulk length",
    "too big bulk count string",
    "invalid bulk length",
    "expected CRLF after bulk data",
    "too big inline request",
    "unbalanced quotes in request",
];

fn is_redis_reason(reason: &str) -> bool {
    if FIXED_REASONS.contains(&reason) {
        return true;
    }
    // "expected '$', got '%c'": exactly one character between the quotes.
    match reason
        .strip_prefix("expected '$', got '")
        .and_then(|r| r.strip_suffix('\''))
    {
        Some(got) => got.chars().count() == 1,
        None => false,
    }
}

fn small_limits() -> Limits {
    Limits {
        max_bulk_len: 16,
        max_multibulk_len: 4,
        max_inline_len: 32,
        unauthenticated: false,
    }
}

/// What a sequence of reads produced: the commands, then the error (if any)
/// that ended the connection.
#[derive(Debug, PartialEq)]
struct Outcome {
    commands: Vec<Cmd>,
    error: Option<String>,
}

/// Parses `buf` until it reports Incomplete or an error, checking after every
/// call that the buffer only lost whole commands:
///
/// - `Command`: the bytes removed are non-empty and are, on their own, exactly
///   one complete command that parses to the same arguments;
/// - `Incomplete`: nothing was removed and `min_total`, when set, asks for
///   more than the buffer holds;
/// - `Err`: the text is one of Redis's, and at most the offending inline line
///   (up to and including its `\n`) was removed.
///
/// Returns true if parsing stopped on an error.
fn drain(buf: &mut BytesMut, limits: &Limits, out: &mut Outcome) -> bool {
    loop {
        let before = buf.clone();
        match parse_command(buf, limits) {
            Ok(Parsed::Command(args)) => {
                assert!(buf.len() < before.len(), "a command consumed nothing");
                assert_eq!(&before[before.len() - buf.len()..], &buf[..]);
                let consumed = &before[..before.len() - buf.len()];
                let args: Cmd = args.iter().map(|a| a.to_vec()).collect();
                // The consumed prefix alone is one whole command.
                let mut alone = BytesMut::from(consumed);
                match parse_command(&mut alone, limits) {
                    Ok(Parsed::Command(again)) => {
                        let again: Cmd = again.iter().map(|a| a.to_vec()).collect();
                        assert_eq!(again, args, "consumed bytes {consumed:?}");
                        assert!(alone.is_empty(), "consumed more than one command");
                    }
                    other => panic!("consumed bytes {consumed:?} reparse as {other:?}"),
                }
                out.commands.push(args);
            }
            Ok(Parsed::Incomplete { min_total }) => {
                assert_eq!(&buf[..], &before[..], "Incomplete consumed bytes");
                assert!(
                    min_total == 0 || min_total > buf.len(),
                    "min_total {min_total} for a buffer of {}",
                    buf.len()
                );
                return false;
            }
            Err(e) => {
                assert!(is_redis_reason(&e.0), "unexpected error text {:?}", e.0);
                assert_eq!(e.reply_text(), format!("ERR Protocol error: {}", e.0));
                assert_eq!(&before[before.len() - buf.len()..], &buf[..]);
                let consumed = &before[..before.len() - buf.len()];
                if !consumed.is_empty() {
                    assert_ne!(consumed[0], b'*', "a multibulk error consumed input");
                    let nl = consumed.iter().position(|&c| c == b'\n');
                    assert_eq!(nl, Some(consumed.len() - 1), "error consumed {consumed:?}");
                }
                out.error = Some(e.0);
                return true;
            }
        }
    }
}

/// Feeds `data` to a fresh buffer in the given chunks, parsing after each.
fn feed_chunked(data: &[u8], cuts: &[usize], limits: &Limits) -> Outcome {
    let mut points: Vec<usize> = cuts.iter().map(|&c| c % (data.len() + 1)).collect();
    points.push(0);
    points.push(data.len());
    points.sort_unstable();
    points.dedup();
    let mut out = Outcome {
        commands: Vec::new(),
        error: None,
    };
    let mut buf = BytesMut::new();
    for w in points.windows(2) {
        buf.extend_from_slice(&data[w[0]..w[1]]);
        if drain(&mut buf, limits, &mut out) {
            break;
        }
    }
    out
}

fn feed_all(data: &[u8], limits: &Limits) -> Outcome {
    feed_chunked(data, &[], limits)
}

fn encode_cmd(args: &[Vec<u8>], out: &mut BytesMut) {
    let reply = Reply::Array(
        args.iter()
            .map(|a| Reply::bulk(bytes::Bytes::copy_from_slice(a)))
            .collect(),
    );
    encode(&reply, Protocol::Resp2, out);
}

fn encode_cmds(cmds: &[Cmd]) -> Vec<u8> {
    let mut out = BytesMut::new();
    for c in cmds {
        encode_cmd(c, &mut out);
    }
    out.to_vec()
}

/// Bytes that are mostly protocol punctuation and digits, so random inputs
/// reach deep into the parser instead of failing on the first byte.
fn resp_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        3 => any::<u8>(),
        5 => prop::sample::select(b"*$\r\n\r\n0123456789-+ \"'\\x\0\x0bab".to_vec()),
    ]
}

fn resp_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![vec(any::<u8>(), 0..max), vec(resp_byte(), 0..max)]
}

fn binary_cmd() -> impl Strategy<Value = Cmd> {
    vec(vec(any::<u8>(), 0..40), 0..6)
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(i, m)| Mutation::Flip(i, m)),
        (any::<usize>(), resp_byte()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Delete),
    ]
}

fn apply(data: &mut Vec<u8>, m: &Mutation) {
    match *m {
        Mutation::Flip(i, mask) if !data.is_empty() => {
            let i = i % data.len();
            data[i] ^= mask;
        }
        Mutation::Insert(i, b) => {
            let i = i % (data.len() + 1);
            data.insert(i, b);
        }
        Mutation::Delete(i) if !data.is_empty() => {
            let i = i % data.len();
            data.remove(i);
        }
        _ => {}
    }
}

fn token() -> impl Strategy<Value = Vec<u8>> {
    "[A-Za-z0-9_:.{}@#!%&=+-]{1,12}".prop_map(String::into_bytes)
}

fn cfg(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(cfg(512))]

    /// (a) Arbitrary bytes: no panic, only whole commands consumed, and the
    /// outcome does not depend on how the bytes are split across reads.
    #[test]
    fn arbitrary_bytes_never_panic(
        data in resp_bytes(300),
        cuts in vec(any::<usize>(), 0..8),
    ) {
        for limits in [Limits::default(), small_limits()] {
            let whole = feed_all(&data, &limits);
            let chunked = feed_chunked(&data, &cuts, &limits);
            prop_assert_eq!(chunked, whole);
        }
    }

    /// (b) Binary argument vectors survive encode -> parse, one at a time and
    /// pipelined in arbitrary chunk splits.
    #[test]
    fn multibulk_roundtrip(
        cmds in vec(binary_cmd(), 1..6),
        cuts in vec(any::<usize>(), 0..12),
    ) {
        let wire = encode_cmds(&cmds);
        for cmd in &cmds {
            let mut buf = BytesMut::new();
            encode_cmd(cmd, &mut buf);
            let got = parse_command(&mut buf, &Limits::default()).unwrap();
            let expect = Parsed::Command(
                cmd.iter().map(|a| bytes::Bytes::copy_from_slice(a)).collect(),
            );
            prop_assert_eq!(got, expect);
            prop_assert!(buf.is_empty());
        }
        let out = feed_chunked(&wire, &cuts, &Limits::default());
        prop_assert_eq!(out.error, None);
        prop_assert_eq!(out.commands, cmds);
    }

    /// (b') Byte-at-a-time delivery: every proper prefix is Incomplete and
    /// leaves the buffer alone.
    #[test]
    fn multibulk_byte_at_a_time(cmd in binary_cmd()) {
        let mut wire = BytesMut::new();
        encode_cmd(&cmd, &mut wire);
        let mut buf = BytesMut::new();
        for (i, &b) in wire.iter().enumerate() {
            buf.extend_from_slice(&[b]);
            let r = parse_command(&mut buf, &Limits::default()).unwrap();
            if i + 1 < wire.len() {
                prop_assert!(matches!(r, Parsed::Incomplete { .. }), "prefix {}", i + 1);
                prop_assert_eq!(buf.len(), i + 1);
            } else {
                let args: Cmd = match r {
                    Parsed::Command(a) => a.iter().map(|x| x.to_vec()).collect(),
                    other => panic!("full frame gave {other:?}"),
                };
                prop_assert_eq!(&args, &cmd);
                prop_assert!(buf.is_empty());
            }
        }
    }

    /// (c) Mutated valid frames parse, wait for more, or fail with a Redis
    /// error text, under both default and tiny limits, however split.
    #[test]
    fn mutated_frames_never_panic(
        cmds in vec(binary_cmd(), 1..4),
        muts in vec(mutation(), 1..5),
        cuts in vec(any::<usize>(), 0..6),
    ) {
        let mut data = encode_cmds(&cmds);
        for m in &muts {
            apply(&mut data, m);
        }
        for limits in [Limits::default(), small_limits()] {
            let whole = feed_all(&data, &limits);
            let chunked = feed_chunked(&data, &cuts, &limits);
            prop_assert_eq!(chunked, whole);
        }
    }

    /// (c') A bulk argument over max_bulk_len is rejected, one at the limit is
    /// accepted.
    #[test]
    fn small_limits_bulk_len(len in 0usize..48, cuts in vec(any::<usize>(), 0..4)) {
        let cmd = vec![b"SET".to_vec(), vec![b'v'; len]];
        let out = feed_chunked(&encode_cmds(std::slice::from_ref(&cmd)), &cuts, &small_limits());
        if len <= 16 {
            prop_assert_eq!(out.error, None);
            prop_assert_eq!(out.commands, vec![cmd]);
        } else {
            prop_assert!(out.commands.is_empty());
            prop_assert_eq!(out.error.as_deref(), Some("invalid bulk length"));
        }
    }

    /// (c'') More than max_multibulk_len arguments is rejected.
    #[test]
    fn small_limits_multibulk_len(n in 0usize..10, cuts in vec(any::<usize>(), 0..4)) {
        let cmd: Cmd = (0..n).map(|i| vec![b'a' + i as u8]).collect();
        let out = feed_chunked(&encode_cmds(std::slice::from_ref(&cmd)), &cuts, &small_limits());
        if n <= 4 {
            prop_assert_eq!(out.error, None);
            prop_assert_eq!(out.commands, vec![cmd]);
        } else {
            prop_assert!(out.commands.is_empty());
            prop_assert_eq!(out.error.as_deref(), Some("invalid multibulk length"));
        }
    }

    /// (c''') An inline line longer than max_inline_len is rejected whether or
    /// not its newline has arrived; one that fits is accepted.
    #[test]
    fn small_limits_inline_len(
        len in 1usize..80,
        crlf in any::<bool>(),
        cuts in vec(any::<usize>(), 0..4),
    ) {
        let mut line = vec![b'x'; len];
        line.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
        // The limit covers the line up to (not including) its '\n'.
        let body = len + crlf as usize;
        let out = feed_chunked(&line, &cuts, &small_limits());
        if body <= 32 {
            prop_assert_eq!(out.error, None);
            prop_assert_eq!(out.commands, vec![vec![vec![b'x'; len]]]);
        } else {
            prop_assert!(out.commands.is_empty());
            prop_assert_eq!(out.error.as_deref(), Some("too big inline request"));
        }
        // Without any newline: an error as soon as the buffer exceeds the limit.
        let out = feed_chunked(&line[..len], &cuts, &small_limits());
        prop_assert!(out.commands.is_empty());
        if len > 32 {
            prop_assert_eq!(out.error.as_deref(), Some("too big inline request"));
        } else {
            prop_assert_eq!(out.error, None);
        }
    }

    /// (c'''') A `*N` / `$N` header longer than max_inline_len is "too big
    /// ... count string"; one that fits but is not a number (over 20 digits)
    /// is "invalid ... length". Which one must not depend on the read
    /// boundaries, e.g. a read ending between the header's '\r' and '\n'.
    #[test]
    fn small_limits_long_headers(
        digits in 20usize..48,
        bulk in any::<bool>(),
        terminated in any::<bool>(),
    ) {
        let mut data = if bulk { b"*1\r\n$".to_vec() } else { b"*".to_vec() };
        data.extend(std::iter::repeat_n(b'1', digits));
        if terminated {
            data.extend_from_slice(b"\r\n");
        }
        // The limit covers the type byte and the digits.
        let expect = match (1 + digits > 32, terminated, bulk) {
            (true, _, true) => Some("too big bulk count string"),
            (true, _, false) => Some("too big mbulk count string"),
            (false, true, true) => Some("invalid bulk length"),
            (false, true, false) => Some("invalid multibulk length"),
            (false, false, _) => None,
        };
        // Every single read boundary, including the one between '\r' and '\n'.
        for cut in 0..=data.len() {
            let out = feed_chunked(&data, &[cut], &small_limits());
            prop_assert!(out.commands.is_empty());
            prop_assert_eq!(out.error.as_deref(), expect, "read split at {}", cut);
        }
    }

    /// (d) Inline commands of simple tokens separated by blanks parse to
    /// exactly those tokens.
    #[test]
    fn inline_tokens(
        tokens in vec(token(), 0..8),
        seps in vec(prop::sample::select(vec![" ", "  ", "\t", " \t "]), 8),
        lead in prop::sample::select(vec!["", " ", "\t"]),
        trail in prop::sample::select(vec!["", " ", "\t "]),
        crlf in any::<bool>(),
        cuts in vec(any::<usize>(), 0..4),
    ) {
        let mut line = lead.as_bytes().to_vec();
        for (i, t) in tokens.iter().enumerate() {
            if i > 0 {
                line.extend_from_slice(seps[i % seps.len()].as_bytes());
            }
            line.extend_from_slice(t);
        }
        line.extend_from_slice(trail.as_bytes());
        line.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
        // Followed by a multibulk PING to check the line ends where it should.
        line.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        let out = feed_chunked(&line, &cuts, &Limits::default());
        prop_assert_eq!(out.error, None);
        prop_assert_eq!(out.commands, vec![tokens, vec![b"PING".to_vec()]]);
    }
}

/// Inline lines containing NUL bytes or other C whitespace must terminate
/// (this once looped forever) and split the way Redis's sdssplitargs does.
#[test]
fn inline_nul_and_c_whitespace() {
    /// An input line and the arguments it splits into (None: unbalanced).
    type Case = (&'static [u8], Option<&'static [&'static [u8]]>);
    let cases: &[Case] = &[
        (b"\0\r\n", Some(&[])),
        (b"GET\0k\r\n", Some(&[b"GET"])),
        (b"GET \0 k\r\n", Some(&[b"GET"])),
        (b"\"a\0\"\r\n", None),
        (b"\x0bGET\x0bk\x0c\r\n", Some(&[b"GET\x0bk\x0c"])),
        (b"\"a\"\x0b\r\n", Some(&[b"a"])),
    ];
    for (input, expect) in cases {
        let out = feed_all(input, &Limits::default());
        match expect {
            Some(args) => {
                assert_eq!(out.error, None, "input {input:?}");
                let args: Cmd = args.iter().map(|a| a.to_vec()).collect();
                assert_eq!(out.commands, vec![args], "input {input:?}");
            }
            None => assert_eq!(
                out.error.as_deref(),
                Some("unbalanced quotes in request"),
                "input {input:?}"
            ),
        }
    }
}

/// A `*N` / `$N` header whose '\r' has arrived but whose '\n' has not must not
/// be judged longer than the same header once complete.
#[test]
fn header_limit_ignores_pending_cr() {
    let limits = small_limits();
    // 31 header bytes after '*': exactly at the limit, but not a number.
    let mut data = b"*".to_vec();
    data.extend(std::iter::repeat_n(b'1', 31));
    data.extend_from_slice(b"\r\n");
    let whole = feed_all(&data, &limits);
    assert_eq!(whole.error.as_deref(), Some("invalid multibulk length"));
    let split = feed_chunked(&data, &[data.len() - 1], &limits);
    assert_eq!(split, whole);

    let mut data = b"*1\r\n$".to_vec();
    data.extend(std::iter::repeat_n(b'1', 31));
    data.extend_from_slice(b"\r\n");
    let whole = feed_all(&data, &limits);
    assert_eq!(whole.error.as_deref(), Some("invalid bulk length"));
    let split = feed_chunked(&data, &[data.len() - 1], &limits);
    assert_eq!(split, whole);
}

/// `*N` / `$N` headers are read with Redis's string2ll rules: no `+`, no
/// leading zeros, no "-0", no blanks, must fit in an i64.
#[test]
fn header_numbers_like_string2ll() {
    let limits = Limits::default();
    for bad in ["-0", "00", "01", "-01", "+1", " 1", "1 ", "-", "", "1a"] {
        let data = format!("*{bad}\r\n");
        let out = feed_all(data.as_bytes(), &limits);
        assert_eq!(
            out.error.as_deref(),
            Some("invalid multibulk length"),
            "{data:?}"
        );
        let data = format!("*1\r\n${bad}\r\n");
        let out = feed_all(data.as_bytes(), &limits);
        assert_eq!(
            out.error.as_deref(),
            Some("invalid bulk length"),
            "{data:?}"
        );
    }
    // Zero and negative counts are an empty command, skipped silently.
    for ok in ["0", "-1", "-9223372036854775808"] {
        let out = feed_all(format!("*{ok}\r\n").as_bytes(), &limits);
        assert_eq!(out.error, None);
        assert_eq!(out.commands, vec![Vec::<Vec<u8>>::new()]);
    }
    let out = feed_all(b"*1\r\n$0\r\n\r\n", &limits);
    assert_eq!(out.commands, vec![vec![Vec::new()]]);
}

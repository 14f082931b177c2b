//! Glob-style matching over bytes with the semantics of Redis's
//! `stringmatchlen` (util.c): `*`, `?`, `[abc]`, `[^a]`, `[a-z]`, `\x`
//! escapes and an optional case-insensitive mode. KEYS, SCAN MATCH and
//! (later) PSUBSCRIBE, CONFIG GET and ACL key patterns all use it, so its
//! quirks are kept on purpose:
//!
//! - `*` never matches an empty subject (`"*"` vs `""` is false): callers
//!   that want "everything" test [`is_match_all`] first, as Redis does.
//! - An unterminated class (`[ab`) matches like a terminated one.
//! - A reversed range (`[z-a]`) is swapped.
//! - An escaped byte inside a class is compared case-sensitively even in
//!   nocase mode.
//!
//! Bytes compare as unsigned (Redis compares C `char`, whose sign depends on
//! the platform; unsigned is what it does on ARM and the only sane choice
//! for binary keys).
//!
//! Hostile patterns cannot hang the caller: like Redis 7, a failed tail
//! after a `*` stops every enclosing `*` from retrying longer matches
//! (`skip_longer`), which keeps the work polynomial, and recursion deeper
//! than [`MAX_NESTING`] stars answers "no match" instead of growing the stack.

/// Redis 7's bound on nested `*` recursion.
pub const MAX_NESTING: usize = 1000;

/// Whether `subject` matches `pattern`.
pub fn matches(pattern: &[u8], subject: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    match_from(pattern, subject, nocase, &mut skip_longer, 0)
}

/// The pattern Redis answers without running the matcher (KEYS and SCAN):
/// it selects every key, the empty key included.
pub fn is_match_all(pattern: &[u8]) -> bool {
    pattern == b"*"
}

fn fold(c: u8, nocase: bool) -> u8 {
    if nocase {
        c.to_ascii_lowercase()
    } else {
        c
    }
}

/// The matcher proper, a transcription of `stringmatchlen_impl` with
/// indexes in place of C's pointer walking (`p` into the pattern, `s` into
/// the subject).
fn match_from(
    pattern: &[u8],
    subject: &[u8],
    nocase: bool,
    skip_longer: &mut bool,
    nesting: usize,
) -> bool {
    if nesting > MAX_NESTING {
        return false;
    }
    let mut p = 0;
    let mut s = 0;
    while p < pattern.len() && s < subject.len() {
        match pattern[p] {
            b'*' => return match_star(&pattern[p..], &subject[s..], nocase, skip_longer, nesting),
            b'?' => {}
            b'[' => {
                let (matched, end) = match_class(pattern, p + 1, subject[s], nocase);
                if !matched {
                    return false;
                }
                p = end;
            }
            c => {
                // A backslash quotes the next byte; a trailing one is literal.
                let literal = if c == b'\\' && p + 1 < pattern.len() {
                    p += 1;
                    pattern[p]
                } else {
                    c
                };
                if fold(literal, nocase) != fold(subject[s], nocase) {
                    return false;
                }
            }
        }
        p += 1;
        s += 1;
        if s == subject.len() {
            // Trailing stars match the empty rest of the subject.
            while pattern.get(p) == Some(&b'*') {
                p += 1;
            }
            break;
        }
    }
    p == pattern.len() && s == subject.len()
}

/// `pattern` starts with `*` and `subject` is not empty: try the rest of
/// the pattern at every suffix of the subject.
fn match_star(
    pattern: &[u8],
    subject: &[u8],
    nocase: bool,
    skip_longer: &mut bool,
    nesting: usize,
) -> bool {
    let stars = pattern.iter().take_while(|&&c| c == b'*').count();
    let rest = &pattern[stars..];
    if rest.is_empty() {
        return true;
    }
    for start in 0..subject.len() {
        if match_from(rest, &subject[start..], nocase, skip_longer, nesting + 1) {
            return true;
        }
        if *skip_longer {
            return false;
        }
    }
    // The rest matched at no suffix, so no enclosing `*` can help by eating
    // more of the subject either: tell them all to give up.
    *skip_longer = true;
    false
}

/// Matches byte `c` against the class whose body starts at `p` (just after
/// the `[`). Returns whether it matched and the index of the class's last
/// byte (its `]`, or the pattern's last byte when unterminated), which the
/// caller steps over.
fn match_class(pattern: &[u8], mut p: usize, c: u8, nocase: bool) -> (bool, usize) {
    let negate = pattern.get(p) == Some(&b'^');
    if negate {
        p += 1;
    }
    let mut matched = false;
    loop {
        let Some(&pc) = pattern.get(p) else {
            // Unterminated: stop on the last byte, as Redis does.
            p -= 1;
            break;
        };
        if pc == b'\\' && p + 1 < pattern.len() {
            p += 1;
            matched |= pattern[p] == c;
        } else if pc == b']' {
            break;
        } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' {
            let (a, b) = (fold(pc, nocase), fold(pattern[p + 2], nocase));
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            matched |= (lo..=hi).contains(&fold(c, nocase));
            p += 2;
        } else {
            matched |= fold(pc, nocase) == fold(c, nocase);
        }
        p += 1;
    }
    (matched != negate, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        matches(p.as_bytes(), s.as_bytes(), false)
    }

    #[test]
    fn literals_and_wildcards() {
        assert!(m("hello", "hello"));
        assert!(!m("hello", "hell"));
        assert!(!m("hell", "hello"));
        assert!(m("h?llo", "hallo"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("h*llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("*", "x"));
        assert!(m("**", "abc"));
        assert!(m("a*", "a"));
        assert!(m("a**", "a"));
        assert!(m("*b*", "abc"));
        assert!(!m("*b*", "acd"));
        assert!(m("user:*:name", "user:42:name"));
        assert!(!m("user:*:name", "user:42:age"));
        assert!(m("", ""));
        assert!(!m("", "a"));
    }

    #[test]
    fn star_never_matches_an_empty_subject() {
        // Redis's quirk; KEYS/SCAN special-case the bare "*" pattern.
        assert!(!m("*", ""));
        assert!(!m("?", ""));
        assert!(is_match_all(b"*"));
        assert!(!is_match_all(b"**"));
    }

    #[test]
    fn classes() {
        assert!(m("h[ae]llo", "hello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(!m("h[a-b]llo", "hcllo"));
        assert!(m("[z-a]", "q"), "reversed ranges are swapped");
        // Redis reads "a-]" as the range a..] (and the class as unterminated).
        assert!(!m("[a-]", "-"));
        assert!(m("[a-]", "_"), "0x5d..=0x61");
        // "[]" is an empty class that matches nothing; "[^]" matches anything.
        assert!(!m("[]]", "]"));
        assert!(m("[^]]", "x]"));
        assert!(m("x[ab", "xa"), "unterminated class");
        assert!(!m("x[ab", "xc"));
        assert!(!m("[", "a"));
        assert!(
            m("[^", "a"),
            "empty negated unterminated class matches anything"
        );
        assert!(m("[\\]]", "]"));
        assert!(m("[\\-]", "-"));
    }

    #[test]
    fn escapes() {
        assert!(m("h\\*llo", "h*llo"));
        assert!(!m("h\\*llo", "hello"));
        assert!(m("\\?", "?"));
        assert!(!m("\\?", "a"));
        assert!(m("a\\", "a\\"), "a trailing backslash is literal");
        assert!(m("\\\\", "\\"));
    }

    #[test]
    fn nocase() {
        assert!(matches(b"HeLLo", b"hello", true));
        assert!(!matches(b"HeLLo", b"hello", false));
        assert!(matches(b"[A-C]x", b"bX", true));
        assert!(matches(b"[abc]", b"B", true));
        assert!(
            !matches(b"[\\A]", b"a", true),
            "escaped class bytes are exact"
        );
    }

    #[test]
    fn binary_subjects() {
        assert!(matches(b"a?c", b"a\x00c", false));
        assert!(matches(b"[\x80-\xff]", b"\xe9", false));
        assert!(matches(b"*\xff", b"\x01\x02\xff", false));
    }

    #[test]
    fn hostile_patterns_finish_quickly() {
        let subject = vec![b'a'; 10_000];
        let mut pattern = b"a*".repeat(50);
        pattern.push(b'b');
        let started = std::time::Instant::now();
        assert!(!matches(&pattern, &subject, false));
        let mut many_stars = b"*a".repeat(5_000);
        many_stars.push(b'b');
        assert!(!matches(&many_stars, &subject, false));
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn nesting_is_bounded() {
        // More separated stars than MAX_NESTING: no match, and no stack
        // overflow, even though the pattern would otherwise match.
        let pattern = b"*a".repeat(MAX_NESTING + 10);
        let subject = b"a".repeat(MAX_NESTING + 10);
        assert!(!matches(&pattern, &subject, false));
        let pattern = b"*a".repeat(100);
        assert!(matches(&pattern, &subject, false));
    }

    #[test]
    fn agrees_with_a_naive_matcher_on_small_inputs() {
        // A plain exponential reference without the pruning, over every
        // pattern of up to 4 bytes from a small alphabet.
        fn naive(p: &[u8], s: &[u8]) -> bool {
            match (p.first(), s.first()) {
                (None, _) => s.is_empty(),
                (Some(b'*'), _) => {
                    // Redis: a star needs a non-empty subject to start.
                    if s.is_empty() {
                        return false;
                    }
                    let rest = &p[p.iter().take_while(|&&c| c == b'*').count()..];
                    rest.is_empty() || (0..s.len()).any(|i| naive_tail(rest, &s[i..]))
                }
                (Some(_), None) => false,
                (Some(b'?'), Some(_)) => naive_tail(&p[1..], &s[1..]),
                (Some(&c), Some(&d)) => c == d && naive_tail(&p[1..], &s[1..]),
            }
        }
        // After a byte was consumed and the subject ran out, trailing stars
        // are dropped (the `stringLen == 0` branch of the C loop).
        fn naive_tail(p: &[u8], s: &[u8]) -> bool {
            if s.is_empty() {
                return p.iter().all(|&c| c == b'*');
            }
            naive(p, s)
        }
        let alphabet = b"ab*?";
        let subjects: Vec<Vec<u8>> = (0..=4).flat_map(|n| words(b"ab", n)).collect();
        for n in 0..=4 {
            for p in words(alphabet, n) {
                for s in &subjects {
                    assert_eq!(
                        matches(&p, s, false),
                        naive(&p, s),
                        "pattern {:?} subject {:?}",
                        String::from_utf8_lossy(&p),
                        String::from_utf8_lossy(s)
                    );
                }
            }
        }
    }

    fn words(alphabet: &[u8], n: usize) -> Vec<Vec<u8>> {
        let mut out = vec![Vec::new()];
        for _ in 0..n {
            out = out
                .into_iter()
                .flat_map(|w| {
                    alphabet.iter().map(move |&c| {
                        let mut w = w.clone();
                        w.push(c);
                        w
                    })
                })
                .collect();
        }
        out
    }
}

//! `oom-score-adj` and `oom-score-adj-values`, as redis-server sets them:
//! with `oom-score-adj yes|relative` the process's Linux OOM score
//! adjustment (/proc/self/oom_score_adj) is the score it had before plus
//! the value of its class (the first value: a server; the third: a forked
//! child saving a snapshot), with `absolute` the value itself, clamped to
//! -1000..1000; back to `no` restores the score it had. Kvasir has no
//! replicas, so the second value (Redis's replica class) is kept, unused.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

const PATH: &std::ffi::CStr = c"/proc/self/oom_score_adj";

fn path() -> &'static std::path::Path {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(PATH.to_bytes()).as_ref()
}
/// No score for a forked child to set.
const NO_CHANGE: i32 = i32::MIN;
/// The score the process had before Kvasir set it, while Kvasir sets it.
static BASE: Mutex<Option<i32>> = Mutex::new(None);
/// The score a forked child gives itself.
static CHILD_SCORE: AtomicI32 = AtomicI32::new(NO_CHANGE);

/// The refusal of a value outside Redis's range.
pub const OUT_OF_RANGE: &str =
    "Invalid oom-score-adj-values, elements must be between -2000 and 2000.";
/// CONFIG SET's error when the score cannot be written.
pub const FAILED: &str = "Failed to set current oom_score_adj. Check server logs.";

/// The score could not be read or written (logged).
#[derive(Debug)]
pub struct Failed;

/// `oom-score-adj-values`: three integers from -2000 to 2000.
pub fn parse_values(text: &str) -> Result<[i32; 3], &'static str> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let [a, b, c] = words.as_slice() else {
        return Err("wrong number of arguments");
    };
    let mut values = [0; 3];
    for (slot, word) in values.iter_mut().zip([a, b, c]) {
        *slot = word
            .parse::<i32>()
            .ok()
            .filter(|v| (-2000..=2000).contains(v))
            .ok_or(OUT_OF_RANGE)?;
    }
    Ok(values)
}

/// Sets the process's score for `mode` (`no`, `yes`, `relative` or
/// `absolute`) and `values`, or restores the score it had when `mode`
/// turns it off. A failure is logged and leaves the score as it was.
pub fn apply(mode: &str, values: [i32; 3]) -> Result<(), Failed> {
    let mut base = BASE.lock().unwrap_or_else(|e| e.into_inner());
    let relative = match mode {
        "no" => {
            CHILD_SCORE.store(NO_CHANGE, Ordering::Relaxed);
            return match base.take() {
                Some(before) => write(before),
                None => Ok(()),
            };
        }
        "absolute" => false,
        _ => true,
    };
    let before = match *base {
        Some(before) => before,
        None => read()?,
    };
    let score = |v: i32| (if relative { v + before } else { v }).clamp(-1000, 1000);
    write(score(values[0]))?;
    *base = Some(before);
    CHILD_SCORE.store(score(values[2]), Ordering::Relaxed);
    Ok(())
}

fn read() -> Result<i32, Failed> {
    std::fs::read_to_string(path())
        .map_err(|e| e.to_string())
        .and_then(|t| t.trim().parse().map_err(|_| format!("not a number: {t}")))
        .map_err(|e| {
            tracing::warn!("Unable to read oom_score_adj: {e}");
            Failed
        })
}

fn write(score: i32) -> Result<(), Failed> {
    std::fs::write(path(), format!("{score}\n")).map_err(|e| {
        tracing::warn!("Unable to write oom_score_adj: {e}");
        Failed
    })
}

/// In a forked child: its class's score, with plain system calls (no
/// allocation after fork).
pub fn set_in_child() {
    let score = CHILD_SCORE.load(Ordering::Relaxed);
    if score == NO_CHANGE {
        return;
    }
    let mut buf = [0u8; 20];
    let text = kvasir_resp::encode::fmt_i64(score.into(), &mut buf);
    // SAFETY: open/write/close on a NUL-terminated path and a stack buffer.
    unsafe {
        let fd = libc::open(PATH.as_ptr(), libc::O_WRONLY);
        if fd >= 0 {
            libc::write(fd, text.as_ptr().cast(), text.len());
            libc::close(fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_three_integers_within_redis_range() {
        assert_eq!(parse_values("0 200 800"), Ok([0, 200, 800]));
        assert_eq!(parse_values(" -2000  0 2000 "), Ok([-2000, 0, 2000]));
        assert_eq!(parse_values("-2001 0 0"), Err(OUT_OF_RANGE));
        assert_eq!(parse_values("1 2 x"), Err(OUT_OF_RANGE));
        assert_eq!(parse_values("1 2"), Err("wrong number of arguments"));
    }
}

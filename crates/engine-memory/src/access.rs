//! When each key was last used, for eviction and OBJECT IDLETIME/FREQ:
//! Redis's two encodings of one 24-bit field, here 32 bits per entry.
//!
//! - LRU: the Unix second of the last access.
//! - LFU: the minute (mod 2^16) of the last decrement in the high bits and
//!   a logarithmic access counter in the low 8 bits (Redis's `LFULogIncr`
//!   and `LFUDecrAndReturn`: the counter grows with probability
//!   1 / ((counter - 5) * log_factor + 1) and loses one per
//!   `decay_minutes` without access).
//!
//! This is node-local metadata: it is not part of the replicated state
//! (digests, snapshots and entry equality ignore it), so a follower's
//! stamps may differ from its leader's.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// A new key's LFU counter (Redis's LFU_INIT_VAL), so it is not evicted
/// before it had a chance to be used.
pub const LFU_INIT: u8 = 5;

/// [`AccessClock`]'s mode bits.
const LFU: u8 = 1;
const FROZEN: u8 = 2;

/// How stamps are written: the maxmemory policy decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessMode {
    Lru,
    Lfu { log_factor: u32, decay_minutes: u32 },
}

/// The clock and mode of one keyspace's stamps: set before each command
/// (the command's time), read by every touch. Atomics (relaxed) only so
/// that a keyspace can move between threads; one thread uses it at a time.
#[derive(Debug)]
pub struct AccessClock {
    now_ms: AtomicU64,
    /// `now_ms` in Unix seconds and in minutes mod 2^16, kept beside it
    /// so that a touch divides nothing.
    seconds: AtomicU32,
    minutes: AtomicU32,
    /// Bit 0: LFU (else LRU); bit 1: frozen (a CLIENT NO-TOUCH client's
    /// command runs: touches change nothing). One byte so that the common
    /// LRU touch tests one value.
    lfu: AtomicU8,
    log_factor: AtomicU32,
    decay_minutes: AtomicU32,
    /// xorshift state for the LFU counter's coin flips.
    rng: AtomicU64,
}

impl Default for AccessClock {
    fn default() -> Self {
        AccessClock {
            now_ms: AtomicU64::new(0),
            seconds: AtomicU32::new(0),
            minutes: AtomicU32::new(0),
            lfu: AtomicU8::new(0),
            log_factor: AtomicU32::new(10),
            decay_minutes: AtomicU32::new(1),
            rng: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
        }
    }
}

impl AccessClock {
    pub fn set_now(&self, now_ms: u64) {
        if self.now_ms.load(Ordering::Relaxed) == now_ms {
            return;
        }
        self.now_ms.store(now_ms, Ordering::Relaxed);
        self.seconds
            .store((now_ms / 1000) as u32, Ordering::Relaxed);
        self.minutes
            .store(((now_ms / 60_000) & 0xffff) as u32, Ordering::Relaxed);
    }

    pub fn set_mode(&self, mode: AccessMode) {
        let frozen = self.lfu.load(Ordering::Relaxed) & FROZEN;
        match mode {
            AccessMode::Lru => self.lfu.store(frozen, Ordering::Relaxed),
            AccessMode::Lfu {
                log_factor,
                decay_minutes,
            } => {
                self.log_factor.store(log_factor, Ordering::Relaxed);
                self.decay_minutes.store(decay_minutes, Ordering::Relaxed);
                self.lfu.store(LFU | frozen, Ordering::Relaxed);
            }
        }
    }

    /// While frozen, a used key keeps its stamp (CLIENT NO-TOUCH); new
    /// keys still get the initial one.
    pub fn set_frozen(&self, frozen: bool) {
        let mode = self.lfu.load(Ordering::Relaxed) & LFU;
        self.lfu
            .store(if frozen { mode | FROZEN } else { mode }, Ordering::Relaxed);
    }

    pub fn mode(&self) -> AccessMode {
        if self.lfu.load(Ordering::Relaxed) & LFU == 0 {
            AccessMode::Lru
        } else {
            AccessMode::Lfu {
                log_factor: self.log_factor.load(Ordering::Relaxed),
                decay_minutes: self.decay_minutes.load(Ordering::Relaxed),
            }
        }
    }

    fn seconds(&self) -> u32 {
        self.seconds.load(Ordering::Relaxed)
    }

    fn minutes(&self) -> u32 {
        self.minutes.load(Ordering::Relaxed)
    }

    /// The stamp of a key created now.
    pub fn initial(&self) -> u32 {
        match self.mode() {
            AccessMode::Lru => self.seconds(),
            AccessMode::Lfu { .. } => (self.minutes() << 8) | LFU_INIT as u32,
        }
    }

    /// The stamp of a key with stamp `old` used now.
    #[inline]
    pub fn touched(&self, old: u32) -> u32 {
        let flags = self.lfu.load(Ordering::Relaxed);
        if flags == 0 {
            return self.seconds();
        }
        if flags & FROZEN != 0 {
            return old;
        }
        let log_factor = self.log_factor.load(Ordering::Relaxed);
        let counter = self.log_increment(self.frequency(old), log_factor);
        (self.minutes() << 8) | counter as u32
    }

    /// The stamp of a key last used `idle` seconds ago (RESTORE IDLETIME):
    /// LRU only, as Redis applies it.
    pub fn idle_stamp(&self, idle: u64) -> u32 {
        self.seconds()
            .saturating_sub(idle.min(u32::MAX as u64) as u32)
    }

    /// The stamp of a key whose counter is `counter` now (RESTORE FREQ).
    pub fn frequency_stamp(&self, counter: u8) -> u32 {
        (self.minutes() << 8) | counter as u32
    }

    /// Seconds since the access recorded in an LRU stamp.
    pub fn idle_seconds(&self, stamp: u32) -> u64 {
        self.seconds().saturating_sub(stamp) as u64
    }

    /// The access counter of an LFU stamp after its decay up to now.
    pub fn frequency(&self, stamp: u32) -> u8 {
        let counter = (stamp & 0xff) as u8;
        let decay = self.decay_minutes.load(Ordering::Relaxed);
        if decay == 0 {
            return counter;
        }
        // A key stamped under LRU (Unix seconds) and read after a switch to
        // LFU holds no minutes: as in Redis, only the 16 bits above the
        // counter are taken as its last decrement time.
        let last = (stamp >> 8) & 0xffff;
        let now = self.minutes();
        let elapsed = if now >= last {
            now - last
        } else {
            0xffff - last + now
        };
        let periods = elapsed / decay;
        counter.saturating_sub(periods.min(255) as u8)
    }

    fn log_increment(&self, counter: u8, log_factor: u32) -> u8 {
        if counter == u8::MAX {
            return counter;
        }
        let base = counter.saturating_sub(LFU_INIT) as f64;
        let p = 1.0 / (base * log_factor as f64 + 1.0);
        if self.coin() < p {
            counter + 1
        } else {
            counter
        }
    }

    /// A uniform draw in [0, 1).
    fn coin(&self) -> f64 {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_stamps_are_seconds_and_idle_counts_from_them() {
        let c = AccessClock::default();
        c.set_now(10_500);
        let s = c.initial();
        assert_eq!(s, 10);
        c.set_now(25_000);
        assert_eq!(c.idle_seconds(s), 15);
        assert_eq!(c.touched(s), 25);
        assert_eq!(c.idle_seconds(c.touched(s)), 0);
    }

    #[test]
    fn an_lru_stamp_read_after_a_switch_to_lfu_gives_a_counter() {
        // CONFIG SET maxmemory-policy volatile-lfu, then OBJECT FREQ of a
        // key last used under LRU (go-redis's own suite does this).
        let c = AccessClock::default();
        c.set_now(1_800_000_000_000);
        let lru = c.initial();
        c.set_mode(AccessMode::Lfu {
            log_factor: 10,
            decay_minutes: 1,
        });
        let f = c.frequency(lru);
        assert!(f <= (lru & 0xff) as u8, "{f}");
        let touched = c.touched(lru);
        assert_eq!(touched >> 8, c.minutes());
    }

    #[test]
    fn lfu_counters_grow_logarithmically_and_decay_per_period() {
        let c = AccessClock::default();
        c.set_mode(AccessMode::Lfu {
            log_factor: 10,
            decay_minutes: 1,
        });
        c.set_now(0);
        let mut s = c.initial();
        assert_eq!(c.frequency(s), LFU_INIT);
        for _ in 0..1000 {
            s = c.touched(s);
        }
        let f = c.frequency(s);
        // Redis's table (redis.conf) for log factor 10: 18 after 1,000
        // hits.
        assert!((14..=24).contains(&f), "{f}");
        c.set_now(3 * 60_000);
        assert_eq!(c.frequency(s), f - 3);
        c.set_now(600 * 60_000);
        assert_eq!(c.frequency(s), 0);
    }

    #[test]
    fn a_frozen_clock_leaves_stamps_and_keeps_its_mode() {
        let c = AccessClock::default();
        c.set_now(10_000);
        let s = c.initial();
        c.set_now(20_000);
        c.set_frozen(true);
        assert_eq!(c.touched(s), s);
        assert_eq!(c.mode(), AccessMode::Lru);
        let lfu = AccessMode::Lfu {
            log_factor: 0,
            decay_minutes: 1,
        };
        c.set_mode(lfu);
        let f = c.frequency_stamp(7);
        assert_eq!(c.touched(f), f);
        c.set_frozen(false);
        assert_eq!(c.mode(), lfu);
        // Log factor 0: every hit counts.
        assert_eq!(c.frequency(c.touched(f)), 8);
        c.set_mode(AccessMode::Lru);
        assert_eq!(c.touched(s), 20);
    }
}

//! Key, value and request-distribution generators.
//!
//! The YCSB generators are ports of YCSB's own (`site.ycsb.generator`):
//! `ZipfianGenerator` (Gray et al., "Quickly Generating Billion-Record
//! Synthetic Databases", with YCSB's constant 0.99 and its incremental zeta
//! update), `ScrambledZipfianGenerator` (a zipfian over 10^10 items with the
//! precomputed zeta, scattered by FNV-64), `SkewedLatestGenerator`,
//! `UniformLongGenerator`, `CounterGenerator` and
//! `AcknowledgedCounterGenerator`; `fnvhash64`, Java's `String.hashCode` and
//! `CoreWorkload.buildKeyName` / `buildDeterministicValue` behave exactly as
//! in Java so that keys, index scores and values match Java YCSB's.
//!
//! Randomness comes from a caller-owned seeded RNG, so a run is reproducible.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The RNG every generator draws from: xoshiro256++, seeded explicitly.
pub type Rng = Xoshiro256PlusPlus;

/// A seeded RNG; `stream` separates the RNGs of concurrent connections.
pub fn rng(seed: u64, stream: u64) -> Rng {
    Rng::seed_from_u64(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// YCSB's default zipfian constant.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// `ScrambledZipfianGenerator.ITEM_COUNT`.
pub const SCRAMBLED_ITEM_COUNT: i64 = 10_000_000_000;
/// `ScrambledZipfianGenerator.ZETAN`: zeta(10^10, 0.99), precomputed by YCSB.
pub const SCRAMBLED_ZETAN: f64 = 26.46902820178302;

const FNV_OFFSET_BASIS_64: i64 = 0xCBF2_9CE4_8422_2325_u64 as i64;
const FNV_PRIME_64: i64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64` (FNV-1a over the 8 low-to-high bytes, then
/// `Math.abs`), with Java's wrapping `long` arithmetic.
pub fn fnvhash64(val: i64) -> i64 {
    let mut val = val;
    let mut hash = FNV_OFFSET_BASIS_64;
    for _ in 0..8 {
        let octet = val & 0xff;
        val >>= 8;
        hash ^= octet;
        hash = hash.wrapping_mul(FNV_PRIME_64);
    }
    // Java's Math.abs(Long.MIN_VALUE) is Long.MIN_VALUE.
    hash.wrapping_abs()
}

/// Java's `String.hashCode` for a string of single-byte (ASCII) characters.
pub fn java_string_hash(s: &[u8]) -> i32 {
    s.iter()
        .fold(0i32, |h, &c| h.wrapping_mul(31).wrapping_add(c as i32))
}

/// `zetastatic(st, n, theta, initialsum)`: initialsum + sum_{i=st}^{n-1} 1/(i+1)^theta.
pub fn zeta_static(st: u64, n: u64, theta: f64, initial_sum: f64) -> f64 {
    let mut sum = initial_sum;
    for i in st..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// YCSB's `ZipfianGenerator`: item `base` is the most popular.
#[derive(Clone, Debug)]
pub struct Zipfian {
    items: u64,
    base: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    count_for_zeta: u64,
}

impl Zipfian {
    /// Items `min..=max` with the given constant; zeta computed here.
    pub fn new(min: u64, max: u64, constant: f64) -> Zipfian {
        let zetan = zeta_static(0, max - min + 1, constant, 0.0);
        Zipfian::with_zetan(min, max, constant, zetan)
    }

    /// Items `min..=max` with a precomputed zeta(n).
    pub fn with_zetan(min: u64, max: u64, constant: f64, zetan: f64) -> Zipfian {
        let items = max - min + 1;
        let theta = constant;
        let zeta2theta = zeta_static(0, 2, theta, 0.0);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan);
        Zipfian {
            items,
            base: min,
            theta,
            zeta2theta,
            alpha,
            zetan,
            eta,
            count_for_zeta: items,
        }
    }

    /// `ZipfianGenerator(items)`: items `0..items`.
    pub fn with_items(items: u64) -> Zipfian {
        Zipfian::new(0, items.max(1) - 1, ZIPFIAN_CONSTANT)
    }

    /// Number of items this generator was built for.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// zeta(n) currently in use.
    pub fn zetan(&self) -> f64 {
        self.zetan
    }

    /// `nextLong(itemcount)`: a value in `base..base+itemcount`, drawing
    /// one uniform double. Growing `itemcount` updates zeta incrementally;
    /// YCSB (allowitemcountdecrease = false) ignores a shrinking one.
    pub fn next_long(&mut self, itemcount: u64, rng: &mut Rng) -> u64 {
        if itemcount > self.count_for_zeta {
            self.zetan = zeta_static(self.count_for_zeta, itemcount, self.theta, self.zetan);
            self.count_for_zeta = itemcount;
            // YCSB recomputes eta with `items`, not `itemcount`: kept as is.
            self.eta = (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta))
                / (1.0 - self.zeta2theta / self.zetan);
        }
        let u: f64 = rng.random();
        self.value_for(itemcount, u)
    }

    /// The value for a given uniform draw `u` in [0, 1).
    pub fn value_for(&self, itemcount: u64, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        self.base + (itemcount as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }

    /// `nextValue()`: over all items.
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        self.next_long(self.items, rng)
    }
}

/// YCSB's `ScrambledZipfianGenerator`: zipfian popularity, scattered over
/// `min..=max` by FNV so that popular items are not clustered.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    min: u64,
    item_count: u64,
    gen: Zipfian,
}

impl ScrambledZipfian {
    /// With YCSB's constant (0.99) the precomputed ZETAN is used, as in YCSB.
    pub fn new(min: u64, max: u64) -> ScrambledZipfian {
        ScrambledZipfian {
            min,
            item_count: max - min + 1,
            gen: Zipfian::with_zetan(
                0,
                SCRAMBLED_ITEM_COUNT as u64,
                ZIPFIAN_CONSTANT,
                SCRAMBLED_ZETAN,
            ),
        }
    }

    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        let ret = self.gen.next(rng) as i64;
        Self::scatter(self.min, self.item_count, ret)
    }

    /// `min + fnvhash64(ret) % itemcount`, Java semantics.
    pub fn scatter(min: u64, item_count: u64, ret: i64) -> u64 {
        let r = fnvhash64(ret) % item_count as i64;
        (min as i64 + r) as u64
    }
}

/// YCSB's `SkewedLatestGenerator`: zipfian over the distance from the
/// latest acknowledged insert, so recent records are the popular ones.
#[derive(Clone, Debug)]
pub struct SkewedLatest {
    zipf: Zipfian,
}

impl SkewedLatest {
    /// `latest` is the basis's `lastValue()` when the generator is built.
    pub fn new(latest: u64) -> SkewedLatest {
        SkewedLatest {
            zipf: Zipfian::with_items(latest),
        }
    }

    /// `max - zipfian.nextLong(max)` with `max` the current latest value.
    pub fn next(&mut self, latest: u64, rng: &mut Rng) -> u64 {
        latest.saturating_sub(self.zipf.next_long(latest, rng))
    }
}

/// YCSB's `UniformLongGenerator(lb, ub)`: inclusive bounds.
pub fn uniform(lb: u64, ub: u64, rng: &mut Rng) -> u64 {
    lb + rng.random_range(0..=ub - lb)
}

/// YCSB's `AcknowledgedCounterGenerator`: hands out insert key numbers in
/// order; `last_value()` is the highest number below which every insert
/// has been acknowledged, so readers never pick a record not yet written.
#[derive(Debug)]
pub struct AckCounter {
    next: AtomicU64,
    limit: AtomicU64,
    pending: Mutex<std::collections::BTreeSet<u64>>,
}

impl AckCounter {
    /// Starts handing out `start`; `last_value()` is `start - 1`.
    pub fn new(start: u64) -> AckCounter {
        AckCounter {
            next: AtomicU64::new(start),
            limit: AtomicU64::new(start.wrapping_sub(1)),
            pending: Mutex::new(Default::default()),
        }
    }

    /// The next key number to insert.
    pub fn next_value(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Highest contiguously acknowledged value.
    pub fn last_value(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// Marks `value` as inserted and advances the limit over every
    /// contiguous acknowledged value.
    pub fn acknowledge(&self, value: u64) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.insert(value);
        let mut limit = self.limit.load(Ordering::Acquire);
        while pending.remove(&limit.wrapping_add(1)) {
            limit = limit.wrapping_add(1);
        }
        self.limit.store(limit, Ordering::Release);
    }
}

/// `CoreWorkload.buildKeyName`: "user" + (FNV-hashed unless ordered) key
/// number, zero-padded to `zero_padding` digits.
pub fn ycsb_key(keynum: u64, zero_padding: usize, ordered: bool, out: &mut Vec<u8>) {
    out.clear();
    let n = if ordered {
        keynum as i64
    } else {
        fnvhash64(keynum as i64)
    };
    let mut digits = [0u8; 20];
    let s = crate::resp::fmt_i64(n, &mut digits);
    out.extend_from_slice(b"user");
    for _ in s.len()..zero_padding {
        out.push(b'0');
    }
    out.extend_from_slice(s);
}

/// `CoreWorkload.buildDeterministicValue(key, field)`: "key:field", then
/// ":" + the Java hashCode of everything so far, repeated, cut to `size`.
pub fn ycsb_value(key: &[u8], field: &[u8], size: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(key);
    out.push(b':');
    out.extend_from_slice(field);
    // A running String.hashCode: appending only, so it stays exact.
    let mut h = java_string_hash(out);
    let mut digits = [0u8; 20];
    while out.len() < size {
        let s = crate::resp::fmt_i64(h as i64, &mut digits);
        h = h.wrapping_mul(31).wrapping_add(b':' as i32);
        out.push(b':');
        for &c in s {
            h = h.wrapping_mul(31).wrapping_add(c as i32);
        }
        out.extend_from_slice(s);
    }
    out.truncate(size);
}

/// A deterministic value for key number `id` of the kv workloads: lower-case
/// letters from a SplitMix64 stream seeded by the id, so any reader can
/// check any value without shared state, whichever writer wrote it last.
pub fn kv_value_byte_stream(id: u64) -> impl Iterator<Item = u8> {
    let mut state = id ^ 0x6B76_6173_6972_0001;
    let mut word = 0u64;
    (0usize..).map(move |j| {
        if j % 8 == 0 {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            word = z ^ (z >> 31);
        }
        let b = (word >> ((j % 8) * 8)) as u8;
        b'a' + b % 26
    })
}

/// Fills `out` with the value of key number `id`.
pub fn kv_value(id: u64, out: &mut [u8]) {
    for (d, b) in out.iter_mut().zip(kv_value_byte_stream(id)) {
        *d = b;
    }
}

/// Whether `got` is the value of key number `id` with length `len`.
pub fn kv_value_matches(id: u64, len: usize, got: &[u8]) -> bool {
    got.len() == len
        && got
            .iter()
            .zip(kv_value_byte_stream(id))
            .all(|(a, b)| *a == b)
}

/// Writes the key of number `id` for the kv workloads: `prefix` then the
/// zero-padded decimal id, `len` bytes in all ("key:000000012345" for 16,
/// the shape redis-benchmark uses).
pub fn kv_key(prefix: &[u8], id: u64, out: &mut [u8]) {
    let n = out.len();
    let p = prefix.len().min(n);
    out[..p].copy_from_slice(&prefix[..p]);
    let mut v = id;
    for d in out[p..].iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// Digits needed for ids below `count`.
pub fn digits_for(count: u64) -> usize {
    let mut d = 1;
    let mut v = count.saturating_sub(1);
    while v >= 10 {
        v /= 10;
        d += 1;
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_ycsb() {
        // YCSB's first key is the well-known "user6284781860667377211".
        assert_eq!(fnvhash64(0), 6284781860667377211);
        assert_eq!(fnvhash64(1), 8517097267634966620);
        assert_eq!(fnvhash64(42), 55488592825689361);
        assert_eq!(fnvhash64(1000), 5952875239596136740);
        let mut k = Vec::new();
        ycsb_key(0, 1, false, &mut k);
        assert_eq!(k, b"user6284781860667377211");
        ycsb_key(7, 5, true, &mut k);
        assert_eq!(k, b"user00007");
    }

    #[test]
    fn java_hash_and_deterministic_values() {
        assert_eq!(java_string_hash(b"foo"), 101574);
        assert_eq!(java_string_hash(b"user6284781860667377211"), -594971599);
        let mut v = Vec::new();
        ycsb_value(b"user6284781860667377211", b"field0", 100, &mut v);
        assert_eq!(
            std::str::from_utf8(&v).unwrap(),
            "user6284781860667377211:field0:1106546143:680040890:-1813823343:-1693248218:-1278633925:-150907434:-"
        );
        ycsb_value(b"user1", b"field9", 100, &mut v);
        assert_eq!(
            std::str::from_utf8(&v).unwrap(),
            "user1:field9:1621652147:817210252:-56671666:-943653688:1955351231:-474394108:-110271579:-1402071229:"
        );
        ycsb_value(b"user1", b"field9", 5, &mut v);
        assert_eq!(v, b"user1");
    }

    #[test]
    fn zeta_reference_values() {
        // Reference sums computed independently (Python, double precision).
        assert!((zeta_static(0, 2, 0.99, 0.0) - 1.5034777750283594).abs() < 1e-12);
        assert!((zeta_static(0, 1000, 0.99, 0.0) - 7.728953217284729).abs() < 1e-9);
        // The incremental form agrees with the direct one.
        let a = zeta_static(0, 600, 0.99, 0.0);
        assert!((zeta_static(600, 1000, 0.99, a) - 7.728953217284729).abs() < 1e-9);
    }

    /// Shape of YCSB's zipfian over 1000 items: item 0 has probability
    /// 1/zeta(1000) = 12.94%, item 1 0.5^0.99/zeta = 6.50%, and past those
    /// the CDF is Gray's closed form P(X < k) = ((k/n)^(1-theta) - 1 + eta) / eta.
    #[test]
    fn zipfian_shape_matches_ycsb() {
        let n = 1000u64;
        let mut z = Zipfian::new(0, n - 1, ZIPFIAN_CONSTANT);
        let mut rng = rng(7, 0);
        let draws = 400_000;
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            let v = z.next(&mut rng);
            assert!(v < n);
            counts[v as usize] += 1;
        }
        let p = |c: u64| c as f64 / draws as f64;
        let zetan = 7.728953217284729;
        assert!(
            (p(counts[0]) - 1.0 / zetan).abs() < 0.003,
            "{}",
            p(counts[0])
        );
        assert!((p(counts[1]) - 0.5f64.powf(0.99) / zetan).abs() < 0.003);
        let theta = 0.99;
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - 1.5034777750283594 / zetan);
        for k in [10u64, 100, 500] {
            let expect = (((k as f64) / n as f64).powf(1.0 - theta) - 1.0 + eta) / eta;
            let got: u64 = counts[..k as usize].iter().sum();
            assert!(
                (p(got) - expect).abs() < 0.005,
                "P(X<{k}) = {} expected {expect}",
                p(got)
            );
        }
        // Popularity decreases with rank.
        assert!(counts[0] > counts[1] && counts[1] > counts[5] && counts[5] > counts[500]);
    }

    /// The scrambled zipfian's most popular record is fnvhash64(0) mod n,
    /// with probability 1/ZETAN (3.78%); the next is fnvhash64(1) mod n.
    #[test]
    fn scrambled_zipfian_hot_items() {
        let n = 10_000u64;
        let mut z = ScrambledZipfian::new(0, n - 1);
        let mut rng = rng(11, 0);
        let draws = 300_000;
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            let v = z.next(&mut rng);
            assert!(v < n);
            counts[v as usize] += 1;
        }
        let hot0 = (6284781860667377211u64 % n) as usize;
        let hot1 = (8517097267634966620u64 % n) as usize;
        let p0 = counts[hot0] as f64 / draws as f64;
        let p1 = counts[hot1] as f64 / draws as f64;
        assert!((p0 - 1.0 / SCRAMBLED_ZETAN).abs() < 0.003, "{p0}");
        assert!(
            (p1 - 0.5f64.powf(0.99) / SCRAMBLED_ZETAN).abs() < 0.003,
            "{p1}"
        );
        let max = counts.iter().copied().max().unwrap();
        assert_eq!(counts[hot0], max);
    }

    /// Skewed-latest: the latest record is the most popular, with
    /// probability 1/zeta(latest), and popularity falls with age.
    #[test]
    fn skewed_latest_prefers_recent_records() {
        let latest = 999u64;
        let mut g = SkewedLatest::new(latest);
        let mut rng = rng(3, 0);
        let draws = 200_000;
        let mut at_latest = 0u64;
        let mut recent = 0u64;
        for _ in 0..draws {
            let v = g.next(latest, &mut rng);
            assert!(v <= latest && v >= 1);
            if v == latest {
                at_latest += 1;
            }
            if v > latest - 100 {
                recent += 1;
            }
        }
        let zeta999 = zeta_static(0, 999, 0.99, 0.0);
        let p = at_latest as f64 / draws as f64;
        assert!((p - 1.0 / zeta999).abs() < 0.004, "{p}");
        assert!(recent as f64 / draws as f64 > 0.6);
        // A grown basis updates zeta incrementally and reaches the new latest.
        let v = (0..1000).map(|_| g.next(1500, &mut rng)).max().unwrap();
        assert_eq!(v, 1500);
        assert!((g.zipf.zetan() - zeta_static(0, 1500, 0.99, 0.0)).abs() < 1e-9);
    }

    #[test]
    fn acknowledged_counter_advances_over_contiguous_acks() {
        let c = AckCounter::new(100);
        assert_eq!(c.last_value(), 99);
        let a = c.next_value();
        let b = c.next_value();
        assert_eq!((a, b), (100, 101));
        c.acknowledge(101);
        assert_eq!(c.last_value(), 99);
        c.acknowledge(100);
        assert_eq!(c.last_value(), 101);
    }

    #[test]
    fn kv_keys_and_values() {
        let mut k = [0u8; 16];
        kv_key(b"key:", 12345, &mut k);
        assert_eq!(&k, b"key:000000012345");
        let mut v = [0u8; 40];
        kv_value(77, &mut v);
        assert!(kv_value_matches(77, 40, &v));
        assert!(!kv_value_matches(78, 40, &v));
        assert!(!kv_value_matches(77, 40, &v[..39]));
        assert!(v.iter().all(|b| b.is_ascii_lowercase()));
        assert_eq!(digits_for(16384), 5);
        assert_eq!(digits_for(10), 1);
        assert_eq!(digits_for(11), 2);
    }
}

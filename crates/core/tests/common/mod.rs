//! Shared pieces of the determinism tests: a fixed-seed generator for
//! command sequences and argument conversion.

#![allow(dead_code)]

use bytes::Bytes;
use kvasir_core::{CmdError, Ctx, Store};
use kvasir_resp::Reply;

/// A small fixed-seed generator (xorshift64*), the same on every run.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in 0..n (0 when n is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One of `items`, uniformly.
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// String arguments as the `Bytes` the store takes.
pub fn to_args(a: &[String]) -> Vec<Bytes> {
    a.iter()
        .map(|s| Bytes::copy_from_slice(s.as_bytes()))
        .collect()
}

/// Applies `a` to db 0 of both stores, asserts the replies match and
/// returns the first.
pub fn run_both(
    stores: &mut [Store; 2],
    a: &[String],
    ctx: &Ctx,
    step: usize,
) -> Result<Reply, CmdError> {
    let args = to_args(a);
    let [s0, s1] = stores;
    let r0 = s0.apply(0, &args, ctx);
    let r1 = s1.apply(0, &args, ctx);
    assert_eq!(r0, r1, "step {step} {a:?} at {ctx:?}");
    r0
}

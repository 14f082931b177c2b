//! Linearizability checker for end-to-end tests (Wing & Gong's algorithm with
//! Lowe's list representation and memoization, as in Knossos/Porcupine).
//!
//! The model is one register per key (`Option<String>`) with SET, GET and INCR.
//! Keys are independent registers, so a history is split by key
//! (P-compositionality) and each key is checked on its own.
//!
//! Indeterminate operations follow Jepsen's "info" semantics:
//! * a write whose outcome is unknown (timeout, connection error: `ret: None`,
//!   or the `SetUnknown` / `IncrUnknown` kinds) may take effect at any point
//!   after its call, or never;
//! * a read whose outcome is unknown tells nothing and is dropped.
//!
//! Include it from a test with
//! `#[path = "common/linearizability.rs"] mod linearizability;`.
//! It depends on nothing but `std`.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

// ---------------------------------------------------------------------------
// History model
// ---------------------------------------------------------------------------

/// What an operation did and what it observed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// `SET key value` that was acknowledged.
    Set(String),
    /// `GET key` and the value it returned (`None` = key missing).
    Get(Option<String>),
    /// `INCR key` and the new value it returned.
    Incr(i64),
    /// `INCR key` whose outcome is unknown: may apply at any time after its
    /// call, or never.
    IncrUnknown,
    /// `SET key value` whose outcome is unknown: may apply at any time after
    /// its call, or never.
    SetUnknown(String),
}

/// One operation of a history. `call` and `ret` are monotonic timestamps
/// (nanoseconds or any other tick), comparable across clients.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Op {
    pub client: usize,
    pub key: String,
    pub kind: OpKind,
    pub call: u64,
    /// `None` = indeterminate (timed out / connection error): a write may or
    /// may not have taken effect; a read is ignored.
    pub ret: Option<u64>,
}

impl Op {
    /// A write whose effect is unknown (it may apply any time after `call`,
    /// or never).
    pub fn is_indeterminate_write(&self) -> bool {
        match self.kind {
            OpKind::SetUnknown(_) | OpKind::IncrUnknown => true,
            OpKind::Set(_) | OpKind::Incr(_) => self.ret.is_none(),
            OpKind::Get(_) => false,
        }
    }

    /// A read without a result: carries no information.
    pub fn is_ignored(&self) -> bool {
        matches!(self.kind, OpKind::Get(_)) && self.ret.is_none()
    }
}

fn show_value(v: &Option<String>) -> String {
    match v {
        None => "(nil)".to_string(),
        Some(s) => format!("{s:?}"),
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match (&self.kind, self.ret) {
            (OpKind::Set(v), Some(_)) => format!("SET {:?} {:?} -> OK", self.key, v),
            (OpKind::Set(v), None) | (OpKind::SetUnknown(v), _) => {
                format!("SET {:?} {:?} -> ? (indeterminate)", self.key, v)
            }
            (OpKind::Get(v), Some(_)) => format!("GET {:?} -> {}", self.key, show_value(v)),
            (OpKind::Get(_), None) => format!("GET {:?} -> ? (ignored)", self.key),
            (OpKind::Incr(n), Some(_)) => format!("INCR {:?} -> {n}", self.key),
            (OpKind::Incr(_), None) | (OpKind::IncrUnknown, _) => {
                format!("INCR {:?} -> ? (indeterminate)", self.key)
            }
        };
        let ret = match self.ret {
            Some(r) => r.to_string(),
            None => "?".to_string(),
        };
        write!(
            f,
            "client {} {what} [call {}, ret {ret}]",
            self.client, self.call
        )
    }
}

/// An operation that has been invoked but not yet recorded.
#[derive(Clone, Debug)]
pub struct Invocation {
    pub client: usize,
    pub key: String,
    pub call: u64,
}

/// Thread-safe history recorder; clone it into every client task.
///
/// ```ignore
/// let inv = history.invoke(client, "k");          // just before sending
/// match conn.incr("k", 1).await {
///     Ok(n) => history.complete(inv, OpKind::Incr(n)),
///     Err(_) => history.fail(inv, OpKind::IncrUnknown),
/// }
/// ```
#[derive(Clone)]
pub struct History {
    ops: Arc<Mutex<Vec<Op>>>,
    epoch: Instant,
}

impl Default for History {
    fn default() -> Self {
        Self::new()
    }
}

impl History {
    pub fn new() -> Self {
        History {
            ops: Arc::new(Mutex::new(Vec::new())),
            epoch: Instant::now(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Op>> {
        self.ops.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Nanoseconds since this history was created (shared by all clones).
    pub fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Takes the call timestamp; call it right before sending the request.
    pub fn invoke(&self, client: usize, key: impl Into<String>) -> Invocation {
        Invocation {
            client,
            key: key.into(),
            call: self.now(),
        }
    }

    /// Records a successful operation, returning now.
    pub fn complete(&self, inv: Invocation, kind: OpKind) {
        let ret = self.now();
        self.push(Op {
            client: inv.client,
            key: inv.key,
            kind,
            call: inv.call,
            ret: Some(ret.max(inv.call)),
        });
    }

    /// Records an operation whose outcome is unknown (error, timeout). Writes
    /// become indeterminate (`Set(v)` -> `SetUnknown(v)`, `Incr(_)` ->
    /// `IncrUnknown`); reads are dropped.
    pub fn fail(&self, inv: Invocation, kind: OpKind) {
        let kind = match kind {
            OpKind::Get(_) => return,
            OpKind::Set(v) | OpKind::SetUnknown(v) => OpKind::SetUnknown(v),
            OpKind::Incr(_) | OpKind::IncrUnknown => OpKind::IncrUnknown,
        };
        self.push(Op {
            client: inv.client,
            key: inv.key,
            kind,
            call: inv.call,
            ret: None,
        });
    }

    /// Records a complete operation.
    pub fn push(&self, op: Op) {
        self.lock().push(op);
    }

    pub fn ops(&self) -> Vec<Op> {
        self.lock().clone()
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    pub fn check(&self) -> Result<(), Violation> {
        check(&self.ops())
    }
}

// ---------------------------------------------------------------------------
// Result
// ---------------------------------------------------------------------------

/// Why a history was rejected.
#[derive(Clone, PartialEq, Eq)]
pub enum Violation {
    /// The ops of `key` have no linearization.
    NotLinearizable {
        key: String,
        /// Readable report: the smallest unlinearizable prefix, the deepest
        /// partial linearization and the ops that could not be placed.
        description: String,
        /// The acknowledged ops of the smallest unlinearizable prefix that no
        /// explored order could place (the first is the one whose return
        /// ends that prefix).
        unplaced: Vec<Op>,
    },
    /// The search gave up: the answer is unknown (never a silent pass).
    BudgetExceeded {
        key: String,
        steps: u64,
        description: String,
    },
}

impl Violation {
    pub fn key(&self) -> &str {
        match self {
            Violation::NotLinearizable { key, .. } | Violation::BudgetExceeded { key, .. } => key,
        }
    }

    pub fn description(&self) -> &str {
        match self {
            Violation::NotLinearizable { description, .. }
            | Violation::BudgetExceeded { description, .. } => description,
        }
    }

    pub fn is_budget_exceeded(&self) -> bool {
        matches!(self, Violation::BudgetExceeded { .. })
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

// Debug prints the readable report so that `check(..).unwrap()` is useful.
impl fmt::Debug for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\n")?;
        f.write_str(self.description())
    }
}

impl std::error::Error for Violation {}

/// Search steps allowed per key by [`check`].
pub const DEFAULT_BUDGET: u64 = 5_000_000;

/// Checks that `history` is linearizable for a per-key SET/GET/INCR register.
pub fn check(history: &[Op]) -> Result<(), Violation> {
    check_with_budget(history, DEFAULT_BUDGET)
}

/// As [`check`], with a search budget (steps per key).
pub fn check_with_budget(history: &[Op], budget: u64) -> Result<(), Violation> {
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in history {
        if !op.is_ignored() {
            by_key.entry(op.key.as_str()).or_default().push(op);
        }
    }
    for (key, ops) in by_key {
        KeyChecker::new(key, &ops).run(budget)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Register model
// ---------------------------------------------------------------------------

/// Register value; canonical decimal integers are `Int` (what INCR accepts,
/// like Redis' strict parser), other strings are interned.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Val {
    Missing,
    Int(i64),
    Str(u32),
}

#[derive(Default)]
struct Interner {
    ids: HashMap<String, u32>,
    names: Vec<String>,
}

impl Interner {
    fn val(&mut self, s: &str) -> Val {
        if let Ok(n) = s.parse::<i64>() {
            if n.to_string() == s {
                return Val::Int(n);
            }
        }
        if let Some(&id) = self.ids.get(s) {
            return Val::Str(id);
        }
        let id = self.names.len() as u32;
        self.names.push(s.to_string());
        self.ids.insert(s.to_string(), id);
        Val::Str(id)
    }

    fn show(&self, v: Val) -> String {
        match v {
            Val::Missing => "(nil)".to_string(),
            Val::Int(n) => format!("\"{n}\""),
            Val::Str(id) => format!("{:?}", self.names[id as usize]),
        }
    }

    fn encode(v: Val) -> (u64, u64) {
        match v {
            Val::Missing => (0, 0),
            Val::Int(n) => (1, n as u64),
            Val::Str(id) => (2, id as u64),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum MOp {
    Set(Val),
    Get(Val),
    /// INCR that returned this new value.
    Incr(i64),
    /// INCR with unknown result.
    IncrAny,
}

fn as_int(v: Val) -> Option<i64> {
    match v {
        Val::Missing => Some(0),
        Val::Int(n) => Some(n),
        Val::Str(_) => None,
    }
}

fn step(state: Val, op: MOp) -> Option<Val> {
    match op {
        MOp::Set(v) => Some(v),
        MOp::Get(v) => (v == state).then_some(state),
        MOp::Incr(n) => {
            let next = as_int(state)?.checked_add(1)?;
            (next == n).then_some(Val::Int(n))
        }
        MOp::IncrAny => Some(Val::Int(as_int(state)?.checked_add(1)?)),
    }
}

fn explain(state: Val, op: MOp, names: &Interner) -> String {
    let held = names.show(state);
    match op {
        MOp::Get(v) => format!("observed {} but the register holds {held}", names.show(v)),
        MOp::Incr(n) => match as_int(state) {
            Some(cur) => format!(
                "returned {n} but the register holds {cur}, so INCR gives {}",
                cur.wrapping_add(1)
            ),
            None => format!("register holds non-integer {held}"),
        },
        MOp::IncrAny => format!("register holds non-integer {held}"),
        MOp::Set(_) => "?".to_string(),
    }
}

// ---------------------------------------------------------------------------
// WGL search for one key
// ---------------------------------------------------------------------------
//
// Acknowledged ops are searched with Lowe's list-based WGL algorithm.
// Indeterminate writes (optional, may apply any time after their call) are not
// in the list: in any linearization they can be moved later, as a block, to
// just before the next acknowledged op, and a block only matters if that op
// observes the register (GET / INCR) and would fail without it. Moreover a
// block can be reduced to "at most one SET, then INCRs". So the search only
// applies indeterminate writes as such a block, right before an observing op
// that needs exactly the value the block produces. Identical indeterminate
// writes are interchangeable: the earliest-called unapplied one is used.

const NIL: usize = usize::MAX;

fn is_subset(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x & !y == 0)
}

/// FxHash-style hasher for the memo keys (SipHash is slow in debug builds).
#[derive(Default)]
struct FastHasher(u64);

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.write_u64(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        for &b in chunks.remainder() {
            self.write_u64(b as u64);
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

struct Entry {
    /// Index into `det`.
    op: usize,
    is_call: bool,
    /// Rank of this event among all events of the key (unknown calls too).
    rank: usize,
    /// For a call: its return entry.
    ret: usize,
}

struct Unknown<'a> {
    op: &'a Op,
    mop: MOp,
    call_rank: usize,
    class: usize,
}

/// Indeterminate writes applied right before an acknowledged op: at most one
/// SET (by class), then `incs` INCRs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Block {
    set: Option<usize>,
    incs: usize,
}

const DIRECT: Block = Block { set: None, incs: 0 };

struct Frame {
    entry: usize,
    prev: Val,
    option: usize,
    block: Block,
}

/// Deepest point where the search got stuck.
struct Stuck {
    rank: usize,
    ret_entry: usize,
    state: Val,
    /// Linearized ops: (is_unknown, index).
    linearized: Vec<(bool, usize)>,
    /// Acknowledged ops that could not be placed next.
    candidates: Vec<usize>,
    /// Indeterminate writes that were available but not applied.
    unknowns: Vec<usize>,
}

struct KeyChecker<'a> {
    key: &'a str,
    names: Interner,
    det: Vec<(&'a Op, MOp)>,
    /// Indeterminate writes, in call order.
    unk: Vec<Unknown<'a>>,
    /// Per class of identical indeterminate writes: its members in call
    /// order, how many (a prefix) are applied, and its SET value (None for
    /// the INCR class).
    members: Vec<Vec<usize>>,
    applied: Vec<usize>,
    class_val: Vec<Option<Val>>,
    incr_class: Option<usize>,
    entries: Vec<Entry>,
    next: Vec<usize>,
    prev: Vec<usize>,
    head: usize,
    /// Linearized acknowledged ops (bitset) followed by two words encoding
    /// the register state: the memoization key.
    bits: Vec<u64>,
    words: usize,
    /// Applied indeterminate writes (bitset).
    unk_bits: Vec<u64>,
    /// (linearized set, state) -> sets of applied indeterminate writes seen
    /// (concatenated bitsets). A node is pruned if a seen set is a subset of
    /// the current one: fewer applied optional writes leave at least as many
    /// continuations.
    cache: HashMap<Vec<u64>, Vec<u64>, BuildHasherDefault<FastHasher>>,
    stack: Vec<Frame>,
    stuck: Option<Stuck>,
}

impl<'a> KeyChecker<'a> {
    fn new(key: &'a str, ops: &[&'a Op]) -> Self {
        let mut names = Interner::default();
        let mut det = Vec::new();
        let mut unk_raw = Vec::new();
        for &op in ops {
            let mop = match &op.kind {
                OpKind::Set(v) | OpKind::SetUnknown(v) => MOp::Set(names.val(v)),
                OpKind::Get(v) => MOp::Get(match v {
                    None => Val::Missing,
                    Some(s) => names.val(s),
                }),
                OpKind::Incr(n) => MOp::Incr(*n),
                OpKind::IncrUnknown => MOp::IncrAny,
            };
            if op.is_indeterminate_write() {
                let mop = if let MOp::Incr(_) = mop {
                    MOp::IncrAny
                } else {
                    mop
                };
                unk_raw.push((op, mop));
            } else {
                det.push((op, mop));
            }
        }

        // Events: (time, 0 = call / 1 = return, 0 = acknowledged / 1 =
        // indeterminate, index). Calls sort before returns at equal times
        // (ops touching in time count as concurrent, the lenient choice).
        let mut events: Vec<(u64, u8, u8, usize)> =
            Vec::with_capacity(det.len() * 2 + unk_raw.len());
        for (i, (op, _)) in det.iter().enumerate() {
            let ret = op.ret.unwrap_or(op.call).max(op.call);
            events.push((op.call, 0, 0, i));
            events.push((ret, 1, 0, i));
        }
        for (i, (op, _)) in unk_raw.iter().enumerate() {
            events.push((op.call, 0, 1, i));
        }
        events.sort_unstable();

        let mut entries: Vec<Entry> = Vec::with_capacity(det.len() * 2);
        let mut call_entry = vec![NIL; det.len()];
        let mut unk = Vec::with_capacity(unk_raw.len());
        let mut class_of: HashMap<MOp, usize> = HashMap::new();
        let mut members: Vec<Vec<usize>> = Vec::new();
        let mut class_val = Vec::new();
        for (rank, &(_, is_ret, is_unk, i)) in events.iter().enumerate() {
            if is_unk == 1 {
                let (op, mop) = unk_raw[i];
                let class = *class_of.entry(mop).or_insert_with(|| {
                    members.push(Vec::new());
                    class_val.push(match mop {
                        MOp::Set(v) => Some(v),
                        _ => None,
                    });
                    members.len() - 1
                });
                members[class].push(unk.len());
                unk.push(Unknown {
                    op,
                    mop,
                    call_rank: rank,
                    class,
                });
                continue;
            }
            let idx = entries.len();
            if is_ret == 1 {
                entries[call_entry[i]].ret = idx;
            } else {
                call_entry[i] = idx;
            }
            entries.push(Entry {
                op: i,
                is_call: is_ret == 0,
                rank,
                ret: NIL,
            });
        }
        let incr_class = class_of.get(&MOp::IncrAny).copied();

        // Doubly linked list; the head sentinel is the last node.
        let n = entries.len();
        let head = n;
        // Entry i follows i - 1 (the first follows the head).
        let mut next: Vec<usize> = (1..=n).collect();
        if n > 0 {
            next[n - 1] = NIL;
        }
        next.push(if n > 0 { 0 } else { NIL });
        let prev: Vec<usize> = (0..n)
            .map(|i| i.checked_sub(1).unwrap_or(head))
            .chain([NIL])
            .collect();

        let words = det.len().div_ceil(64);
        let mut bits = vec![0u64; words + 2];
        let (a, b) = Interner::encode(Val::Missing);
        bits[words] = a;
        bits[words + 1] = b;
        KeyChecker {
            key,
            names,
            det,
            unk_bits: vec![0; unk.len().div_ceil(64)],
            applied: vec![0; members.len()],
            unk,
            members,
            class_val,
            incr_class,
            entries,
            next,
            prev,
            head,
            bits,
            words,
            cache: HashMap::default(),
            stack: Vec::new(),
            stuck: None,
        }
    }

    fn set_state(&mut self, v: Val) {
        let (a, b) = Interner::encode(v);
        self.bits[self.words] = a;
        self.bits[self.words + 1] = b;
    }

    fn lift(&mut self, e: usize) {
        for x in [e, self.entries[e].ret] {
            let (p, n) = (self.prev[x], self.next[x]);
            self.next[p] = n;
            if n != NIL {
                self.prev[n] = p;
            }
        }
    }

    fn unlift(&mut self, e: usize) {
        for x in [self.entries[e].ret, e] {
            let (p, n) = (self.prev[x], self.next[x]);
            self.next[p] = x;
            if n != NIL {
                self.prev[n] = x;
            }
        }
    }

    /// Records the current node; false if it (or a node dominating it) was
    /// already explored.
    fn visit(&mut self) -> bool {
        let cur = &self.unk_bits;
        let w = cur.len();
        let Some(seen) = self.cache.get_mut(&self.bits[..]) else {
            self.cache.insert(self.bits.clone(), cur.clone());
            return true;
        };
        if w == 0 || seen.chunks_exact(w).any(|s| is_subset(s, cur)) {
            return false;
        }
        // Keep an antichain: sets containing `cur` are now redundant.
        let mut kept = 0;
        for i in 0..seen.len() / w {
            if !is_subset(cur, &seen[i * w..(i + 1) * w]) {
                seen.copy_within(i * w..(i + 1) * w, kept * w);
                kept += 1;
            }
        }
        seen.truncate(kept * w);
        seen.extend_from_slice(cur);
        true
    }

    fn flip_det(&mut self, i: usize) {
        self.bits[i / 64] ^= 1 << (i % 64);
    }

    fn flip_unk(&mut self, i: usize) {
        self.unk_bits[i / 64] ^= 1 << (i % 64);
    }

    fn unk_applied(&self, u: usize) -> bool {
        self.unk_bits[u / 64] & (1 << (u % 64)) != 0
    }

    /// Rank of the first return event still in the list at or after `e`:
    /// indeterminate writes called before it may be linearized now.
    fn cutoff(&self, mut e: usize) -> usize {
        while e != NIL && self.entries[e].is_call {
            e = self.next[e];
        }
        if e == NIL {
            usize::MAX
        } else {
            self.entries[e].rank
        }
    }

    /// Whether the next `n` unapplied members of `class` were called before
    /// `cutoff`.
    fn available(&self, class: usize, n: usize, cutoff: usize) -> bool {
        let (m, a) = (&self.members[class], self.applied[class]);
        n == 0 || (a + n <= m.len() && self.unk[m[a + n - 1]].call_rank < cutoff)
    }

    /// The `idx`-th way to place acknowledged op `mop` (call entry `e`) at
    /// `state`: directly, or else after a block of indeterminate writes
    /// producing the value it observes.
    fn option(&self, state: Val, mop: MOp, e: usize, idx: usize) -> Option<Block> {
        if step(state, mop).is_some() {
            return (idx == 0).then_some(DIRECT);
        }
        self.blocks(state, mop, e).get(idx).copied()
    }

    fn blocks(&self, state: Val, mop: MOp, e: usize) -> Vec<Block> {
        let mut out = Vec::new();
        if self.unk.is_empty() {
            return out;
        }
        let target = match mop {
            MOp::Get(Val::Missing) | MOp::Set(_) | MOp::IncrAny => return out,
            MOp::Get(t) => t,
            MOp::Incr(n) => match n.checked_sub(1) {
                Some(t) => Val::Int(t),
                None => return out,
            },
        };
        let cutoff = self.cutoff(e);
        let k = self.unk.len() as i64;
        // INCRs needed to go from `from` to the target, if possible.
        let incs_from = |from: Val| -> Option<usize> {
            match (as_int(from), target) {
                (Some(s), Val::Int(t)) if t > s && t - s <= k => {
                    let m = (t - s) as usize;
                    let ic = self.incr_class?;
                    self.available(ic, m, cutoff).then_some(m)
                }
                _ => None,
            }
        };
        if let Some(m) = incs_from(state) {
            out.push(Block { set: None, incs: m });
        }
        for (c, v) in self.class_val.iter().enumerate() {
            let Some(v) = *v else { continue };
            if !self.available(c, 1, cutoff) {
                continue;
            }
            let incs = if v == target { Some(0) } else { incs_from(v) };
            if let Some(m) = incs {
                out.push(Block {
                    set: Some(c),
                    incs: m,
                });
            }
        }
        out
    }

    fn apply_block(&mut self, b: Block, state: Val) -> Val {
        let mut st = state;
        if let Some(c) = b.set {
            let u = self.members[c][self.applied[c]];
            self.flip_unk(u);
            self.applied[c] += 1;
            st = self.class_val[c].expect("SET class");
        }
        if b.incs > 0 {
            let ic = self.incr_class.expect("INCR class");
            for j in 0..b.incs {
                let u = self.members[ic][self.applied[ic] + j];
                self.flip_unk(u);
            }
            self.applied[ic] += b.incs;
            st = Val::Int(as_int(st).expect("integer") + b.incs as i64);
        }
        st
    }

    fn undo_block(&mut self, b: Block) {
        if b.incs > 0 {
            let ic = self.incr_class.expect("INCR class");
            self.applied[ic] -= b.incs;
            for j in 0..b.incs {
                let u = self.members[ic][self.applied[ic] + j];
                self.flip_unk(u);
            }
        }
        if let Some(c) = b.set {
            self.applied[c] -= 1;
            let u = self.members[c][self.applied[c]];
            self.flip_unk(u);
        }
    }

    fn run(mut self, budget: u64) -> Result<(), Violation> {
        let mut state = Val::Missing;
        let mut remaining = self.det.len();
        // Next list entry to try, and which of its options.
        let (mut e, mut option) = (self.next[self.head], 0);
        let mut steps: u64 = 0;
        loop {
            if remaining == 0 {
                return Ok(());
            }
            steps += 1;
            if steps > budget {
                return Err(self.budget_exceeded(steps - 1));
            }
            // A return entry remains while `remaining > 0`, so the scan never
            // runs off the list.
            if !self.entries[e].is_call {
                // Nothing can be placed before this op returns: backtrack.
                self.record_stuck(e, state);
                let Some(f) = self.stack.pop() else {
                    return Err(self.not_linearizable());
                };
                self.unlift(f.entry);
                self.flip_det(self.entries[f.entry].op);
                self.undo_block(f.block);
                state = f.prev;
                self.set_state(state);
                remaining += 1;
                (e, option) = (f.entry, f.option + 1);
                continue;
            }
            let mop = self.det[self.entries[e].op].1;
            let Some(block) = self.option(state, mop, e, option) else {
                (e, option) = (self.next[e], 0);
                continue;
            };
            let mid = self.apply_block(block, state);
            let new = step(mid, mop).expect("the block enables the op");
            let op = self.entries[e].op;
            self.flip_det(op);
            self.set_state(new);
            if self.visit() {
                self.stack.push(Frame {
                    entry: e,
                    prev: state,
                    option,
                    block,
                });
                state = new;
                self.lift(e);
                remaining -= 1;
                (e, option) = (self.next[self.head], 0);
            } else {
                self.flip_det(op);
                self.undo_block(block);
                self.set_state(state);
                option += 1;
            }
        }
    }

    fn record_stuck(&mut self, ret_entry: usize, state: Val) {
        let cutoff = self.entries[ret_entry].rank;
        if self.stuck.as_ref().is_some_and(|s| s.rank >= cutoff) {
            return;
        }
        let mut linearized = Vec::new();
        for f in &self.stack {
            let b = f.block;
            if let Some(c) = b.set {
                // The member applied by this frame is the last applied one
                // at that time; recover it from the class prefix order.
                linearized.push((true, c));
            }
            for _ in 0..b.incs {
                linearized.push((true, usize::MAX));
            }
            linearized.push((false, self.entries[f.entry].op));
        }
        // Map class placeholders to concrete members in application order.
        let mut used = vec![0usize; self.members.len()];
        for item in linearized.iter_mut() {
            if item.0 {
                let c = if item.1 == usize::MAX {
                    self.incr_class.expect("INCR class")
                } else {
                    item.1
                };
                item.1 = self.members[c][used[c]];
                used[c] += 1;
            }
        }
        // The op whose return blocks first, then the other pending calls.
        let mut candidates = vec![self.entries[ret_entry].op];
        let mut x = self.next[self.head];
        while x != ret_entry && x != NIL {
            let entry = &self.entries[x];
            if entry.is_call && entry.op != candidates[0] {
                candidates.push(entry.op);
            }
            x = self.next[x];
        }
        let unknowns = (0..self.unk.len())
            .filter(|&u| self.unk[u].call_rank < cutoff && !self.unk_applied(u))
            .collect();
        self.stuck = Some(Stuck {
            rank: cutoff,
            ret_entry,
            state,
            linearized,
            candidates,
            unknowns,
        });
    }

    fn not_linearizable(&self) -> Violation {
        use std::fmt::Write;
        let stuck = self.stuck.as_ref().expect("stuck point recorded");
        let mut d = String::new();
        let blocker = self.det[self.entries[stuck.ret_entry].op].0;
        let _ = writeln!(
            d,
            "key {:?}: history is NOT linearizable ({} acknowledged ops, {} indeterminate writes).",
            self.key,
            self.det.len(),
            self.unk.len()
        );
        let _ = writeln!(
            d,
            "Smallest non-linearizable prefix: all events up to the return of\n    {blocker}"
        );
        let n_lin = stuck.linearized.len();
        const SHOWN: usize = 12;
        let _ = writeln!(
            d,
            "Deepest linearization found ({n_lin} ops{}):",
            if n_lin > SHOWN {
                format!(", last {SHOWN} shown")
            } else {
                String::new()
            }
        );
        let mut state = Val::Missing;
        let mut lines = Vec::new();
        for &(is_unk, i) in &stuck.linearized {
            let (op, mop) = if is_unk {
                (self.unk[i].op, self.unk[i].mop)
            } else {
                self.det[i]
            };
            state = step(state, mop).unwrap_or(state);
            let note = if is_unk { " (applied here)" } else { "" };
            lines.push(format!("    {op}{note}  => {}", self.names.show(state)));
        }
        if lines.is_empty() {
            let _ = writeln!(d, "    (none)");
        }
        for l in &lines[lines.len().saturating_sub(SHOWN)..] {
            let _ = writeln!(d, "{l}");
        }
        let _ = writeln!(d, "Register after it: {}", self.names.show(stuck.state));
        let _ = writeln!(d, "Ops that could not be placed next:");
        for &c in &stuck.candidates {
            let (op, mop) = self.det[c];
            let why = match step(stuck.state, mop) {
                None => explain(stuck.state, mop, &self.names),
                Some(_) => "could be applied, but every continuation failed".to_string(),
            };
            let _ = writeln!(d, "    {op}: {why}");
        }
        if !stuck.unknowns.is_empty() {
            let _ = writeln!(
                d,
                "Indeterminate writes that could still apply here (none helps):"
            );
            for &u in stuck.unknowns.iter().take(SHOWN) {
                let _ = writeln!(d, "    {}", self.unk[u].op);
            }
            if stuck.unknowns.len() > SHOWN {
                let _ = writeln!(d, "    ... and {} more", stuck.unknowns.len() - SHOWN);
            }
        }
        Violation::NotLinearizable {
            key: self.key.to_string(),
            description: d,
            unplaced: stuck
                .candidates
                .iter()
                .map(|&c| self.det[c].0.clone())
                .collect(),
        }
    }

    fn budget_exceeded(&self, steps: u64) -> Violation {
        let description = format!(
            "key {:?}: linearizability UNKNOWN: search budget exceeded after {} steps \
             ({} acknowledged ops, {} indeterminate writes, {} memoized states); \
             reduce the history or raise the budget",
            self.key,
            steps,
            self.det.len(),
            self.unk.len(),
            self.cache.len()
        );
        Violation::BudgetExceeded {
            key: self.key.to_string(),
            steps,
            description,
        }
    }
}

//! What every collection type of an engine provides.

use std::fmt::Debug;

/// A collection value (list, hash, set, sorted set, stream) of an engine.
/// Equality is logical (same elements, same order where order is
/// observable), used by the determinism tests and DEBUG DIGEST checks.
pub trait Collection: Clone + PartialEq + Eq + Debug + 'static {
    /// Heap bytes owned beyond the value's own size (MEMORY USAGE).
    fn heap_size(&self) -> usize;
    /// Number of elements (fields, members, entries).
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The name OBJECT ENCODING reports (Redis's names: `listpack`,
    /// `hashtable`, `intset`, `skiplist`, `quicklist`, `stream`).
    fn encoding(&self) -> &'static str;
}

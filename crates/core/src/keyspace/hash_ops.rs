//! The hash operations the command family needs from an engine.

use super::Collection;

/// Hash operations of an engine (`crate::hash` is written against it).
pub trait HashOps: Collection {}

impl Collection for kvasir_engine_memory::Hash {
    fn heap_size(&self) -> usize {
        kvasir_engine_memory::Hash::heap_size(self)
    }
}

impl HashOps for kvasir_engine_memory::Hash {}

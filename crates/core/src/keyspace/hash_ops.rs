//! The hash operations the command family needs from an engine.

use super::Collection;

/// Hash operations of an engine (`crate::hash` is written against it).
pub trait HashOps: Collection {}

impl Collection for kvasir_engine_memory::Hash {
    fn heap_size(&self) -> usize {
        kvasir_engine_memory::Hash::heap_size(self)
    }

    fn len(&self) -> usize {
        kvasir_engine_memory::Hash::len(self)
    }

    fn encoding(&self) -> &'static str {
        kvasir_engine_memory::Hash::encoding(self)
    }
}

impl HashOps for kvasir_engine_memory::Hash {}

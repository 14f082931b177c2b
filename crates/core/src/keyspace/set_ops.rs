//! The set operations the command family needs from an engine.

use super::Collection;

/// Set operations of an engine (`crate::set` is written against it).
pub trait SetOps: Collection {}

impl Collection for kvasir_engine_memory::Set {
    fn heap_size(&self) -> usize {
        kvasir_engine_memory::Set::heap_size(self)
    }

    fn len(&self) -> usize {
        kvasir_engine_memory::Set::len(self)
    }

    fn encoding(&self) -> &'static str {
        kvasir_engine_memory::Set::encoding(self)
    }
}

impl SetOps for kvasir_engine_memory::Set {}

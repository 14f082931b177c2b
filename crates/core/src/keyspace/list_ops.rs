//! The list operations the command family needs from an engine.

use super::Collection;

/// List operations of an engine (`crate::list` is written against it).
pub trait ListOps: Collection {}

impl Collection for kvasir_engine_memory::List {
    fn heap_size(&self) -> usize {
        kvasir_engine_memory::List::heap_size(self)
    }

    fn len(&self) -> usize {
        kvasir_engine_memory::List::len(self)
    }

    fn encoding(&self) -> &'static str {
        kvasir_engine_memory::List::encoding(self)
    }
}

impl ListOps for kvasir_engine_memory::List {}

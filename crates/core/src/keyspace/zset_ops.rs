//! The zset operations the command family needs from an engine.

use super::Collection;

/// ZSet operations of an engine (`crate::zset` is written against it).
pub trait ZSetOps: Collection {}

impl Collection for kvasir_engine_memory::ZSet {
    fn heap_size(&self) -> usize {
        kvasir_engine_memory::ZSet::heap_size(self)
    }

    fn len(&self) -> usize {
        kvasir_engine_memory::ZSet::len(self)
    }

    fn encoding(&self) -> &'static str {
        kvasir_engine_memory::ZSet::encoding(self)
    }
}

impl ZSetOps for kvasir_engine_memory::ZSet {}

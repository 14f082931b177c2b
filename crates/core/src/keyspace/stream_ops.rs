//! The stream operations the command family needs from an engine.

use super::Collection;

/// Stream operations of an engine (`crate::stream` is written against it).
pub trait StreamOps: Collection {}

impl Collection for kvasir_engine_memory::Stream {
    fn heap_size(&self) -> usize {
        kvasir_engine_memory::Stream::heap_size(self)
    }
}

impl StreamOps for kvasir_engine_memory::Stream {}

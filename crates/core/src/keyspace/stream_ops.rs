//! The stream operations the command family needs from an engine.

use super::Collection;

/// Stream operations of an engine (`crate::stream` is written against it).
pub trait StreamOps: Collection {}

impl Collection for kvasir_engine_memory::Stream {
    fn heap_size(&self) -> usize {
        kvasir_engine_memory::Stream::heap_size(self)
    }

    fn len(&self) -> usize {
        kvasir_engine_memory::Stream::len(self) as usize
    }

    fn encoding(&self) -> &'static str {
        "stream"
    }
}

impl StreamOps for kvasir_engine_memory::Stream {}

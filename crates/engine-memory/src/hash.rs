//! The Hash value type. (Placeholder: the family's engineer replaces this
//! with the real encodings.)

/// A Redis hash value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hash {
    _placeholder: (),
}

impl Hash {
    /// Number of elements.
    pub fn len(&self) -> usize {
        0
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes owned (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        0
    }

    /// What OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        "listpack"
    }
}

//! The Set value type. (Placeholder: the family's engineer replaces this
//! with the real encodings.)

/// A Redis set value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    _placeholder: (),
}

impl Set {
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

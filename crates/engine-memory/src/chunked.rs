//! A vector stored in fixed-size chunks: positions behave as in a `Vec`
//! (push appends, `swap_remove` moves the last element into the hole), but
//! growing never copies the elements and never reserves twice what is
//! used. A database's entries live here: a doubling `Vec` kept up to half
//! its size unused, which under `maxmemory` is memory evicted keys would
//! have used.

/// Elements per chunk (a power of two: a position splits with a shift).
const CHUNK_BITS: u32 = 10;
const CHUNK: usize = 1 << CHUNK_BITS;

#[derive(Debug)]
pub struct ChunkedVec<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for ChunkedVec<T> {
    fn default() -> Self {
        ChunkedVec {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> ChunkedVec<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements the allocated chunks hold.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.chunks.len() * CHUNK
    }

    #[inline]
    fn split(i: usize) -> (usize, usize) {
        (i >> CHUNK_BITS, i & (CHUNK - 1))
    }

    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        let (c, o) = Self::split(i);
        self.chunks.get(c)?.get(o)
    }

    pub fn push(&mut self, value: T) {
        let (c, _) = Self::split(self.len);
        if c == self.chunks.len() {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        self.chunks[c].push(value);
        self.len += 1;
    }

    /// Makes room for `additional` more elements (whole chunks).
    pub fn reserve(&mut self, additional: usize) {
        let needed = (self.len + additional).div_ceil(CHUNK);
        while self.chunks.len() < needed {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
    }

    /// Removes element `i`; the last element takes its place.
    pub fn swap_remove(&mut self, i: usize) -> Option<T> {
        if i >= self.len {
            return None;
        }
        let last = self.len - 1;
        let (lc, lo) = Self::split(last);
        if i != last {
            let (c, o) = Self::split(i);
            if c == lc {
                self.chunks[c].swap(o, lo);
            } else {
                let (head, tail) = self.chunks.split_at_mut(lc);
                std::mem::swap(&mut head[c][o], &mut tail[0][lo]);
            }
        }
        let removed = self.chunks[lc].pop();
        self.len -= 1;
        // Keep one spare chunk at most, so that a push and a removal at a
        // chunk's edge do not allocate and free a chunk each time.
        let used = self.len.div_ceil(CHUNK);
        if self.chunks.len() > used + 1 {
            self.chunks.truncate(used + 1);
            self.chunks.shrink_to(used + 1);
        }
        removed
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flat_map(|c| c.iter())
    }
}

impl<T> std::ops::Index<usize> for ChunkedVec<T> {
    type Output = T;

    #[inline]
    fn index(&self, i: usize) -> &T {
        let (c, o) = Self::split(i);
        &self.chunks[c][o]
    }
}

impl<T> std::ops::IndexMut<usize> for ChunkedVec<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        let (c, o) = Self::split(i);
        &mut self.chunks[c][o]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same operations on a Vec and a ChunkedVec leave the same
    /// elements in the same positions.
    #[test]
    fn behaves_as_a_vec() {
        let mut v = Vec::new();
        let mut c = ChunkedVec::default();
        let mut x: u64 = 1;
        for step in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if !(x >> 33).is_multiple_of(3) || v.is_empty() {
                v.push(step);
                c.push(step);
            } else {
                let i = ((x >> 40) as usize) % v.len();
                assert_eq!(c.swap_remove(i), Some(v.swap_remove(i)));
            }
            assert_eq!(c.len(), v.len());
        }
        assert!(c.iter().eq(v.iter()));
        for (i, e) in v.iter().enumerate() {
            assert_eq!(c.get(i), Some(e));
            assert_eq!(&c[i], e);
        }
        assert_eq!(c.get(v.len()), None);
        while let Some(e) = v.pop() {
            assert_eq!(c.swap_remove(v.len()), Some(e));
        }
        assert!(c.capacity() <= CHUNK);
    }

    #[test]
    fn growth_reserves_at_most_a_chunk_and_removal_gives_chunks_back() {
        let mut c = ChunkedVec::default();
        for i in 0..100_000 {
            c.push(i);
            assert!(c.capacity() - c.len() < CHUNK);
        }
        for _ in 0..99_000 {
            c.swap_remove(0);
        }
        assert!(c.capacity() <= 1_000 + 2 * CHUNK, "{}", c.capacity());
    }
}

//! A vector stored in fixed-size chunks: positions behave as in a `Vec`
//! (push appends, `swap_remove` moves the last element into the hole), but
//! growing never copies the elements and never reserves twice what is
//! used. A database's entries live here: a doubling `Vec` kept up to half
//! its size unused, which under `maxmemory` is memory evicted keys would
//! have used.

/// Elements per chunk (a power of two: a position splits with a shift).
/// 256 entries (~18 KB): what a database holds beyond its keys is at most
/// about two chunks, so eviction under a small `maxmemory` gets memory
/// back key by key rather than 74 KB at a time. Chunks of 32 were tried
/// (2 KB steps of used memory): the allkeys-lru test then lost 30-50 of
/// its 500 hot keys in 3 of 8 runs (8 of 8 kept enough with 256), not
/// understood; kept at 256.
const CHUNK_BITS: u32 = 8;
const CHUNK: usize = 1 << CHUNK_BITS;
/// The first chunk starts this small and doubles up to [`CHUNK`], so a
/// database with a few keys does not hold a whole chunk (a write to an
/// empty database would otherwise take a whole chunk at once, which a
/// tight `maxmemory` cannot evict back).
const FIRST_CHUNK: usize = 8;

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
        self.chunks.iter().map(Vec::capacity).sum()
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
            let first = if c == 0 { FIRST_CHUNK } else { CHUNK };
            self.chunks.push(Vec::with_capacity(first));
        }
        // The first chunk doubles up to CHUNK (a power of two, so it never
        // grows past it); the others are allocated whole.
        self.chunks[c].push(value);
        self.len += 1;
    }

    /// Makes room for `additional` more elements, so that a bulk load
    /// grows once.
    pub fn reserve(&mut self, additional: usize) {
        let total = self.len + additional;
        if total <= CHUNK {
            let first = match self.chunks.first_mut() {
                Some(first) => first,
                None => {
                    self.chunks.push(Vec::new());
                    &mut self.chunks[0]
                }
            };
            first.reserve_exact(total.next_power_of_two().max(FIRST_CHUNK) - first.len());
            return;
        }
        if let Some(first) = self.chunks.first_mut() {
            first.reserve_exact(CHUNK - first.len());
        }
        let needed = total.div_ceil(CHUNK);
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
        // One spare chunk is kept while the last used one is more than half
        // full, so that pushes and removals at a chunk's edge do not
        // allocate and free a chunk each time; otherwise none.
        let used = self.len.div_ceil(CHUNK);
        let in_last = self.len - used.saturating_sub(1) * CHUNK;
        let keep = if self.len > 0 && in_last > CHUNK / 2 {
            used + 1
        } else {
            used
        };
        if self.chunks.len() > keep {
            self.chunks.truncate(keep);
            self.chunks.shrink_to(keep);
        }
        // A lone first chunk shrinks as a Vec would, once three quarters
        // of it are unused.
        if let [only] = &mut self.chunks[..] {
            if only.capacity() > FIRST_CHUNK && self.len * 4 < only.capacity() {
                only.shrink_to((self.len * 2).max(FIRST_CHUNK).next_power_of_two());
            }
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

    /// A few elements take a few slots, and removing them gives the
    /// memory back, whatever the chunk size.
    #[test]
    fn small_and_emptied_vectors_hold_little() {
        let mut c = ChunkedVec::default();
        for i in 0..3u64 {
            c.push(i);
        }
        assert_eq!(c.capacity(), FIRST_CHUNK);
        for i in 0..(3 * CHUNK as u64) {
            c.push(i);
        }
        while c.len() > 2 {
            c.swap_remove(0);
        }
        assert!(c.capacity() <= FIRST_CHUNK, "{}", c.capacity());
        let mut r: ChunkedVec<u64> = ChunkedVec::default();
        r.reserve(CHUNK / 2 - 2);
        assert_eq!(r.capacity(), CHUNK / 2);
        r.reserve(CHUNK + 1);
        assert_eq!(r.capacity(), 2 * CHUNK);
    }
}

//! The released table: free blocks larger than a page whose every page, header included, went back to
//! the kernel.
//!
//! A block on a free list carries its list's link in its header, so it keeps that page resident; a block
//! here is listed by address instead (a fixed table inside the region's state: no allocation, no page of
//! the block touched), so a freed or never-used block costs no resident memory at all. What does not fit
//! ([`PER_CLASS`] blocks a class) goes to the free list as before. Never: allocates, locks (the region's
//! caller serialises every call) or reads a block's memory.

/// Blocks a class holds here; the rest of a class's free blocks keep their header's page on the list.
pub(super) const PER_CLASS: usize = 32;

/// Per class, a stack of released blocks' addresses (last released, first reused).
pub(super) struct Released<const C: usize> {
    len: [u8; C],
    at: [[usize; PER_CLASS]; C],
}

impl<const C: usize> Released<C> {
    pub(super) const fn new() -> Self {
        Released {
            len: [0; C],
            at: [[0; PER_CLASS]; C],
        }
    }

    /// Lists `block` under class index `c`; false when that class is full (or `c` is out of range).
    pub(super) fn push(&mut self, c: usize, block: usize) -> bool {
        let (Some(len), Some(at)) = (self.len.get_mut(c), self.at.get_mut(c)) else {
            return false;
        };
        match at.get_mut(*len as usize) {
            Some(slot) => {
                *slot = block;
                *len += 1;
                true
            }
            None => false,
        }
    }

    /// The last block listed under class index `c`, taken off the table.
    pub(super) fn pop(&mut self, c: usize) -> Option<usize> {
        let len = self.len.get_mut(c).filter(|l| **l > 0)?;
        *len -= 1;
        self.at.get(c)?.get(*len as usize).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_is_a_bounded_stack_and_classes_are_apart() {
        let mut r = Released::<3>::new();
        for i in 0..PER_CLASS {
            assert!(r.push(1, 0x1000 * (i + 1)));
        }
        assert!(!r.push(1, 0xdead), "a full class says no");
        assert!(r.push(2, 0x42));
        assert!(!r.push(3, 0x42), "no such class");
        assert_eq!(r.pop(0), None);
        assert_eq!(r.pop(2), Some(0x42));
        assert_eq!(r.pop(1), Some(0x1000 * PER_CLASS), "last in, first out");
        assert!(r.push(1, 0x7000_0000));
        assert_eq!(r.pop(1), Some(0x7000_0000));
        let rest = std::iter::from_fn(|| r.pop(1)).count();
        assert_eq!(rest, PER_CLASS - 1);
    }
}

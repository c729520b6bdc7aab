//! The collector's memory budget: one byte count shared by every target fetched at once. A target
//! charges its downloaded bytes as they arrive, then its inflated and decoded profile
//! ([`crate::report::limits`]), and gives all of it back when its snapshot is written. A charge that
//! would pass the budget fails that target (its meta.json says why), so eight hostile or huge targets
//! at `-concurrency 8` cannot hold 8 × 64 MiB bodies plus their inflated profiles: the total stays under [`BUDGET_BYTES`] and the other
//! targets go on.
#![forbid(unsafe_code)]

use std::sync::Mutex;

/// Bytes all targets of a cycle may hold at once (bodies, inflated and decoded profiles).
pub const BUDGET_BYTES: u64 = 192 << 20;

/// The shared count.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    used: Mutex<u64>,
}

impl Budget {
    pub fn new(limit: u64) -> Budget {
        Budget {
            limit,
            used: Mutex::new(0),
        }
    }

    /// A holder that charges this budget and gives its bytes back when dropped.
    pub fn holder(&self) -> Held<'_> {
        Held {
            budget: self,
            bytes: 0,
        }
    }

    /// Bytes held now by all holders.
    pub fn used(&self) -> u64 {
        *self.used.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One target's share of a [`Budget`].
#[derive(Debug)]
pub struct Held<'a> {
    budget: &'a Budget,
    bytes: u64,
}

/// A charge refused: the budget's limit and what the target held then, in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverBudget {
    pub limit: u64,
    pub held: u64,
}

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "nl6 collect's memory limit ({} MiB for all profiles fetched at once) would be passed: \
             this target holds {} MiB; retry with a lower -concurrency",
            self.limit >> 20,
            self.held >> 20
        )
    }
}

impl std::error::Error for OverBudget {}

impl Held<'_> {
    /// Adds `n` bytes, or refuses (nothing added) when the budget would be passed.
    pub fn charge(&mut self, n: u64) -> Result<(), OverBudget> {
        let mut used = self.budget.used.lock().unwrap_or_else(|p| p.into_inner());
        if used.saturating_add(n) > self.budget.limit {
            return Err(OverBudget {
                limit: self.budget.limit,
                held: self.bytes,
            });
        }
        *used += n;
        self.bytes += n;
        Ok(())
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().unwrap_or_else(|p| p.into_inner());
        *used = used.saturating_sub(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_share_the_limit_and_give_back_on_drop() {
        let b = Budget::new(10 << 20);
        let mut a = b.holder();
        a.charge(6 << 20).unwrap();
        {
            let mut c = b.holder();
            let e = c.charge(5 << 20).unwrap_err().to_string();
            assert!(e.contains("10 MiB") && e.contains("-concurrency"), "{e}");
            c.charge(4 << 20).unwrap();
            assert_eq!(b.used(), 10 << 20);
        }
        assert_eq!(b.used(), 6 << 20);
        drop(a);
        assert_eq!(b.used(), 0);
    }
}

//! Test-only: which labels each named point in the lab ran under (see the `probe!` macro).
use crate::labels::{self, Subsystem};
use std::collections::HashMap;
use std::sync::Mutex;

type Seen = HashMap<&'static str, Vec<Option<Subsystem>>>;

static SEEN: Mutex<Option<Seen>> = Mutex::new(None);

/// Records the calling thread's current label at `point`.
pub fn hit(point: &'static str) {
    let label = labels::current();
    let mut g = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let seen = g.get_or_insert_with(HashMap::new).entry(point).or_default();
    if !seen.contains(&label) {
        seen.push(label);
    }
}

/// Every distinct label seen at `point` so far.
pub fn seen(point: &str) -> Vec<Option<Subsystem>> {
    let g = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    g.as_ref()
        .and_then(|m| m.get(point).cloned())
        .unwrap_or_default()
}

//! Label sets: immutable lists of key/value pairs, interned once into a process-wide table so that a
//! thread (or a task, across `.await`) carries one small index and a signal handler reads one word.
//!
//! Owns the table: at most [`MAX_SETS`] distinct sets holding at most [`MAX_TEXT_BYTES`] of key and value
//! text, kept for the life of the process (a profile taken later must still name them). Building a set
//! takes a lock and searches a tree; entering one (see the parent module) touches neither. Never panics:
//! a set that does not fit is [`LabelSet::OVERFLOW`] (from [`LabelSet::new`]) or a [`LabelError`] (from
//! [`LabelSet::try_new`]), and every refusal is counted ([`refused`]) and named in the profiles.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// How many distinct label sets a process can hold (the empty set and [`LabelSet::OVERFLOW`] included).
pub const MAX_SETS: usize = 4096;
/// How much key and value text all sets together may hold (each distinct string counted once).
pub const MAX_TEXT_BYTES: usize = 1 << 20;

/// The pairs of [`LabelSet::OVERFLOW`].
const OVERFLOW_PAIRS: &[(&str, &str)] = &[("label_overflow", "true")];

/// A set of labels (`key = value` pairs, keys distinct, sorted by key), the analog of Go's
/// `pprof.LabelSet`: build it once with [`LabelSet::new`], then enter it as often as needed with
/// [`with`](super::with), [`LabelSet::enter`] or, around a future, [`with_labels`](super::LabelledFuture::with_labels).
/// `Copy`: the value is an index into the process's table.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct LabelSet(pub(super) u16);

/// Why a label set was not built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LabelError {
    /// The table already holds [`MAX_SETS`] sets.
    TooManySets {
        /// The limit.
        max: usize,
    },
    /// The set's new text would pass [`MAX_TEXT_BYTES`].
    TooMuchText {
        /// The limit, in bytes.
        max: usize,
    },
}

impl std::fmt::Display for LabelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabelError::TooManySets { max } => write!(
                f,
                "label set: the table is full ({max} distinct sets): label values are meant to be a bounded \
                 vocabulary (routes, tenants), not per-request data such as ids"
            ),
            LabelError::TooMuchText { max } => write!(
                f,
                "label set: the table's text is full ({max} bytes of keys and values): use shorter or fewer \
                 distinct values"
            ),
        }
    }
}

impl std::error::Error for LabelError {}

type Pairs = &'static [(&'static str, &'static str)];

/// Published sets: slot `i` holds set `i` once `PUBLISHED > i` (slots 0 and 1 are never written: the
/// empty set and the overflow set are constants).
static SLOTS: [OnceLock<Pairs>; MAX_SETS] = [const { OnceLock::new() }; MAX_SETS];
static PUBLISHED: AtomicUsize = AtomicUsize::new(2);
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// The builder's side of the table, behind one lock.
struct Table {
    /// Encoded pairs → index.
    by_pairs: BTreeMap<String, u16>,
    /// Every string held, so a key used by many sets is stored once.
    strings: BTreeSet<&'static str>,
    text_bytes: usize,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    by_pairs: BTreeMap::new(),
    strings: BTreeSet::new(),
    text_bytes: 0,
});

impl LabelSet {
    /// No labels (a thread's state before any label is entered).
    pub const EMPTY: LabelSet = LabelSet(0);
    /// What [`LabelSet::new`] returns when the table is full: samples taken under it carry
    /// `label_overflow = "true"`, and every profile's comments say how many sets were refused.
    pub const OVERFLOW: LabelSet = LabelSet(1);

    /// The set of `pairs` (Go's `pprof.Labels(k1, v1, k2, v2…)`): any keys and values; a key given twice
    /// keeps its last value; no pairs is [`LabelSet::EMPTY`]. The same pairs (in any order) give the same
    /// set. When the table is full this is [`LabelSet::OVERFLOW`] (never a panic); [`LabelSet::try_new`]
    /// returns the error instead.
    pub fn new<K: AsRef<str>, V: AsRef<str>>(pairs: impl IntoIterator<Item = (K, V)>) -> LabelSet {
        Self::try_new(pairs).unwrap_or(LabelSet::OVERFLOW)
    }

    /// As [`LabelSet::new`], with the reason when the set does not fit in the table.
    pub fn try_new<K: AsRef<str>, V: AsRef<str>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Result<LabelSet, LabelError> {
        let owned: Vec<(K, V)> = pairs.into_iter().collect();
        let mut norm: Vec<(&str, &str)> = owned
            .iter()
            .map(|(k, v)| (k.as_ref(), v.as_ref()))
            .collect();
        normalise(&mut norm);
        intern(&norm)
    }

    /// This set with `pairs` added (a key already in it takes the new value): Go's `pprof.WithLabels`
    /// on a context carrying this set. Full table: [`LabelSet::OVERFLOW`].
    pub fn merged<K: AsRef<str>, V: AsRef<str>>(
        self,
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> LabelSet {
        let owned: Vec<(K, V)> = pairs.into_iter().collect();
        let mut norm: Vec<(&str, &str)> = self.pairs().to_vec();
        norm.extend(owned.iter().map(|(k, v)| (k.as_ref(), v.as_ref())));
        normalise(&mut norm);
        intern(&norm).unwrap_or(LabelSet::OVERFLOW)
    }

    /// The pairs, sorted by key.
    pub fn pairs(self) -> &'static [(&'static str, &'static str)] {
        pairs_of(self.0)
    }

    /// The value of `key` in this set.
    pub fn get(self, key: &str) -> Option<&'static str> {
        self.pairs()
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }

    /// Whether the set has no pairs.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The raw index a sample carries (0 = no labels): what [`crate::cpu::CpuSample::label`] and
    /// [`crate::threads::ThreadStack::label`] hold.
    pub fn index(self) -> u16 {
        self.0
    }

    /// The set a sample's raw index names; `None` for an index no set has.
    pub fn from_index(index: u16) -> Option<LabelSet> {
        ((index as usize) < PUBLISHED.load(Ordering::Acquire)).then_some(LabelSet(index))
    }
}

impl std::fmt::Debug for LabelSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.pairs().iter().map(|(k, v)| (k, v)))
            .finish()
    }
}

/// Sorts by key (stable) and keeps the last value of a repeated key.
fn normalise(pairs: &mut Vec<(&str, &str)>) {
    pairs.reverse();
    pairs.sort_by(|a, b| a.0.cmp(b.0));
    pairs.dedup_by(|later, earlier| later.0 == earlier.0);
}

/// Length-prefixed pairs: a key for the table no choice of text can make ambiguous.
fn encode_key(pairs: &[(&str, &str)]) -> String {
    use std::fmt::Write as _;
    let text: usize = pairs.iter().map(|(k, v)| k.len() + v.len() + 12).sum();
    let mut key = String::with_capacity(text);
    for (k, v) in pairs {
        for s in [k, v] {
            let _ = write!(key, "{}:{s}", s.len());
        }
    }
    key
}

fn intern(pairs: &[(&str, &str)]) -> Result<LabelSet, LabelError> {
    if pairs.is_empty() {
        return Ok(LabelSet::EMPTY);
    }
    let key = encode_key(pairs);
    let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&i) = t.by_pairs.get(&key) {
        return Ok(LabelSet(i));
    }
    let i = PUBLISHED.load(Ordering::Relaxed);
    if i >= MAX_SETS {
        return Err(refuse(LabelError::TooManySets { max: MAX_SETS }));
    }
    let new_text: usize = {
        let mut seen = BTreeSet::new();
        pairs
            .iter()
            .flat_map(|(k, v)| [*k, *v])
            .filter(|s| !t.strings.contains(s) && seen.insert(*s))
            .map(str::len)
            .sum()
    };
    if t.text_bytes + new_text > MAX_TEXT_BYTES {
        return Err(refuse(LabelError::TooMuchText {
            max: MAX_TEXT_BYTES,
        }));
    }
    t.text_bytes += new_text;
    let mut held = |s: &str| -> &'static str {
        if let Some(h) = t.strings.get(s) {
            return h;
        }
        let leaked: &'static str = Box::leak(s.to_owned().into_boxed_str());
        t.strings.insert(leaked);
        leaked
    };
    let stored: Vec<(&'static str, &'static str)> =
        pairs.iter().map(|(k, v)| (held(k), held(v))).collect();
    let _ = SLOTS[i].set(Box::leak(stored.into_boxed_slice()));
    t.by_pairs.insert(key, i as u16);
    PUBLISHED.store(i + 1, Ordering::Release);
    Ok(LabelSet(i as u16))
}

fn refuse(e: LabelError) -> LabelError {
    REFUSED.fetch_add(1, Ordering::Relaxed);
    e
}

/// The pairs of a sample's raw label index, sorted by key; empty for 0 or an index no set has.
pub fn pairs_of(index: u16) -> &'static [(&'static str, &'static str)] {
    match index {
        0 => &[],
        1 => OVERFLOW_PAIRS,
        i if (i as usize) < PUBLISHED.load(Ordering::Acquire) => {
            SLOTS[i as usize].get().copied().unwrap_or(&[])
        }
        _ => &[],
    }
}

/// How many label sets were refused because the table was full (each one entered as
/// [`LabelSet::OVERFLOW`] or returned as an error).
pub fn refused() -> u64 {
    REFUSED.load(Ordering::Relaxed)
}

/// The profiles' comment about refused sets, when there were any.
pub(crate) fn overflow_note() -> Option<String> {
    let n = refused();
    (n > 0).then(|| {
        format!(
            "labels: {n} label set(s) refused, the table holds {MAX_SETS} sets and {MAX_TEXT_BYTES} bytes of text; \
             their samples carry label_overflow=\"true\""
        )
    })
}

//! The function-level view of a profile that `go tool pprof -top` prints: stacks reduced to function
//! names (inlined frames included, leaf first), flat and cum per function, pprof's node trimming
//! (nodes under 0.5% cum are dropped) and its sort order.
//!
//! Stacks hold name ids ([`Names`]): each distinct name is stored once however many frames show it,
//! so a profile whose one long name fills every frame costs one copy of it, not one per frame.
//!
//! Plain values in, plain values out; formatting lives in [`super::top`].
#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet};

use nl6_profile::proto::Profile;

/// pprof's default `nodefraction`: nodes whose |cum| is below this share of the total are hidden.
pub const NODE_FRACTION: f64 = 0.005;

/// Distinct frame names, each stored once; stacks refer to them by index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    names: Vec<String>,
    index: HashMap<String, u32>,
}

impl Names {
    /// The id of `name`, added on first use.
    pub fn intern(&mut self, name: String) -> u32 {
        if let Some(&id) = self.index.get(&name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.index.insert(name.clone(), id);
        self.names.push(name);
        id
    }

    /// The name with id `id`.
    pub fn get(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    /// The id of `name`, if any frame has it.
    pub fn id(&self, name: &str) -> Option<u32> {
        self.index.get(name).copied()
    }

    /// How many distinct names there are (ids are `0..len`).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when no name was interned.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// One sample as a top table sees it: frame name ids leaf first, whether each frame was inlined into
/// the next one (it is not the last line of its location), and one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stack<'a> {
    pub frames: &'a [u32],
    pub inlined: &'a [bool],
    pub value: i64,
}

/// The stacks of one or more profiles over one shared name table, stored flat (all frames in one
/// vector, each sample an end offset and a value): a few bytes a frame, no allocation per sample.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stacks {
    pub names: Names,
    frames: Vec<u32>,
    inlined: Vec<bool>,
    ends: Vec<usize>,
    values: Vec<i64>,
}

impl Stacks {
    /// Appends one sample.
    pub fn push(&mut self, frames: impl IntoIterator<Item = (u32, bool)>, value: i64) {
        for (f, inl) in frames {
            self.frames.push(f);
            self.inlined.push(inl);
        }
        self.ends.push(self.frames.len());
        self.values.push(value);
    }

    /// Every sample, in the order pushed.
    pub fn iter(&self) -> impl Iterator<Item = Stack<'_>> + '_ {
        (0..self.ends.len()).map(move |k| {
            let start = if k == 0 { 0 } else { self.ends[k - 1] };
            let end = self.ends[k];
            Stack {
                frames: &self.frames[start..end],
                inlined: &self.inlined[start..end],
                value: self.values[k],
            }
        })
    }

    /// The frame names of `s`, leaf first.
    pub fn frame_names<'a>(&'a self, s: Stack<'a>) -> impl Iterator<Item = &'a str> + 'a {
        s.frames.iter().map(|&f| self.names.get(f))
    }
}

/// One row of a top table: a function's flat (as the leaf) and cum (anywhere on the stack) values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub flat: i64,
    pub cum: i64,
}

/// Values by location id: a vector when the ids are small (pprof writers number locations 1..n), else
/// a map. Every frame of every sample is looked up here, so the vector saves a hash a frame.
#[derive(Debug, Clone)]
pub enum ById<T> {
    Dense(Vec<Option<T>>),
    Sparse(HashMap<u64, T>),
}

impl<T> ById<T> {
    /// An empty table for values keyed by `ids`.
    pub fn for_ids(ids: impl ExactSizeIterator<Item = u64> + Clone) -> ById<T> {
        let n = ids.len() as u64;
        if ids.clone().all(|id| id <= 2 * n + 16) {
            ById::Dense((0..2 * n + 17).map(|_| None).collect())
        } else {
            ById::Sparse(HashMap::with_capacity(n as usize))
        }
    }

    pub fn insert(&mut self, id: u64, value: T) {
        match self {
            ById::Dense(v) => v[id as usize] = Some(value),
            ById::Sparse(m) => {
                m.insert(id, value);
            }
        }
    }

    pub fn get(&self, id: u64) -> Option<&T> {
        match self {
            ById::Dense(v) => v.get(usize::try_from(id).ok()?).and_then(Option::as_ref),
            ById::Sparse(m) => m.get(&id),
        }
    }
}

/// The sample type `go tool pprof` picks by default: `default_sample_type` when it names one, else the
/// last. `None` for a profile without sample types.
pub fn default_sample_index(p: &Profile) -> Option<usize> {
    if p.sample_type.is_empty() {
        return None;
    }
    if p.default_sample_type != 0 {
        let wanted = string(p, p.default_sample_type);
        if let Some(i) = p
            .sample_type
            .iter()
            .position(|t| string(p, t.r#type) == wanted)
        {
            return Some(i);
        }
    }
    Some(p.sample_type.len() - 1)
}

/// The string-table entry `i` (empty when out of range).
pub fn string(p: &Profile, i: i64) -> &str {
    usize::try_from(i)
        .ok()
        .and_then(|i| p.string_table.get(i))
        .map(String::as_str)
        .unwrap_or("")
}

/// (type, unit) of sample type `index`.
pub fn sample_type(p: &Profile, index: usize) -> Option<(String, String)> {
    p.sample_type.get(index).map(|t| {
        (
            string(p, t.r#type).to_string(),
            string(p, t.unit).to_string(),
        )
    })
}

/// The name `go tool pprof` shows for a function. pprof keeps `name` when it differs from
/// `system_name` (the symbol was demangled by whoever wrote the profile); otherwise it takes
/// `system_name` and, when that looks like demangled C++ (it has `::` or brackets), removes every
/// `(…)` and `<…>` group, so `<Vec<T> as Drop>::drop` shows as `::drop`. Mirrored here so the top
/// tables match pprof's for any profile.
pub fn display_name(name: &str, system_name: &str) -> String {
    if !name.is_empty() && system_name != name {
        return name.to_string();
    }
    let mut shown = system_name.to_string();
    if looks_like_demangled_cpp(&shown) {
        shown = remove_matching(&shown, b'(', b')');
        shown = remove_matching(&shown, b'<', b'>');
    }
    shown
}

/// pprof's test: Java `class.<init>` and Go `pkg.(*T[…]).M` names are not C++.
fn looks_like_demangled_cpp(name: &str) -> bool {
    if name.contains(".<") || name.contains("]).") {
        return false;
    }
    name.contains(['<', '>', '[', ']']) || name.contains("::")
}

/// Removes nested `open … close` groups as pprof does: a close with no open stops the removal (what
/// was removed stays removed), and an unclosed group is kept. One pass: a group is copied out and cut
/// back when it closes, so a hostile name of thousands of `()` costs its length, not its square.
fn remove_matching(name: &str, open: u8, close: u8) -> String {
    let bytes = name.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let (mut depth, mut group_start) = (0usize, 0usize);
    for (i, &b) in bytes.iter().enumerate() {
        if b == open {
            if depth == 0 {
                group_start = out.len();
            }
            depth += 1;
        } else if b == close {
            if depth == 0 {
                out.extend_from_slice(&bytes[i..]);
                break;
            }
            depth -= 1;
            if depth == 0 {
                out.truncate(group_start);
                continue;
            }
        }
        out.push(b);
    }
    String::from_utf8(out).unwrap_or_else(|_| name.to_string())
}

#[cfg(test)]
mod display_name_tests {
    use super::display_name;

    #[test]
    fn pprof_simplifies_only_undemangled_cpp_looking_names() {
        let rust = "<alloc::boxed::Box<dyn FnOnce()> as core::ops::FnOnce<()>>::call_once";
        assert_eq!(display_name(rust, rust), "::call_once");
        assert_eq!(display_name(rust, "_ZN5alloc5boxed3BoxE"), rust);
        assert_eq!(display_name("main.(*T).M", "main.(*T).M"), "main.(*T).M");
        assert_eq!(display_name("a::b<c", "a::b<c"), "a::b<c");
        assert_eq!(display_name("a::f(int)<T>x", "a::f(int)<T>x"), "a::fx");
        assert_eq!(display_name("", "x::y<z>"), "x::y");
        assert_eq!(display_name("a::b)c(d)", "a::b)c(d)"), "a::b)c(d)");
        assert_eq!(display_name("a::(x)b)c(d)", "a::(x)b)c(d)"), "a::b)c(d)");
        assert_eq!(display_name("a::f((x)(y))z(", "a::f((x)(y))z("), "a::fz(");
        // Linear in the name: 8000 groups in a 16 KiB name.
        let hostile = format!("a::{}", "()".repeat(8000));
        assert_eq!(display_name(&hostile, &hostile), "a::");
    }
}

/// Every sample as function names (leaf first, inlined frames expanded innermost first) and the value
/// at `index`. Locations without lines are named after their mapping (`[file]`) or `<unknown>`, which
/// is how pprof names them at function granularity.
pub fn weighted_stacks(p: &Profile, index: usize) -> Stacks {
    let mut out = Stacks::default();
    add_stacks(&mut out, p, index, 1);
    out
}

/// Appends the stacks of `p` (value at `index`, times `sign`: -1 for a diff's base) to `out`, their
/// names interned into its table, so two profiles' stacks can be compared by id.
pub fn add_stacks(out: &mut Stacks, p: &Profile, index: usize, sign: i64) {
    let names = &mut out.names;
    let functions: HashMap<u64, (i64, i64)> = p
        .function
        .iter()
        .map(|f| (f.id, (f.name, f.system_name)))
        .collect();
    let mappings: HashMap<u64, &str> = p
        .mapping
        .iter()
        .map(|m| (m.id, string(p, m.filename)))
        .collect();
    // Function names are interned once per function, not once per line that shows them.
    let mut function_ids: HashMap<u64, u32> = HashMap::new();
    let mut locations: ById<Vec<(u32, bool)>> = ById::for_ids(p.location.iter().map(|l| l.id));
    for l in &p.location {
        let mut frames: Vec<u32> = Vec::with_capacity(l.line.len().max(1));
        for line in &l.line {
            let shown = match functions.get(&line.function_id) {
                Some(&(name, system_name)) => {
                    *function_ids.entry(line.function_id).or_insert_with(|| {
                        names.intern(display_name(string(p, name), string(p, system_name)))
                    })
                }
                None => names.intern(String::new()),
            };
            frames.push(shown);
        }
        if frames.is_empty() {
            frames.push(names.intern(String::new()));
        }
        for f in frames.iter_mut() {
            if !names.get(*f).is_empty() {
                continue;
            }
            let file = mappings.get(&l.mapping_id).copied().unwrap_or("");
            *f = names.intern(match file.rsplit('/').next() {
                Some(base) if !base.is_empty() => format!("[{base}]"),
                _ => "<unknown>".to_string(),
            });
        }
        let last = frames.len() - 1;
        locations.insert(
            l.id,
            frames
                .into_iter()
                .enumerate()
                .map(|(i, n)| (n, i != last))
                .collect(),
        );
    }
    for s in &p.sample {
        let frames = s
            .location_id
            .iter()
            .filter_map(|id| locations.get(*id))
            .flatten()
            .copied();
        let value = s.value.get(index).copied().unwrap_or(0);
        out.push(frames, value.saturating_mul(sign));
    }
}

/// pprof's `(inline)` / `(partial-inline)` marks for the `kept` functions: a function is inline when
/// every call edge into it (between kept functions, once per sample) is an inlined call, partial
/// when only some are.
pub fn inline_labels(stacks: &Stacks, kept: &HashSet<&str>) -> HashMap<String, &'static str> {
    let kept_ids: HashSet<u32> = kept.iter().filter_map(|n| stacks.names.id(n)).collect();
    // (caller, callee) -> all occurrences inlined so far
    let mut edges: HashMap<(u32, u32), bool> = HashMap::new();
    let mut seen: HashSet<(u32, u32)> = HashSet::new();
    for s in stacks.iter() {
        if s.value == 0 {
            continue;
        }
        seen.clear();
        let mut parent: Option<u32> = None;
        for (i, &f) in s.frames.iter().enumerate().rev() {
            if !kept_ids.contains(&f) {
                continue;
            }
            if let Some(p) = parent.filter(|p| *p != f) {
                if seen.insert((p, f)) {
                    let inl = s.inlined.get(i).copied().unwrap_or(false);
                    edges.entry((p, f)).and_modify(|e| *e &= inl).or_insert(inl);
                }
            }
            parent = Some(f);
        }
    }
    let mut into: HashMap<u32, (bool, bool)> = HashMap::new();
    for ((_, callee), inl) in edges {
        let e = into.entry(callee).or_default();
        if inl {
            e.0 = true;
        } else {
            e.1 = true;
        }
    }
    into.into_iter()
        .filter_map(|(id, (inline, noinline))| {
            let name = stacks.names.get(id).to_string();
            match (inline, noinline) {
                (true, true) => Some((name, "(partial-inline)")),
                (true, false) => Some((name, "(inline)")),
                _ => None,
            }
        })
        .collect()
}

/// Sum of |value| over all samples: pprof's report total (percentages are shares of it).
pub fn total(stacks: &Stacks) -> i64 {
    stacks
        .values
        .iter()
        .map(|v| v.saturating_abs())
        .fold(0i64, i64::saturating_add)
}

/// Flat and cum per function. Flat goes to the leaf (first frame); cum counts each distinct function
/// once per sample, however often it recurs on the stack. Nodes with zero flat and cum are left out.
pub fn nodes(stacks: &Stacks) -> Vec<Node> {
    let n = stacks.names.len();
    let mut values = vec![(0i64, 0i64); n];
    // The last sample each name was counted for: cum counts a name once per sample in O(1).
    let mut counted_in = vec![usize::MAX; n];
    for (k, s) in stacks.iter().enumerate() {
        if s.value == 0 || s.frames.is_empty() {
            continue;
        }
        for &f in s.frames {
            if std::mem::replace(&mut counted_in[f as usize], k) != k {
                values[f as usize].1 = values[f as usize].1.saturating_add(s.value);
            }
        }
        let leaf = s.frames[0] as usize;
        values[leaf].0 = values[leaf].0.saturating_add(s.value);
    }
    let mut out: Vec<Node> = values
        .into_iter()
        .enumerate()
        .filter(|(_, (flat, cum))| *flat != 0 || *cum != 0)
        .map(|(id, (flat, cum))| Node {
            name: stacks.names.get(id as u32).to_string(),
            flat,
            cum,
        })
        .collect();
    sort_flat_name(&mut out);
    out
}

/// pprof's `FlatNameOrder`: |flat| descending, then name, then |cum| descending.
pub fn sort_flat_name(nodes: &mut [Node]) {
    nodes.sort_by(|a, b| {
        b.flat
            .saturating_abs()
            .cmp(&a.flat.saturating_abs())
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| b.cum.saturating_abs().cmp(&a.cum.saturating_abs()))
    });
}

/// The nodes pprof keeps (|cum| at least [`NODE_FRACTION`] of the summed flat values) and how many
/// it dropped.
pub fn trim(nodes: Vec<Node>) -> (Vec<Node>, usize) {
    let flat_sum: i64 = nodes.iter().map(|n| n.flat).sum();
    let cutoff = ((flat_sum as f64 * NODE_FRACTION) as i64).saturating_abs();
    let before = nodes.len();
    let kept: Vec<Node> = nodes
        .into_iter()
        .filter(|n| n.cum.saturating_abs() >= cutoff)
        .collect();
    let dropped = before - kept.len();
    (kept, dropped)
}

/// The smallest non-zero |flat| (or |cum| where flat is zero) among `nodes`, 0 when all are zero: the
/// input to pprof's output-unit choice.
pub fn min_node_value(nodes: &[Node]) -> i64 {
    nodes
        .iter()
        .map(|n| {
            if n.flat != 0 {
                n.flat.saturating_abs()
            } else {
                n.cum.saturating_abs()
            }
        })
        .filter(|v| *v > 0)
        .min()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stacks over one name table: each (frames leaf first, inlined marks, value).
    fn build(list: &[(&[&str], &[bool], i64)]) -> Stacks {
        let mut out = Stacks::default();
        for (frames, inlined, value) in list {
            let frames: Vec<u32> = frames
                .iter()
                .map(|f| out.names.intern(f.to_string()))
                .collect();
            let inlined = if inlined.is_empty() {
                vec![false; frames.len()]
            } else {
                inlined.to_vec()
            };
            out.push(frames.into_iter().zip(inlined), *value);
        }
        out
    }

    fn plain(list: &[(&[&str], i64)]) -> Stacks {
        let with_marks: Vec<(&[&str], &[bool], i64)> =
            list.iter().map(|(f, v)| (*f, &[][..], *v)).collect();
        build(&with_marks)
    }

    fn find<'a>(nodes: &'a [Node], name: &str) -> &'a Node {
        nodes
            .iter()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    #[test]
    fn flat_goes_to_the_leaf_and_cum_counts_once_per_sample() {
        let stacks = plain(&[
            (&["burn", "work", "main"], 30),
            (&["work", "main"], 10),
            // Recursion: `rec` appears twice but its cum counts the sample once.
            (&["rec", "rec", "main"], 5),
            (&["idle"], 0),
        ]);
        let n = nodes(&stacks);
        assert_eq!(
            find(&n, "burn"),
            &Node {
                name: "burn".into(),
                flat: 30,
                cum: 30
            }
        );
        assert_eq!(
            find(&n, "work"),
            &Node {
                name: "work".into(),
                flat: 10,
                cum: 40
            }
        );
        assert_eq!(
            find(&n, "main"),
            &Node {
                name: "main".into(),
                flat: 0,
                cum: 45
            }
        );
        assert_eq!(
            find(&n, "rec"),
            &Node {
                name: "rec".into(),
                flat: 5,
                cum: 5
            }
        );
        assert!(
            n.iter().all(|x| x.name != "idle"),
            "zero-valued samples make no node"
        );
        let names: Vec<&str> = n.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["burn", "work", "rec", "main"]);
        assert_eq!(total(&stacks), 45);
    }

    #[test]
    fn inline_marks_follow_the_call_edges() {
        // `inl` is always inlined into `caller`; `mixed` is inlined once and called once.
        let stacks = build(&[
            (&["inl", "caller", "main"], &[true, false, false], 3),
            (&["mixed", "caller", "main"], &[true, false, false], 2),
            (&["mixed", "main"], &[], 1),
        ]);
        let kept: HashSet<&str> = ["inl", "caller", "main", "mixed"].into_iter().collect();
        let labels = inline_labels(&stacks, &kept);
        assert_eq!(labels.get("inl"), Some(&"(inline)"));
        assert_eq!(labels.get("mixed"), Some(&"(partial-inline)"));
        assert_eq!(labels.get("caller"), None);
        assert_eq!(labels.get("main"), None);
    }

    #[test]
    fn ties_sort_by_name_then_cum() {
        let n = nodes(&plain(&[(&["b", "x"], 5), (&["a", "y"], 5), (&["a2"], -5)]));
        let names: Vec<&str> = n.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["a", "a2", "b", "x", "y"]);
    }

    #[test]
    fn trim_drops_nodes_under_half_a_percent() {
        let stacks = plain(&[
            (&["hot", "main"], 1000),
            (&["tiny", "main"], 4),
            (&["small", "main"], 6),
        ]);
        let (kept, dropped) = trim(nodes(&stacks));
        // cutoff = 1010 * 0.005 = 5 (truncated): 4 < 5 is dropped, 6 kept.
        assert_eq!(dropped, 1);
        assert!(kept.iter().any(|n| n.name == "small"));
        assert!(!kept.iter().any(|n| n.name == "tiny"));
        assert_eq!(min_node_value(&kept), 6);
    }
}

//! Encoding every profile kind exactly in Go's shape: gzip'd pprof protobuf, plus Go's legacy text forms.
//!
//! What it owns: the header of each kind (sample types in Go's order, period type and period, default sample
//! type), Go's heap unbiasing (`scale_heap_sample`), which labels each kind carries, and which leading
//! frames are the sampler's own (the allocator's frames are dropped from heap stacks, as Go drops
//! `runtime.*` frames). Shapes follow runtime/pprof (see the pull surface's reference notes):
//! - cpu: `samples/count`, `cpu/nanoseconds`; period `cpu/nanoseconds` = period_ns; every pair of the sample's
//!   label set as a string label;
//!   `duration_nanos`; `stack[0]` is the interrupted instruction; a comment naming the threads the
//!   sampler could not arm, when there are any.
//! - heap / allocs: `alloc_objects/count`, `alloc_space/bytes`, `inuse_objects/count`, `inuse_space/bytes`;
//!   period `space/bytes` = rate; numeric label `bytes` = block size; allocs defaults to `alloc_space`;
//!   a comment when the sampler's region is smaller than asked or absent.
//! - goroutine / threadcreate: `<name>/count`, period 1; goroutine samples carry their label set's pairs
//!   and `thread_name` (which wins over a label of that key).
//! - block / mutex: `contentions/count`, `delay/nanoseconds`, period `contentions/count` = 1.
//!
//! What it never does: sample or read the process's state; callers pass snapshots in. One exception: the
//! `debug=2` thread header's state word, read from `/proc/self/task/<tid>/{stat,wchan}` as it prints
//! (`thread_state.rs`).
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::builder::{LabelValue, LeafKind, ProfileBuilder};
use super::cpu::CpuProfile;
use super::heap::{HeapRecord, HeapSnapshot};
use super::labels;
use super::symbols::Symbolizer;
use super::threads::ThreadStack;
use super::Stack;

#[path = "thread_state.rs"]
pub(crate) mod thread_state;
use thread_state::thread_state;

/// heap (no default sample type) or allocs (default alloc_space): same data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeapView {
    /// The `heap` profile: no default sample type (pprof shows `inuse_space`).
    Heap,
    /// The `allocs` profile: default sample type `alloc_space`.
    Allocs,
}

/// Go's heap sample types, in Go's order.
pub const HEAP_SAMPLE_TYPES: [(&str, &str); 4] = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("inuse_objects", "count"),
    ("inuse_space", "bytes"),
];

/// Go's block/mutex sample types.
pub const CONTENTION_SAMPLE_TYPES: [(&str, &str); 2] =
    [("contentions", "count"), ("delay", "nanoseconds")];

/// The function name lost CPU samples are attributed to (Go uses `runtime/pprof.lostProfileEvent`).
pub const LOST_SAMPLES_FUNCTION: &str = "nl6_profile::lost_samples";

/// gzip'd pprof of a CPU window: sample types samples/count + cpu/nanoseconds, period cpu/nanoseconds,
/// the label set's pairs as string labels, duration_nanos.
pub fn cpu(profile: &CpuProfile) -> Vec<u8> {
    let mut b = ProfileBuilder::new(&[("samples", "count"), ("cpu", "nanoseconds")]);
    let period = profile.period_ns as i64;
    b.period("cpu", "nanoseconds", period)
        .time(profile.start)
        .duration(profile.duration);
    if let Some(note) = profile.coverage.note() {
        b.comment(&note);
    }
    if let Some(note) = labels::overflow_note() {
        b.comment(&note);
    }
    for s in &profile.samples {
        let labels: Vec<(&str, LabelValue)> = labels::pairs_of(s.label)
            .iter()
            .map(|(k, v)| (*k, LabelValue::Str(v.to_string())))
            .collect();
        let count = s.count as i64;
        b.sample(
            &s.stack,
            LeafKind::ExactLeaf,
            vec![count, count * period],
            &labels,
        );
    }
    if profile.lost > 0 {
        let loc = b.synthetic_location(LOST_SAMPLES_FUNCTION);
        let lost = profile.lost as i64;
        b.sample_at(vec![loc], vec![lost, lost * period], &[]);
    }
    b.gzip()
}

/// Go's `scaleHeapSample`: unbias (count, size) sampled at `rate` by 1 / (1 − e^(−avg/rate)), truncating.
pub(crate) fn scale_heap_sample(count: i64, size: i64, rate: i64) -> (i64, i64) {
    if count == 0 || size == 0 {
        return (0, 0);
    }
    if rate <= 1 {
        return (count, size);
    }
    let avg = size as f64 / count as f64;
    let scale = 1.0 / (1.0 - (-avg / rate as f64).exp());
    ((count as f64 * scale) as i64, (size as f64 * scale) as i64)
}

/// The four scaled values of one record: alloc objects/bytes, inuse objects/bytes.
pub(crate) fn heap_values(r: &HeapRecord, rate: usize) -> [i64; 4] {
    let rate = rate as i64;
    let (ao, ab) = scale_heap_sample(r.alloc_objects as i64, r.alloc_bytes as i64, rate);
    let inuse_objects = r.alloc_objects.saturating_sub(r.free_objects) as i64;
    let inuse_bytes = r.alloc_bytes.saturating_sub(r.free_bytes) as i64;
    let (io, ib) = scale_heap_sample(inuse_objects, inuse_bytes, rate);
    [ao, ab, io, ib]
}

/// A builder with Go's heap header for `view`, and the sampler's `note` (a region shortfall) as a comment.
pub(crate) fn heap_builder(rate: usize, view: HeapView, note: Option<&str>) -> ProfileBuilder {
    let mut b = ProfileBuilder::new(&HEAP_SAMPLE_TYPES);
    b.period("space", "bytes", rate as i64);
    if let Some(note) = note {
        b.comment(note);
    }
    if view == HeapView::Allocs {
        b.default_sample_type("alloc_space");
    }
    b
}

/// Adds one heap sample (stack trimmed of the allocator's frames) with its `bytes` label.
pub(crate) fn add_heap_sample(
    b: &mut ProfileBuilder,
    stack: &[u64],
    block_size: u64,
    values: Vec<i64>,
) {
    let (stack, skip) = trim_allocator_frames(b, stack);
    let labels: Vec<(&str, LabelValue)> = if block_size != 0 {
        vec![("bytes", LabelValue::Num(block_size as i64))]
    } else {
        Vec::new()
    };
    b.sample_without(stack, LeafKind::AllReturns, skip, values, &labels);
}

/// gzip'd pprof of the heap in Go's shape (four sample types, space/bytes period, `bytes` numeric label).
pub fn heap(snapshot: &HeapSnapshot, view: HeapView) -> Vec<u8> {
    let mut b = heap_builder(snapshot.rate, view, snapshot.note.as_deref());
    for r in &snapshot.records {
        let block = r.alloc_bytes.checked_div(r.alloc_objects).unwrap_or(0);
        add_heap_sample(
            &mut b,
            &r.stack,
            block,
            heap_values(r, snapshot.rate).to_vec(),
        );
    }
    b.gzip()
}

/// Whether a function belongs to the allocation path itself (the analog of Go's leading `runtime.*`).
pub(crate) fn is_allocator_frame(name: &str) -> bool {
    const PREFIXES: [&str; 10] = [
        "__rustc::",
        "nl6_profile::heap::",
        "<nl6_profile::heap::",
        "__rust_",
        "__rg_",
        "__rdl_",
        "alloc::alloc::",
        "<alloc::alloc::Global",
        "alloc::raw_vec::",
        "<alloc::raw_vec::",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Whether a frame inlined into an allocation site is the standard library's allocating code (the
/// allocator's, or a collection's of the `alloc` crate: `Vec::push`, `String::from`, `Box::new`), which a
/// build without DWARF shows as the site itself.
fn is_inlined_allocation_frame(name: &str) -> bool {
    is_allocator_frame(name)
        || name.starts_with("alloc::")
        || name.starts_with("<alloc::")
        || (name.starts_with('<') && name.contains(" as alloc::"))
}

/// Drops leading allocator frames (by the name of the function containing each return address), and
/// counts the allocating frames inlined into the first function kept (a build with DWARF names them: the
/// sampler, `__rust_alloc`, `Vec::push` inlined into the allocation site), which its Location leaves out,
/// so the leaf is the site a build without DWARF names. Keeps the whole stack if nothing would remain, as
/// Go does.
fn trim_allocator_frames<'s>(b: &ProfileBuilder, stack: &'s [u64]) -> (&'s [u64], usize) {
    let mut inlined = 0;
    let skip = stack
        .iter()
        .take_while(|&&a| {
            let Some(r) = b.resolve(a, true) else {
                return false;
            };
            let outer = r.frames.last().is_some_and(|f| is_allocator_frame(&f.name));
            if !outer {
                inlined = r
                    .frames
                    .iter()
                    .take_while(|f| is_inlined_allocation_frame(&f.name))
                    .count();
            }
            outer
        })
        .count();
    if skip == stack.len() {
        (stack, 0)
    } else {
        (&stack[skip..], inlined)
    }
}

/// The comment of a thread profile some of whose stacks are missing: how many, why, and which threads.
fn missing_stacks_note(threads: &[ThreadStack]) -> Option<String> {
    let mut by_reason: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for t in threads.iter().filter(|t| t.stack.is_empty()) {
        let why = t
            .missing
            .map_or_else(|| "none was captured".to_string(), |m| m.to_string());
        by_reason.entry(why).or_default().push(&t.name);
    }
    if by_reason.is_empty() {
        return None;
    }
    let n: usize = by_reason.values().map(Vec::len).sum();
    let parts: Vec<String> = by_reason
        .iter()
        .map(|(why, names)| format!("{why}: {}", names.join(", ")))
        .collect();
    Some(format!(
        "{n} of {} threads have no stack: {}",
        threads.len(),
        parts.join("; ")
    ))
}

/// gzip'd goroutine/count profile, one sample per distinct (stack, label set, thread name); a comment
/// names the threads whose stack is missing and why.
pub fn goroutine(threads: &[ThreadStack]) -> Vec<u8> {
    let mut groups: BTreeMap<(&Stack, u16, &str), i64> = BTreeMap::new();
    for t in threads {
        *groups
            .entry((&t.stack, t.label, t.name.as_str()))
            .or_default() += 1;
    }
    let mut b = ProfileBuilder::new(&[("goroutine", "count")]);
    b.period("goroutine", "count", 1);
    if let Some(note) = missing_stacks_note(threads) {
        b.comment(&note);
    }
    if let Some(note) = labels::overflow_note() {
        b.comment(&note);
    }
    for ((stack, label, name), count) in groups {
        let mut labels: Vec<(&str, LabelValue)> = labels::pairs_of(label)
            .iter()
            .filter(|(k, _)| *k != "thread_name")
            .map(|(k, v)| (*k, LabelValue::Str(v.to_string())))
            .collect();
        labels.push(("thread_name", LabelValue::Str(name.to_string())));
        b.sample(stack, LeafKind::ExactLeaf, vec![count], &labels);
    }
    b.gzip()
}

/// gzip'd threadcreate/count profile (one sample per distinct spawning stack).
pub fn threadcreate(stacks: &[Stack]) -> Vec<u8> {
    let mut groups: BTreeMap<&Stack, i64> = BTreeMap::new();
    for s in stacks {
        *groups.entry(s).or_default() += 1;
    }
    let mut b = ProfileBuilder::new(&[("threadcreate", "count")]);
    b.period("threadcreate", "count", 1);
    for (stack, count) in groups {
        b.sample(stack, LeafKind::AllReturns, vec![count], &[]);
    }
    b.gzip()
}

/// A builder with Go's block/mutex header and no samples.
pub(crate) fn contention_builder() -> ProfileBuilder {
    let mut b = ProfileBuilder::new(&CONTENTION_SAMPLE_TYPES);
    b.period("contentions", "count", 1);
    b
}

/// gzip'd empty-but-valid block or mutex profile (contentions/count period, contentions + delay types).
pub fn contention_empty() -> Vec<u8> {
    contention_builder().gzip()
}

// ---------------------------------------------------------------------------------------------------------
// Go's legacy text forms.

/// Go's `debug=1` text (counts by stack) or `debug=2` text (every thread).
pub fn goroutine_text(threads: &[ThreadStack], debug: u32) -> String {
    if debug >= 2 {
        return goroutine_dump(threads);
    }
    let mut groups: BTreeMap<(String, &Stack), i64> = BTreeMap::new();
    for t in threads {
        let mut labels: Vec<(&str, &str)> = labels::pairs_of(t.label)
            .iter()
            .filter(|(k, _)| *k != "thread_name")
            .copied()
            .collect();
        labels.push(("thread_name", t.name.as_str()));
        *groups.entry((label_string(&labels), &t.stack)).or_default() += 1;
    }
    let mut records: Vec<((String, &Stack), i64)> = groups.into_iter().collect();
    // Go sorts by count descending, then by key.
    records.sort_by(|a, b| {
        b.1.cmp(&a.1)
            .then_with(|| record_key(&a.0).cmp(&record_key(&b.0)))
    });
    let mut out = format!("goroutine profile: total {}\n", threads.len());
    for ((labels, stack), count) in records {
        let _ = writeln!(out, "{count} @{}", addr_list(stack));
        if !labels.is_empty() {
            let _ = writeln!(out, "# labels: {labels}");
        }
        out.push_str(&frame_lines(stack, LeafKind::ExactLeaf, 0));
        out.push('\n');
    }
    out
}

fn record_key(k: &(String, &Stack)) -> String {
    format!("{}{}", addr_list(k.1), k.0)
}

/// Go's label-set text: `{"k":"v", "k2":"v2"}`, sorted.
fn label_string(labels: &[(&str, &str)]) -> String {
    let mut parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v)))
        .collect();
    if parts.is_empty() {
        return String::new();
    }
    parts.sort();
    format!("{{{}}}", parts.join(", "))
}

/// Go's `strconv.Quote` for label text: quotes, backslash and control characters escaped.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn addr_list(stack: &[u64]) -> String {
    stack.iter().map(|a| format!(" {a:#x}")).collect()
}

/// `#<TAB>pc<TAB>name+off<TAB>file:line` lines, aligned as Go's tabwriter (tab padding, tab width 8); the
/// leaf's `leaf_skip` innermost inlined frames are left out.
fn frame_lines(stack: &[u64], leaf: LeafKind, leaf_skip: usize) -> String {
    let sym = Symbolizer::global();
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (i, &addr) in stack.iter().enumerate() {
        let is_return = !(i == 0 && leaf == LeafKind::ExactLeaf);
        let pc = if is_return {
            addr.saturating_sub(1)
        } else {
            addr
        };
        match sym.and_then(|s| s.resolve(pc)) {
            Some(r) => {
                let skip = if i == 0 {
                    leaf_skip.min(r.frames.len() - 1)
                } else {
                    0
                };
                for f in &r.frames[skip..] {
                    rows.push(vec![
                        "#".into(),
                        format!("{pc:#x}"),
                        format!("{}+{:#x}", f.name, pc - r.entry),
                        format!("{}:{}", f.file.as_deref().unwrap_or("?"), f.line),
                    ]);
                }
            }
            None => rows.push(vec!["#".into(), format!("{pc:#x}")]),
        }
    }
    tabwrite(&rows)
}

/// Go's text/tabwriter with minwidth 1, tabwidth 8, padding 1, pad character TAB: every cell but a line's
/// last is padded with tabs to its column's width rounded up to a multiple of 8. Columns are aligned across
/// consecutive lines that have them.
fn tabwrite(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = String::new();
    let mut start = 0;
    while start < rows.len() {
        // A block: consecutive rows with the same number of cells (a simplification of Go's column blocks
        // that gives the same output for frame lines).
        let n = rows[start].len();
        let end = start + rows[start..].iter().take_while(|r| r.len() == n).count();
        let mut widths = vec![0usize; columns];
        for r in &rows[start..end] {
            for (c, cell) in r.iter().enumerate().take(n.saturating_sub(1)) {
                widths[c] = widths[c].max(cell.len() + 1);
            }
        }
        for r in &rows[start..end] {
            for (c, cell) in r.iter().enumerate() {
                out.push_str(cell);
                if c + 1 < n {
                    let cellw = widths[c].div_ceil(8) * 8;
                    out.push_str(&"\t".repeat((cellw - cell.len()).div_ceil(8)));
                }
            }
            out.push('\n');
        }
        start = end;
    }
    out
}

/// Go's `debug=2`: one panic-style block per thread.
fn goroutine_dump(threads: &[ThreadStack]) -> String {
    let sym = Symbolizer::global();
    let mut sorted: Vec<&ThreadStack> = threads.iter().collect();
    sorted.sort_by_key(|t| t.tid);
    let mut out = String::new();
    for t in sorted {
        let name = t.name.replace([']', '"', '\n'], "_");
        let (state, wchan) = thread_state(t.tid);
        let wchan = wchan
            .map(|w| format!(", wchan \"{w}\""))
            .unwrap_or_default();
        let pairs: String = labels::pairs_of(t.label)
            .iter()
            .map(|(k, v)| {
                format!(
                    ", {} \"{}\"",
                    k.replace([']', '"', '\n'], "_"),
                    v.replace([']', '"', '\n'], "_")
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "goroutine {} [{state}, thread \"{name}\"{pairs}{wchan}]:",
            t.tid
        );
        if t.stack.is_empty() {
            let why = t
                .missing
                .map_or_else(|| "none was captured".to_string(), |m| m.to_string());
            let _ = writeln!(out, "(no stack: {why})");
        }
        for (i, &addr) in t.stack.iter().enumerate() {
            let pc = if i == 0 { addr } else { addr.saturating_sub(1) };
            match sym.and_then(|s| s.resolve(pc)) {
                Some(r) => {
                    let last = r.frames.len() - 1;
                    for (j, f) in r.frames.iter().enumerate() {
                        let file = f.file.as_deref().unwrap_or("?");
                        if j == last {
                            let _ = writeln!(
                                out,
                                "{}(...)\n\t{}:{} +{:#x}",
                                f.name,
                                file,
                                f.line,
                                pc - r.entry
                            );
                        } else {
                            let _ = writeln!(out, "{}(...)\n\t{}:{}", f.name, file, f.line);
                        }
                    }
                }
                None => {
                    let _ = writeln!(out, "?(...)\n\t?:0 pc={pc:#x}");
                }
            }
        }
        out.push('\n');
    }
    out
}

/// Go's legacy `heap?debug=1` text: raw (unscaled) counters, sorted by in-use bytes.
pub fn heap_text(snapshot: &HeapSnapshot) -> String {
    let mut records: Vec<&HeapRecord> = snapshot.records.iter().collect();
    let inuse = |r: &HeapRecord| r.alloc_bytes.saturating_sub(r.free_bytes);
    records.sort_by_key(|r| std::cmp::Reverse(inuse(r)));
    let (mut io, mut ib, mut ao, mut ab) = (0u64, 0u64, 0u64, 0u64);
    for r in &records {
        io += r.alloc_objects.saturating_sub(r.free_objects);
        ib += inuse(r);
        ao += r.alloc_objects;
        ab += r.alloc_bytes;
    }
    if ab == ib && ab != 0 {
        // Newer Go does this so pprof never mistakes the header for a two-column profile.
        ab += 1;
    }
    let mut out = format!(
        "heap profile: {io}: {ib} [{ao}: {ab}] @ heap/{}\n",
        2 * snapshot.rate
    );
    let sym = Symbolizer::global();
    for r in records {
        let (stack, skip) = match sym {
            Some(_) => {
                let b = ProfileBuilder::new(&[]);
                let (stack, skip) = trim_allocator_frames(&b, &r.stack);
                (stack.to_vec(), skip)
            }
            None => (r.stack.clone(), 0),
        };
        let _ = writeln!(
            out,
            "{}: {} [{}: {}] @{}",
            r.alloc_objects.saturating_sub(r.free_objects),
            inuse(r),
            r.alloc_objects,
            r.alloc_bytes,
            addr_list(&stack)
        );
        out.push_str(&frame_lines(&stack, LeafKind::AllReturns, skip));
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "\n# runtime.MemStats\n# HeapProfileRate = {}",
        snapshot.rate
    );
    out
}

#[cfg(test)]
mod tests;

//! Top tables as `go tool pprof -top` prints them (header labels, `flat flat% sum% cum cum%` columns,
//! one function a row), for one profile and for the difference of two (`-diff_base`).
//!
//! Takes decoded profiles, returns text; never reads files. Every name and label from the profile is
//! escaped for a terminal ([`nl6_text::logtext::terminal`]) as the text is rendered: a hostile profile's
//! ESC, BEL, CR or bidi controls reach neither `nl6 report`'s terminal nor collect's text files raw.
#![forbid(unsafe_code)]

use std::fmt::Write as _;

use super::nodes::{self, Node, Stacks};
use super::units::{percentage, scale, scaled_label, select_output_unit, time_label};
use nl6_profile::proto::Profile;
use nl6_text::logtext::terminal;

/// What a table shows when a profile has no samples of the chosen type.
pub const NO_SAMPLES: &str = "no samples";

/// A computed table: the labels above the columns, the rows, the report total and the output unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub labels: Vec<String>,
    pub rows: Vec<Node>,
    pub total: i64,
    pub sample_unit: String,
    pub output_unit: String,
    /// `(inline)` / `(partial-inline)` marks by function name.
    pub inline: std::collections::HashMap<String, &'static str>,
}

impl Table {
    /// `value` in the table's output unit (`1.20s`, `259.04MB`, `42`).
    pub fn format_value(&self, value: i64) -> String {
        scaled_label(value, &self.sample_unit, &self.output_unit)
    }

    /// The table as text: labels, column header, rows; `no samples` instead of rows when empty.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for l in &self.labels {
            out.push_str(&terminal(l));
            out.push('\n');
        }
        if self.rows.is_empty() && self.total == 0 {
            out.push_str(NO_SAMPLES);
            out.push('\n');
            return out;
        }
        let _ = writeln!(
            out,
            "{:>10} {:>5}% {:>5}% {:>10} {:>5}%",
            "flat", "flat", "sum", "cum", "cum"
        );
        let mut flat_sum = 0i64;
        for n in &self.rows {
            flat_sum += n.flat;
            let mark = self
                .inline
                .get(&n.name)
                .map(|m| format!(" {m}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{:>10} {} {} {:>10} {}  {}{mark}",
                self.format_value(n.flat),
                percentage(n.flat, self.total),
                percentage(flat_sum, self.total),
                self.format_value(n.cum),
                percentage(n.cum, self.total),
                terminal(&n.name)
            );
        }
        out
    }
}

/// The top table `go tool pprof -top` prints for sample type `sample_index` of `p` (use
/// [`nodes::default_sample_index`] for pprof's default). A profile without samples, or an index out of
/// range, gives a table that says so.
pub fn top_table(p: &Profile, sample_index: usize) -> String {
    match table(p, sample_index) {
        Some(t) => t.render(),
        None => format!("{NO_SAMPLES}: the profile has no sample type {sample_index}\n"),
    }
}

/// The computed top table of `p` for `sample_index`; `None` when there is no such sample type.
pub fn table(p: &Profile, sample_index: usize) -> Option<Table> {
    let (stype, unit) = nodes::sample_type(p, sample_index)?;
    let stacks = nodes::weighted_stacks(p, sample_index);
    let total = nodes::total(&stacks);
    let mut labels = profile_labels(p);
    labels.push(format!("Type: {stype}"));
    if p.time_nanos != 0 {
        labels.push(format!("Time: {}", time_label(p.time_nanos)));
    }
    let mut t = build(labels, &stacks, total, &unit);
    if p.duration_nanos != 0 {
        let duration = scaled_label(p.duration_nanos, "nanoseconds", "auto");
        let (total_nanos, total_unit) = scale(total, &unit, "nanoseconds");
        let ratio = if total_unit == "ns" && total_nanos != 0.0 {
            format!("({})", percentage(total_nanos as i64, p.duration_nanos))
        } else {
            String::new()
        };
        let line = format!(
            "Duration: {duration}, Total samples = {} {ratio}",
            t.format_value(total)
        );
        // pprof puts Duration right after Type/Time, before the "Showing" line.
        let at = t
            .labels
            .iter()
            .position(|l| l.starts_with("Showing nodes"))
            .unwrap_or(t.labels.len());
        t.labels.insert(at, line);
    }
    Some(t)
}

/// `File:`, `Build ID:` and comment labels, as pprof prints them above every report.
fn profile_labels(p: &Profile) -> Vec<String> {
    let mut labels = Vec::new();
    if let Some(m) = p.mapping.first() {
        let file = nodes::string(p, m.filename);
        if !file.is_empty() {
            labels.push(format!("File: {}", file.rsplit('/').next().unwrap_or(file)));
        }
        let build_id = nodes::string(p, m.build_id);
        if !build_id.is_empty() {
            labels.push(format!("Build ID: {build_id}"));
        }
    }
    for &c in &p.comment {
        let c = nodes::string(p, c);
        if !c.starts_with('#') {
            labels.push(c.to_string());
        }
    }
    labels
}

/// Trims, picks the unit and appends the `Showing nodes…` and `Dropped…` labels.
fn build(mut labels: Vec<String>, stacks: &Stacks, total: i64, sample_unit: &str) -> Table {
    let (rows, dropped) = nodes::trim(nodes::nodes(stacks));
    let output_unit = if rows.is_empty() {
        sample_unit.to_string()
    } else {
        select_output_unit(nodes::min_node_value(&rows), total, sample_unit)
    };
    let kept: std::collections::HashSet<&str> = rows.iter().map(|n| n.name.as_str()).collect();
    let inline = nodes::inline_labels(stacks, &kept);
    let mut t = Table {
        labels: Vec::new(),
        rows,
        total,
        sample_unit: sample_unit.to_string(),
        output_unit,
        inline,
    };
    let flat_sum: i64 = t.rows.iter().map(|n| n.flat).sum();
    labels.push(format!(
        "Showing nodes accounting for {}, {} of {} total",
        t.format_value(flat_sum),
        percentage(flat_sum, total).trim(),
        t.format_value(total)
    ));
    if total != 0 && dropped > 0 {
        let cut = ((total as f64 * nodes::NODE_FRACTION) as i64).saturating_abs();
        let noun = if dropped > 1 { "nodes" } else { "node" };
        labels.push(format!(
            "Dropped {dropped} {noun} (cum <= {})",
            t.format_value(cut)
        ));
    }
    t.labels = labels;
    t
}

/// Why two profiles cannot be compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffError {
    /// One of the profiles has no sample type at the chosen index.
    NoSampleType(usize),
    /// The chosen sample types differ (`cpu/nanoseconds` against `inuse_space/bytes`).
    Incompatible { base: String, new: String },
    /// The differential flame graph would be too large to draw.
    TooLarge(TooLargeToDraw),
}

/// A flame graph too large to draw: the MiB of folded stacks it would need, past the limit (MiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLargeToDraw {
    pub mib: usize,
    pub limit_mib: usize,
}

impl std::fmt::Display for TooLargeToDraw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the flame graph would need {} MiB of folded stacks; the limit is {} MiB",
            self.mib, self.limit_mib
        )
    }
}

impl std::error::Error for TooLargeToDraw {}

impl std::fmt::Display for DiffError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DiffError::NoSampleType(i) => write!(f, "diff: a profile has no sample type {i}"),
            DiffError::Incompatible { base, new } => {
                write!(f, "diff: incompatible sample types: base {base}, new {new}")
            }
            DiffError::TooLarge(m) => write!(f, "diff: {m}"),
        }
    }
}

impl std::error::Error for DiffError {}

/// The merged stacks of a diff, as pprof's `-diff_base` builds them: base values negated, new values
/// as they are, over one name table. Returns the stacks, the base total (percentages are shares of
/// it), the sample type and unit.
pub fn diff_stacks(
    base: &Profile,
    new: &Profile,
    sample_index: usize,
) -> Result<(Stacks, i64, String, String), DiffError> {
    let (bt, bu) =
        nodes::sample_type(base, sample_index).ok_or(DiffError::NoSampleType(sample_index))?;
    let (nt, nu) =
        nodes::sample_type(new, sample_index).ok_or(DiffError::NoSampleType(sample_index))?;
    if bt.trim_end_matches('s') != nt.trim_end_matches('s') || bu != nu {
        return Err(DiffError::Incompatible {
            base: format!("{bt}/{bu}"),
            new: format!("{nt}/{nu}"),
        });
    }
    let mut merged = nodes::weighted_stacks(new, sample_index);
    let new_total = nodes::total(&merged);
    let base_total = base
        .sample
        .iter()
        .map(|s| {
            s.value
                .get(sample_index)
                .copied()
                .unwrap_or(0)
                .saturating_abs()
        })
        .fold(0i64, i64::saturating_add);
    nodes::add_stacks(&mut merged, base, sample_index, -1);
    // pprof falls back to the merged total when the base is empty.
    let total = if base_total > 0 {
        base_total
    } else {
        new_total
    };
    Ok((merged, total, nt, nu))
}

/// Per-function change from `base` to `new` for every function in either profile (zero changes
/// included), sorted by |flat change| then name: the raw values behind [`diff_table`].
pub fn diff_rows(
    base: &Profile,
    new: &Profile,
    sample_index: usize,
) -> Result<Vec<Node>, DiffError> {
    let (stacks, _, _, _) = diff_stacks(base, new, sample_index)?;
    // Every name on some stack gets a row (zero when unchanged); ids, so each name is compared once.
    let mut on_a_stack = vec![false; stacks.names.len()];
    for s in stacks.iter() {
        for &f in s.frames {
            on_a_stack[f as usize] = true;
        }
    }
    let changed = nodes::nodes(&stacks);
    for n in &changed {
        if let Some(id) = stacks.names.id(&n.name) {
            on_a_stack[id as usize] = false;
        }
    }
    let mut rows: Vec<Node> = on_a_stack
        .iter()
        .enumerate()
        .filter(|(_, on)| **on)
        .map(|(id, _)| Node {
            name: stacks.names.get(id as u32).to_string(),
            flat: 0,
            cum: 0,
        })
        .chain(changed)
        .collect();
    nodes::sort_flat_name(&mut rows);
    Ok(rows)
}

/// The diff as `go tool pprof -diff_base=BASE -top NEW` prints it: flat and cum are changes (negative
/// where `new` spends less), percentages are shares of the base total, rows sorted by |flat change|.
/// Functions whose values did not change are left out, as pprof does; `no change` when nothing did.
pub fn diff_table(base: &Profile, new: &Profile, sample_index: usize) -> Result<String, DiffError> {
    let (stacks, total, stype, unit) = diff_stacks(base, new, sample_index)?;
    let labels = vec![
        format!("Type: {stype}"),
        format!("Diff: base total {}", scaled_label(total, &unit, "auto")),
    ];
    let t = build(labels, &stacks, total, &unit);
    if t.rows.is_empty() {
        let labels: Vec<String> = t.labels.iter().map(|l| terminal(l)).collect();
        let mut out = labels.join("\n");
        out.push_str("\nno change\n");
        return Ok(out);
    }
    Ok(t.render())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testprofile::{cpu_profile, heap_profile};

    #[test]
    fn cpu_top_table_math_and_format() {
        // 126 + 62 + 3 samples at 10ms: burnCPU 1.26s flat.
        let p = cpu_profile(&[
            (&["main.burnCPU", "main.main"], 126),
            (&["runtime.memclr", "main.alloc", "main.main"], 62),
            (&["runtime.tgkill"], 1),
        ]);
        let text = top_table(&p, 1);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.contains(&"Type: cpu"), "{text}");
        assert!(
            lines.contains(&"Showing nodes accounting for 1.89s, 100% of 1.89s total"),
            "{text}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("Duration: 2s, Total samples = 1.89s (94.50%)")),
            "{text}"
        );
        let header = lines
            .iter()
            .position(|l| l.trim_start().starts_with("flat"))
            .expect("header");
        assert_eq!(lines[header], "      flat  flat%   sum%        cum   cum%");
        assert_eq!(
            lines[header + 1],
            "     1.26s 66.67% 66.67%      1.26s 66.67%  main.burnCPU"
        );
        assert_eq!(
            lines[header + 2],
            "     0.62s 32.80% 99.47%      0.62s 32.80%  runtime.memclr"
        );
        assert_eq!(
            lines[header + 3],
            "     0.01s  0.53%   100%      0.01s  0.53%  runtime.tgkill"
        );
        assert_eq!(
            lines[header + 4],
            "         0     0%   100%      0.62s 32.80%  main.alloc"
        );
        assert_eq!(
            lines[header + 5],
            "         0     0%   100%      1.88s 99.47%  main.main"
        );
        // The sample-count column (index 0) is plain numbers.
        let counts = top_table(&p, 0);
        assert!(
            counts.contains("       126 66.67% 66.67%        126 66.67%  main.burnCPU"),
            "{counts}"
        );
    }

    #[test]
    fn heap_default_is_inuse_space_in_mb() {
        let p = heap_profile(&[
            (&["main.allocateBlocks", "main.main"], 271_622_144),
            (&["net/http.serve"], 1_740_000),
        ]);
        assert_eq!(nodes::default_sample_index(&p), Some(3));
        let text = top_table(&p, 3);
        assert!(text.contains("Type: inuse_space"), "{text}");
        assert!(
            text.contains("  259.04MB 99.36% 99.36%   259.04MB 99.36%  main.allocateBlocks"),
            "{text}"
        );
        assert!(
            !text.contains("Duration"),
            "heap profiles carry no duration: {text}"
        );
    }

    #[test]
    fn empty_profile_says_no_samples() {
        let p = cpu_profile(&[]);
        let text = top_table(&p, 1);
        assert!(
            text.contains("Showing nodes accounting for 0, 0% of 0 total"),
            "{text}"
        );
        assert!(text.trim_end().ends_with(NO_SAMPLES), "{text}");
        assert!(top_table(&p, 9).starts_with(NO_SAMPLES));
    }

    #[test]
    fn diff_against_itself_is_all_zeros() {
        let p = cpu_profile(&[(&["a", "main"], 10), (&["b", "main"], 5)]);
        let rows = diff_rows(&p, &p, 1).unwrap();
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|r| r.flat == 0 && r.cum == 0), "{rows:?}");
        let text = diff_table(&p, &p, 1).unwrap();
        assert!(text.contains("no change"), "{text}");
    }

    #[test]
    fn diff_puts_the_added_hot_function_first() {
        let base = cpu_profile(&[(&["a", "main"], 10), (&["b", "main"], 5)]);
        let new = cpu_profile(&[
            (&["a", "main"], 8),
            (&["b", "main"], 5),
            (&["hot", "main"], 40),
        ]);
        let rows = diff_rows(&base, &new, 1).unwrap();
        assert_eq!(
            rows[0],
            Node {
                name: "hot".into(),
                flat: 400_000_000,
                cum: 400_000_000
            }
        );
        assert_eq!(
            rows[1],
            Node {
                name: "a".into(),
                flat: -20_000_000,
                cum: -20_000_000
            }
        );
        let main = rows.iter().find(|r| r.name == "main").unwrap();
        assert_eq!(main.cum, 380_000_000);
        let text = diff_table(&base, &new, 1).unwrap();
        let first = text
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("flat"))
            .nth(1)
            .unwrap();
        // Base total 150ms; the smallest change (20ms) picks milliseconds.
        assert_eq!(first, "     400ms 266.67% 266.67%      400ms 266.67%  hot");
        assert!(
            text.contains("     -20ms 13.33% 253.33%      -20ms 13.33%  a"),
            "{text}"
        );
    }

    #[test]
    fn diff_refuses_incompatible_types() {
        let cpu = cpu_profile(&[(&["a"], 1)]);
        let heap = heap_profile(&[(&["a"], 1)]);
        assert!(matches!(
            diff_rows(&cpu, &heap, 1),
            Err(DiffError::Incompatible { .. })
        ));
        assert_eq!(diff_rows(&cpu, &cpu, 7), Err(DiffError::NoSampleType(7)));
    }
}

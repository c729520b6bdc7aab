//! Flame graph SVGs of a profile and differential flame graphs of two, drawn by the `inferno` crate from
//! folded stacks (`root;…;leaf value`). An empty profile gets a small SVG that says "no samples" (inferno
//! would draw an error banner instead).
//!
//! Takes decoded profiles, returns SVG bytes; never reads or writes files.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use inferno::flamegraph::{self, color::BasicPalette, color::Palette};

use super::nodes::{self, WeightedStack};
use super::top::{DiffError, NO_SAMPLES};
use super::units::scaled_label;
use crate::profiling::proto::Profile;

/// Folded stacks (`root;…;leaf count`, one line per distinct stack, sorted) of the positive values
/// of sample type `index`. `;` inside a function name becomes `:` so frames stay separable.
pub fn folded(stacks: &[WeightedStack]) -> Vec<String> {
    let mut merged: BTreeMap<String, i64> = BTreeMap::new();
    for s in stacks
        .iter()
        .filter(|s| s.value > 0 && !s.frames.is_empty())
    {
        let key = s
            .frames
            .iter()
            .rev()
            .map(|f| f.replace(';', ":"))
            .collect::<Vec<_>>()
            .join(";");
        *merged.entry(key).or_default() += s.value;
    }
    merged
        .into_iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect()
}

/// A flame graph of `p`'s default sample type (see [`nodes::default_sample_index`]).
pub fn flamegraph_svg(p: &Profile, title: &str) -> Vec<u8> {
    match nodes::default_sample_index(p) {
        Some(i) => flamegraph_svg_for(p, i, title),
        None => no_samples_svg(title),
    }
}

/// A flame graph of sample type `index` of `p`; "no samples" when it has none.
pub fn flamegraph_svg_for(p: &Profile, index: usize, title: &str) -> Vec<u8> {
    let Some((stype, unit)) = nodes::sample_type(p, index) else {
        return no_samples_svg(title);
    };
    let stacks = nodes::weighted_stacks(p, index);
    let lines = folded(&stacks);
    if lines.is_empty() {
        return no_samples_svg(title);
    }
    let total = nodes::total(&stacks);
    let mut opt = options(title, &unit);
    opt.subtitle = Some(format!(
        "{stype}: {} total",
        scaled_label(total, &unit, "auto")
    ));
    render(&mut opt, lines.iter().map(String::as_str)).unwrap_or_else(|_| no_samples_svg(title))
}

/// A differential flame graph (inferno's red = grew, blue = shrank) from `base` to `new` for sample
/// type `index`; "no samples" when both are empty.
pub fn diff_flamegraph_svg(
    base: &Profile,
    new: &Profile,
    index: usize,
    title: &str,
) -> Result<Vec<u8>, DiffError> {
    let (_, _, stype, unit) = super::top::diff_stacks(base, new, index)?;
    let before = folded(&nodes::weighted_stacks(base, index)).join("\n");
    let after = folded(&nodes::weighted_stacks(new, index)).join("\n");
    if before.is_empty() && after.is_empty() {
        return Ok(no_samples_svg(title));
    }
    let mut merged = Vec::new();
    let diff_opt = inferno::differential::Options::default();
    if inferno::differential::from_readers(
        diff_opt,
        before.as_bytes(),
        after.as_bytes(),
        &mut merged,
    )
    .is_err()
    {
        return Ok(no_samples_svg(title));
    }
    let merged = String::from_utf8_lossy(&merged).into_owned();
    let mut opt = options(title, &unit);
    opt.subtitle = Some(format!(
        "{stype}: red grew, blue shrank (widths are the new profile)"
    ));
    Ok(render(&mut opt, merged.lines()).unwrap_or_else(|_| no_samples_svg(title)))
}

fn options<'a>(title: &str, unit: &str) -> flamegraph::Options<'a> {
    let mut opt = flamegraph::Options::default();
    opt.title = title.to_string();
    opt.count_name = if unit.is_empty() {
        "samples".to_string()
    } else {
        unit.to_string()
    };
    opt.hash = true;
    opt.deterministic = true;
    if unit.eq_ignore_ascii_case("bytes") {
        opt.colors = Palette::Basic(BasicPalette::Mem);
    }
    opt
}

fn render<'a>(
    opt: &mut flamegraph::Options<'_>,
    lines: impl IntoIterator<Item = &'a str>,
) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    flamegraph::from_lines(opt, lines, &mut out)?;
    Ok(out)
}

/// A small valid SVG with the title and the words "no samples".
pub fn no_samples_svg(title: &str) -> Vec<u8> {
    format!(
        "<?xml version=\"1.0\" standalone=\"no\"?>\n\
         <svg version=\"1.1\" width=\"600\" height=\"80\" xmlns=\"http://www.w3.org/2000/svg\">\n\
         <text x=\"300\" y=\"30\" text-anchor=\"middle\" font-family=\"Verdana\" font-size=\"16\">{}</text>\n\
         <text x=\"300\" y=\"60\" text-anchor=\"middle\" font-family=\"Verdana\" font-size=\"14\">{NO_SAMPLES}</text>\n\
         </svg>\n",
        xml_escape(title)
    )
    .into_bytes()
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testprofile::cpu_profile;

    #[test]
    fn folded_stacks_are_root_first_and_merged() {
        let p = cpu_profile(&[
            (&["leaf", "main"], 2),
            (&["leaf", "main"], 3),
            (&["a;b", "main"], 1),
            (&["z"], 0),
        ]);
        let f = folded(&nodes::weighted_stacks(&p, 0));
        assert_eq!(f, ["main;a:b 1", "main;leaf 5"]);
    }

    #[test]
    fn flame_graph_names_the_functions() {
        let p = cpu_profile(&[(&["main.burnCPU", "main.main"], 20)]);
        let svg = String::from_utf8(flamegraph_svg(&p, "svc cpu")).unwrap();
        assert!(svg.starts_with("<?xml"), "{}", &svg[..80.min(svg.len())]);
        assert!(svg.contains("main.burnCPU"));
        assert!(svg.contains("svc cpu"));
        assert!(!svg.contains(NO_SAMPLES));
    }

    #[test]
    fn empty_profile_svg_says_no_samples() {
        let svg = String::from_utf8(flamegraph_svg(&cpu_profile(&[]), "a <b>")).unwrap();
        assert!(
            svg.contains(NO_SAMPLES) && svg.contains("a &lt;b&gt;"),
            "{svg}"
        );
    }

    #[test]
    fn diff_flame_graph_shows_the_new_function() {
        let base = cpu_profile(&[(&["a", "main"], 10)]);
        let new = cpu_profile(&[(&["a", "main"], 10), (&["hot", "main"], 10)]);
        let svg = String::from_utf8(diff_flamegraph_svg(&base, &new, 1, "diff").unwrap()).unwrap();
        assert!(svg.contains("hot"), "diff svg lacks the new function");
    }
}

//! Flame graph SVGs of a profile and differential flame graphs of two, drawn by the `inferno` crate from
//! folded stacks (`root;…;leaf value`). An empty profile gets a small SVG that says "no samples" (inferno
//! would draw an error banner instead).
//!
//! Every text from the profile (names, sample types, the title) goes through [`svg_text`] before inferno
//! sees it: escaped as for a terminal (`logtext::terminal`: no control character, no bidi control) and
//! XML's two other forbidden characters (U+FFFE, U+FFFF) replaced, so the SVG is valid XML whatever the
//! names hold (inferno escapes `&<>"'` itself).
//!
//! Takes decoded profiles, returns SVG bytes; never reads or writes files.
#![forbid(unsafe_code)]

use std::collections::HashMap;

use inferno::flamegraph::{self, color::BasicPalette, color::Palette};

use super::nodes::{self, Stacks};
use super::top::{DiffError, TooLargeToDraw, NO_SAMPLES};
use super::units::scaled_label;
use nl6_profile::proto::Profile;

/// Most bytes of folded stacks drawn into one flame graph (inferno holds them all while drawing). The
/// stacks are merged by name ids and measured before any text is built.
pub const MAX_FOLDED_BYTES: usize = 32 << 20;

/// Folded stacks (`root;…;leaf count`, one line per distinct stack, sorted) of the positive values
/// of sample type `index`. `;` inside a function name becomes `:` so frames stay separable. `Err`
/// (naming the size) when the text would exceed [`MAX_FOLDED_BYTES`].
pub fn folded(stacks: &Stacks) -> Result<Vec<String>, TooLargeToDraw> {
    let mut merged: HashMap<&[u32], i64> = HashMap::new();
    for s in stacks
        .iter()
        .filter(|s| s.value > 0 && !s.frames.is_empty())
    {
        let v = merged.entry(s.frames).or_default();
        *v = v.saturating_add(s.value);
    }
    let name_len = |f: &u32| stacks.names.get(*f).len() + 1;
    let size: usize = merged
        .keys()
        .map(|k| k.iter().map(name_len).sum::<usize>() + 20)
        .fold(0, usize::saturating_add);
    if size > MAX_FOLDED_BYTES {
        return Err(TooLargeToDraw {
            mib: size >> 20,
            limit_mib: MAX_FOLDED_BYTES >> 20,
        });
    }
    let shown: Vec<String> = (0..stacks.names.len() as u32)
        .map(|id| svg_text(stacks.names.get(id)).replace(';', ":"))
        .collect();
    let mut lines: Vec<String> = merged
        .into_iter()
        .map(|(frames, v)| {
            let mut line = String::new();
            for (i, f) in frames.iter().rev().enumerate() {
                if i > 0 {
                    line.push(';');
                }
                line.push_str(&shown[*f as usize]);
            }
            line.push(' ');
            line.push_str(&v.to_string());
            line
        })
        .collect();
    lines.sort_unstable();
    Ok(lines)
}

/// A flame graph of `p`'s default sample type (see [`nodes::default_sample_index`]); one that would
/// be too large to draw is an SVG saying so.
pub fn flamegraph_svg(p: &Profile, title: &str) -> Vec<u8> {
    match nodes::default_sample_index(p) {
        Some(i) => {
            flamegraph_svg_for(p, i, title).unwrap_or_else(|e| message_svg(title, &e.to_string()))
        }
        None => no_samples_svg(title),
    }
}

/// A flame graph of sample type `index` of `p`; "no samples" when it has none; `Err` when it would be
/// too large to draw (see [`MAX_FOLDED_BYTES`]).
pub fn flamegraph_svg_for(
    p: &Profile,
    index: usize,
    title: &str,
) -> Result<Vec<u8>, TooLargeToDraw> {
    let Some((stype, unit)) = nodes::sample_type(p, index) else {
        return Ok(no_samples_svg(title));
    };
    let stacks = nodes::weighted_stacks(p, index);
    let lines = folded(&stacks)?;
    if lines.is_empty() {
        return Ok(no_samples_svg(title));
    }
    let total = nodes::total(&stacks);
    let mut opt = options(title, &unit);
    opt.subtitle = Some(svg_text(&format!(
        "{stype}: {} total",
        scaled_label(total, &unit, "auto")
    )));
    Ok(
        render(&mut opt, lines.iter().map(String::as_str))
            .unwrap_or_else(|_| no_samples_svg(title)),
    )
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
    let before = folded(&nodes::weighted_stacks(base, index))
        .map_err(DiffError::TooLarge)?
        .join("\n");
    let after = folded(&nodes::weighted_stacks(new, index))
        .map_err(DiffError::TooLarge)?
        .join("\n");
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
    opt.subtitle = Some(svg_text(&format!(
        "{stype}: red grew, blue shrank (widths are the new profile)"
    )));
    Ok(render(&mut opt, merged.lines()).unwrap_or_else(|_| no_samples_svg(title)))
}

fn options<'a>(title: &str, unit: &str) -> flamegraph::Options<'a> {
    let mut opt = flamegraph::Options::default();
    opt.title = svg_text(title);
    opt.count_name = if unit.is_empty() {
        "samples".to_string()
    } else {
        svg_text(unit)
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
    message_svg(title, NO_SAMPLES)
}

/// A small valid SVG with the title and one line of text instead of a graph.
pub fn message_svg(title: &str, message: &str) -> Vec<u8> {
    format!(
        "<?xml version=\"1.0\" standalone=\"no\"?>\n\
         <svg version=\"1.1\" width=\"600\" height=\"80\" xmlns=\"http://www.w3.org/2000/svg\">\n\
         <text x=\"300\" y=\"30\" text-anchor=\"middle\" font-family=\"Verdana\" font-size=\"16\">{}</text>\n\
         <text x=\"300\" y=\"60\" text-anchor=\"middle\" font-family=\"Verdana\" font-size=\"14\">{}</text>\n\
         </svg>\n",
        xml_escape(&svg_text(title)),
        xml_escape(&svg_text(message))
    )
    .into_bytes()
}

/// Text that may go into an SVG as character data: escaped as for a terminal (no control or bidi
/// character) and U+FFFE/U+FFFF, which XML 1.0 forbids, replaced by U+FFFD. Markup is left to the writer.
pub fn svg_text(s: &str) -> String {
    nl6_text::logtext::terminal(s).replace(['\u{fffe}', '\u{ffff}'], "\u{fffd}")
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
        let f = folded(&nodes::weighted_stacks(&p, 0)).unwrap();
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
    fn svg_text_has_no_character_xml_forbids() {
        assert_eq!(
            svg_text("a\u{1b}[2J\u{7}\r\u{202e}\u{fffe}\0b"),
            "a\\x1b[2J\\x07\\r\\u{202e}\u{fffd}\\0b"
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

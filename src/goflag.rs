//! What Go's `flag` package does that the three command lines (`nl6`, `nl6 collect`, `nl6 report`) share,
//! so a Go user's habits work here: booleans as `strconv.ParseBool` reads them, an unknown flag echoed as
//! it was typed (`flag provided but not defined: -bogus`), a "did you mean" for near misses, and counts
//! with the right noun ("1 simulated device").
#![forbid(unsafe_code)]

use std::ffi::OsString;

/// Every spelling `strconv.ParseBool` accepts, true ones first; nothing else is a boolean.
pub const BOOL_TRUE: &[&str] = &["1", "t", "T", "TRUE", "true", "True"];
/// The false spellings of `strconv.ParseBool`.
pub const BOOL_FALSE: &[&str] = &["0", "f", "F", "FALSE", "false", "False"];

/// `text` as Go's `strconv.ParseBool` reads it; the error lists every accepted spelling.
pub fn parse_bool(text: &str) -> Result<bool, String> {
    if BOOL_TRUE.contains(&text) {
        Ok(true)
    } else if BOOL_FALSE.contains(&text) {
        Ok(false)
    } else {
        Err(format!(
            "invalid boolean {text:?} (want one of {}, {})",
            BOOL_TRUE.join(", "),
            BOOL_FALSE.join(", ")
        ))
    }
}

/// True when `text` is one of `strconv.ParseBool`'s spellings.
pub fn is_bool_literal(text: &str) -> bool {
    BOOL_TRUE.contains(&text) || BOOL_FALSE.contains(&text)
}

/// The flag `name` as the user typed it in `argv` (`-bogus` or `--bogus`, without any `=value`), found
/// by name; `--name` when it cannot be found (the argument was not UTF-8, say).
pub fn as_typed(argv: &[OsString], name: &str) -> String {
    for arg in argv.iter().filter_map(|a| a.to_str()) {
        if arg == "--" {
            break;
        }
        let dashes = if arg.starts_with("--") {
            "--"
        } else if arg.starts_with('-') {
            "-"
        } else {
            continue;
        };
        let body = &arg[dashes.len()..];
        if body.split('=').next() == Some(name) {
            return format!("{dashes}{name}");
        }
    }
    format!("--{name}")
}

/// The refusal for a flag no table defines, in Go's words, with the nearest known flag when one is close.
pub fn unknown_flag<'a>(
    argv: &[OsString],
    name: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> String {
    let typed = as_typed(argv, name);
    let dashes = &typed[..typed.len() - name.len()];
    match nearest(name, known) {
        Some(n) => format!("flag provided but not defined: {typed} (did you mean {dashes}{n}?)"),
        None => format!("flag provided but not defined: {typed}"),
    }
}

/// The candidate closest to `word` when it is a plausible typo of it: at most two edits, and fewer
/// edits than half the word (so `x` is not "close" to `h`).
pub fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|&(d, c)| d > 0 && d <= 2 && d * 2 < c.chars().count().max(word.chars().count()))
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Levenshtein distance, with a swap of two neighbours counting as one edit (`colelct` → `collect`).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// `n` and the noun, singular for exactly one: `count(1, "device", "devices")` is "1 device".
pub fn count(n: usize, singular: &str, plural: &str) -> String {
    format!("{n} {}", if n == 1 { singular } else { plural })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn parse_bool_is_exactly_strconv_parse_bool() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_bool(t), Ok(true), "{t}");
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_bool(f), Ok(false), "{f}");
        }
        for bad in ["yes", "no", "on", "off", "tRUE", "", " true", "2"] {
            let e = parse_bool(bad).unwrap_err();
            assert!(
                e.contains("1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False"),
                "{e}"
            );
        }
    }

    #[test]
    fn unknown_flags_are_echoed_as_typed_with_a_near_miss() {
        let argv = os(&["-port", "1", "-devics", "3", "--bogus=1"]);
        let known = ["devices", "port", "bind"];
        assert_eq!(
            unknown_flag(&argv, "devics", known),
            "flag provided but not defined: -devics (did you mean -devices?)"
        );
        assert_eq!(
            unknown_flag(&argv, "bogus", known),
            "flag provided but not defined: --bogus"
        );
    }

    #[test]
    fn near_misses_and_counts() {
        let cmds = ["collect", "report"];
        assert_eq!(nearest("colect", cmds), Some("collect"));
        assert_eq!(nearest("colelct", cmds), Some("collect"));
        assert_eq!(nearest("reprot", cmds), Some("report"));
        assert_eq!(nearest("serve", cmds), None);
        assert_eq!(nearest("x", ["h"]), None);
        assert_eq!(count(1, "device", "devices"), "1 device");
        assert_eq!(count(0, "device", "devices"), "0 devices");
    }
}

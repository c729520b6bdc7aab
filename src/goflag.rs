//! The command lines' flags, defined once: [`Flag`] (name, value name, default, doc and how it applies
//! to the command's settings) is the one definition type of `nl6`, `nl6 collect` and `nl6 report`, and
//! [`parse`] the one loop that reads argv against those tables — so `-help` text, parsing and the
//! README's tables (tested against them) come from the same rows.
//!
//! Go's `flag` habits, so a Go user's command lines work here: `-name` and `--name` alike, `-name VALUE`
//! and `-name=VALUE`, a value taken as it is even when it starts with `-` (`-svg -out.svg`), booleans as
//! `strconv.ParseBool` reads them and bare meaning true, `--` ending the flags, an unknown flag echoed as
//! typed (`flag provided but not defined: -bogus`) with a "did you mean" for near misses, and counts with
//! the right noun ("1 simulated device"). Every refusal from a flag's value starts with `-name: `.
//!
//! Invariant: no I/O here; a flag's `apply` only parses text into the command's settings.
#![forbid(unsafe_code)]

use std::ffi::OsString;

/// Every spelling `strconv.ParseBool` accepts, true ones first; nothing else is a boolean.
pub const BOOL_TRUE: &[&str] = &["1", "t", "T", "TRUE", "true", "True"];
/// The false spellings of `strconv.ParseBool`.
pub const BOOL_FALSE: &[&str] = &["0", "f", "F", "FALSE", "false", "False"];

/// What a flag takes after its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// A value, named for `-help` (`-port PORT`): `-name VALUE` or `-name=VALUE`.
    Value(&'static str),
    /// Go's `flag.Bool`: bare means true; `-name=VALUE` is read by [`parse_bool`] in `apply`.
    Bool,
    /// `-help`, `-version`: parsing stops here and the caller acts on it ([`Parsed::stopped_at`]).
    Stop,
}

/// One flag of one command, defined once: what `-help` prints, what the parser accepts and how the
/// value lands in the command's settings `C`.
pub struct Flag<C: 'static, E: 'static = String> {
    /// Without dashes.
    pub name: &'static str,
    /// Another accepted spelling (Go pprof's `-diff_base`), never printed; empty for none.
    pub alias: &'static str,
    pub takes: Takes,
    /// The default as `-help` and the README show it; empty for none.
    pub default: &'static str,
    pub doc: &'static str,
    /// Parses the value text into the settings. Errors say what was wrong, without the flag's name
    /// (the parser adds it).
    pub apply: Apply<C, E>,
}

/// How a flag's value lands in the settings `C`; `E` is the command's own error for a refused value.
pub type Apply<C, E> = fn(&mut C, &str) -> Result<(), E>;

/// A refused value as [`parse`] sees it, whatever the table's error type: the parser's own error (a
/// table whose error is `String` converts too).
pub type ValueError = Box<dyn std::error::Error + Send + Sync>;

fn apply_nothing<C, E>(_: &mut C, _: &str) -> Result<(), E> {
    Ok(())
}

impl<C: 'static, E: 'static> Flag<C, E> {
    /// A flag that takes a value named `value` (`-port PORT`).
    pub const fn value(
        name: &'static str,
        value: &'static str,
        default: &'static str,
        doc: &'static str,
        apply: Apply<C, E>,
    ) -> Flag<C, E> {
        Flag {
            name,
            alias: "",
            takes: Takes::Value(value),
            default,
            doc,
            apply,
        }
    }

    /// A Go boolean flag; `apply` receives `"true"` when it is given bare.
    pub const fn boolean(
        name: &'static str,
        default: &'static str,
        doc: &'static str,
        apply: Apply<C, E>,
    ) -> Flag<C, E> {
        Flag {
            name,
            alias: "",
            takes: Takes::Bool,
            default,
            doc,
            apply,
        }
    }

    /// A flag that stops parsing (`-help`, `-version`).
    pub const fn stop(name: &'static str, doc: &'static str) -> Flag<C, E> {
        Flag {
            name,
            alias: "",
            takes: Takes::Stop,
            default: "",
            doc,
            apply: apply_nothing::<C, E>,
        }
    }

    /// The same flag, also accepted as `alias`.
    pub const fn alias(mut self, alias: &'static str) -> Flag<C, E> {
        self.alias = alias;
        self
    }

    /// The flag as `-help` and the README write it: `-port PORT`, `-trap-inform[=BOOL]`, `-help`.
    pub fn usage(&self) -> String {
        match self.takes {
            Takes::Value(v) => format!("-{} {v}", self.name),
            Takes::Bool => format!("-{}[=BOOL]", self.name),
            Takes::Stop => format!("-{}", self.name),
        }
    }
}

/// Looks `name` up in `flags`, by name or alias.
pub fn find<'a, C, E>(flags: &'a [Flag<C, E>], name: &str) -> Option<&'a Flag<C, E>> {
    flags
        .iter()
        .find(|f| f.name == name || (!f.alias.is_empty() && f.alias == name))
}

/// `-help` rows for `flags`: the usage column padded to the widest, the doc, and `(default …)` when
/// there is one.
pub fn help_rows<C, E>(flags: &[Flag<C, E>]) -> String {
    let width = flags.iter().map(|f| f.usage().len()).max().unwrap_or(0);
    let mut out = String::new();
    for f in flags {
        out.push_str(&format!("  {:width$}  {}", f.usage(), f.doc));
        if !f.default.is_empty() {
            out.push_str(&format!(" (default {})", f.default));
        }
        out.push('\n');
    }
    out
}

/// One command's flags bound to the settings they fill, as [`parse`] reads them. A command may have
/// several (`nl6` reads its own and the lab fleet's).
pub trait Table {
    /// The flag's name, what it takes, and its index for [`Table::apply`]; `None` when not defined here.
    fn lookup(&self, name: &str) -> Option<(&'static str, Takes, usize)>;
    /// Every name, for "did you mean".
    fn names(&self) -> Vec<&'static str>;
    /// Applies flag `index` to the settings.
    fn apply(&mut self, index: usize, value: &str) -> Result<(), ValueError>;
}

/// A flag table and the settings it fills.
pub struct Bound<'a, C: 'static, E: 'static = String>(pub &'a [Flag<C, E>], pub &'a mut C);

impl<C: 'static, E: Into<ValueError> + 'static> Table for Bound<'_, C, E> {
    fn lookup(&self, name: &str) -> Option<(&'static str, Takes, usize)> {
        let f = find(self.0, name)?;
        let index = self.0.iter().position(|g| std::ptr::eq(g, f))?;
        Some((f.name, f.takes, index))
    }
    fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|f| f.name).collect()
    }
    fn apply(&mut self, index: usize, value: &str) -> Result<(), ValueError> {
        (self.0[index].apply)(self.1, value).map_err(Into::into)
    }
}

/// What a command does with an argument that is not a flag.
pub enum Positional<'a> {
    /// The command takes none: the refusal for the word (a mistyped subcommand gets "did you mean").
    /// A bare boolean flag then also takes a following `strconv.ParseBool` literal as its value, since
    /// that word could be nothing else (`-trap-inform false`).
    Refuse(&'a dyn Fn(&str) -> String),
    /// The command's operands (`nl6 report FILE`), in order.
    Collect(&'a mut Vec<OsString>),
}

/// What [`parse`] found beyond the settings it filled.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The [`Takes::Stop`] flag that ended parsing (`help`, `version`).
    pub stopped_at: Option<&'static str>,
}

/// Why [`parse`] refused a command line. `Display` is the one-line message; a command acts on the kind
/// (`nl6` points to `nl6 -h` after an unknown flag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlagError {
    /// No table defines the flag: Go's message, echoed as typed, with the nearest known flag.
    Unknown(String),
    /// `-name` ended the command line without its value.
    NeedsValue(&'static str),
    /// The flag's `apply` refused its value.
    Invalid { flag: &'static str, reason: String },
    /// `---x`, `-=x`: not a flag at all.
    Syntax(String),
    /// A word the command takes no place for (the command's own refusal).
    Operand(String),
}

impl std::fmt::Display for FlagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlagError::Unknown(m) | FlagError::Operand(m) => f.write_str(m),
            FlagError::NeedsValue(flag) => write!(f, "flag needs an argument: -{flag}"),
            FlagError::Invalid { flag, reason } => write!(f, "-{flag}: {reason}"),
            FlagError::Syntax(arg) => {
                write!(f, "bad flag syntax: {arg} (flags are -name or --name)")
            }
        }
    }
}

impl std::error::Error for FlagError {}

impl From<FlagError> for String {
    fn from(e: FlagError) -> String {
        e.to_string()
    }
}

/// The one flag loop: reads `argv` (without the program and subcommand names) against `tables`,
/// applying each flag to its settings in order. `-h` means `-help` when no table defines `h`.
/// Errors: an unknown flag as typed, with the nearest known one; `flag needs an argument: -name`; and
/// every `apply` refusal prefixed with `-name: `.
pub fn parse(
    argv: &[OsString],
    tables: &mut [&mut dyn Table],
    mut positional: Positional<'_>,
) -> Result<Parsed, FlagError> {
    let mut args = argv.iter();
    while let Some(arg) = args.next() {
        let Some(text) = arg.to_str() else {
            take_positional(&mut positional, arg)?;
            continue;
        };
        if text == "--" {
            for rest in args.by_ref() {
                take_positional(&mut positional, rest)?;
            }
            break;
        }
        let body = match text.strip_prefix("--").or_else(|| text.strip_prefix('-')) {
            Some(body) if !body.is_empty() => body,
            _ => {
                // `-` alone and every word without a dash are operands.
                take_positional(&mut positional, arg)?;
                continue;
            }
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (body, None),
        };
        if name.is_empty() || name.starts_with('-') {
            return Err(FlagError::Syntax(text.to_string()));
        }
        let Some((table, (canonical, takes, index))) = lookup(tables, name) else {
            let known: Vec<&str> = tables.iter().flat_map(|t| t.names()).collect();
            return Err(FlagError::Unknown(unknown_flag(argv, name, known)));
        };
        let value = match (takes, inline) {
            (Takes::Stop, _) => {
                return Ok(Parsed {
                    stopped_at: Some(canonical),
                })
            }
            (_, Some(v)) => v.to_string(),
            (Takes::Bool, None) => match (
                &positional,
                args.as_slice().first().and_then(|v| v.to_str()),
            ) {
                (Positional::Refuse(_), Some(v)) if is_bool_literal(v) => {
                    args.next();
                    v.to_string()
                }
                _ => "true".to_string(),
            },
            (Takes::Value(_), None) => match args.next() {
                Some(v) => v
                    .to_str()
                    .ok_or(FlagError::Invalid {
                        flag: canonical,
                        reason: "the value is not valid UTF-8".into(),
                    })?
                    .to_string(),
                None => return Err(FlagError::NeedsValue(canonical)),
            },
        };
        tables[table]
            .apply(index, &value)
            .map_err(|e| FlagError::Invalid {
                flag: canonical,
                reason: e.to_string(),
            })?;
    }
    Ok(Parsed::default())
}

/// The table defining `name` (or `help` for `-h`) and the flag's entry in it.
fn lookup(tables: &[&mut dyn Table], name: &str) -> Option<(usize, (&'static str, Takes, usize))> {
    let find = |name: &str| {
        tables
            .iter()
            .enumerate()
            .find_map(|(i, t)| t.lookup(name).map(|f| (i, f)))
    };
    find(name).or_else(|| if name == "h" { find("help") } else { None })
}

fn take_positional(positional: &mut Positional<'_>, arg: &OsString) -> Result<(), FlagError> {
    match positional {
        Positional::Refuse(refuse) => Err(FlagError::Operand(refuse(&arg.to_string_lossy()))),
        Positional::Collect(into) => {
            into.push(arg.clone());
            Ok(())
        }
    }
}

/// A boolean flag's value that `strconv.ParseBool` would refuse (the text as given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoolError(pub String);

impl std::fmt::Display for BoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid boolean {:?} (want one of {}, {})",
            self.0,
            BOOL_TRUE.join(", "),
            BOOL_FALSE.join(", ")
        )
    }
}

impl std::error::Error for BoolError {}

/// For tables whose error is still text.
impl From<BoolError> for String {
    fn from(e: BoolError) -> String {
        e.to_string()
    }
}

/// `text` as Go's `strconv.ParseBool` reads it; the error lists every accepted spelling.
pub fn parse_bool(text: &str) -> Result<bool, BoolError> {
    if BOOL_TRUE.contains(&text) {
        Ok(true)
    } else if BOOL_FALSE.contains(&text) {
        Ok(false)
    } else {
        Err(BoolError(text.to_string()))
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
            let e = parse_bool(bad).unwrap_err().to_string();
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

    #[derive(Debug, Default, PartialEq)]
    struct Settings {
        name: String,
        on: bool,
    }

    const TABLE: &[Flag<Settings>] = &[
        Flag::value("name", "TEXT", "", "a value", |s, v| {
            if v == "bad" {
                return Err("bad is refused".into());
            }
            s.name = v.to_string();
            Ok(())
        }),
        Flag::boolean("on", "false", "a switch", |s, v| {
            s.on = parse_bool(v)?;
            Ok(())
        }),
        Flag::stop("help", "help"),
    ];

    fn run(
        args: &[&str],
        operands: Option<&mut Vec<OsString>>,
    ) -> Result<(Settings, Parsed), FlagError> {
        let mut s = Settings::default();
        let refuse = |w: &str| format!("stray {w}");
        let positional = match operands {
            Some(v) => Positional::Collect(v),
            None => Positional::Refuse(&refuse),
        };
        let parsed = parse(&os(args), &mut [&mut Bound(TABLE, &mut s)], positional)?;
        Ok((s, parsed))
    }

    #[test]
    fn one_loop_reads_both_dash_styles_and_dash_led_values_as_typed() {
        for args in [
            &["-name", "-x", "-on"][..],
            &["--name", "-x", "--on"],
            &["-name=-x", "-on=true"],
            &["--name=-x", "-on", "t"],
        ] {
            let (s, _) = run(args, None).unwrap();
            assert_eq!(
                s,
                Settings {
                    name: "-x".into(),
                    on: true
                },
                "{args:?}"
            );
        }
        // With operands, a word after a bare boolean is an operand, not its value (Go's rule).
        let mut operands = Vec::new();
        let (s, _) = run(&["-on", "false", "--", "-name"], Some(&mut operands)).unwrap();
        assert!(s.on);
        assert_eq!(operands, os(&["false", "-name"]));
        assert_eq!(
            run(&["-on", "-h", "-bogus"], None).unwrap().1.stopped_at,
            Some("help")
        );
    }

    #[test]
    fn every_refusal_names_the_flag() {
        let err = |args: &[&str]| run(args, None).unwrap_err().to_string();
        assert_eq!(err(&["-name", "bad"]), "-name: bad is refused");
        assert_eq!(err(&["--name"]), "flag needs an argument: -name");
        assert!(err(&["-on=maybe"]).starts_with("-on: invalid boolean \"maybe\""));
        assert_eq!(
            err(&["--nme=1"]),
            "flag provided but not defined: --nme (did you mean --name?)"
        );
        assert_eq!(err(&["word"]), "stray word");
        assert!(err(&["---name"]).starts_with("bad flag syntax: ---name"));
        assert!(matches!(run(&["-x"], None), Err(FlagError::Unknown(_))));
    }
}

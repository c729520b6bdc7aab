//! Object keys as the bucket archive trusts them: the one place that says which key may be put in a
//! request URL ([`check`]), how it is percent-encoded so the store receives exactly that key
//! ([`encode_path`]), and which listed key retention may act on ([`classify`]). A listing comes from
//! the store, so every key in it is hostile until it passes here; what does not pass is counted
//! ([`Skipped`]) and named in one escaped, bounded line. No I/O.
#![forbid(unsafe_code)]

use std::fmt;

use super::archive::Stamp;

/// The longest key S3 allows, in bytes.
pub const KEY_MAX: usize = 1024;

/// Why a key was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeyError {
    /// Longer than [`KEY_MAX`] bytes.
    TooLong(usize),
    /// Holds a control character (C0, DEL, C1), a bidirectional control or a backslash.
    Control,
    /// Holds an empty, `.` or `..` segment (a URL would be rewritten around it).
    DotSegment,
    /// Does not start, byte for byte, with the archive's prefix.
    OutsidePrefix,
    /// Under the prefix but not `<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>/<fqdn>/<port>/<file>` or a page.
    NotDated,
    /// The request URL built from the key would not name exactly the key.
    Rewritten,
}

impl KeyError {
    /// A short name for the reason, as the skipped-keys line counts it.
    pub fn reason(self) -> &'static str {
        match self {
            KeyError::TooLong(_) => "longer than 1024 bytes",
            KeyError::Control => "control, bidi or backslash characters",
            KeyError::DotSegment => "empty, '.' or '..' segments",
            KeyError::OutsidePrefix => "outside the prefix",
            KeyError::NotDated => "not the archive's dated layout",
            KeyError::Rewritten => "not sendable exactly",
        }
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::TooLong(n) => write!(f, "key of {n} bytes is longer than S3's {KEY_MAX}"),
            KeyError::Rewritten => f.write_str(
                "the request URL would not name exactly this key; rename the object",
            ),
            other => write!(
                f,
                "key has {}; nl6 neither reads nor deletes such a key (remove it by hand if it is yours)",
                other.reason()
            ),
        }
    }
}

impl std::error::Error for KeyError {}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{061c}')
}

/// A key that may be put in a request URL: at most [`KEY_MAX`] bytes, no control, bidi or backslash
/// character, no empty, `.` or `..` segment (so neither `url` nor the store can normalise it into
/// another key). An empty key (the bucket itself) passes.
pub fn check(key: &str) -> Result<(), KeyError> {
    if key.len() > KEY_MAX {
        return Err(KeyError::TooLong(key.len()));
    }
    if key
        .chars()
        .any(|c| c.is_control() || is_bidi_control(c) || c == '\\')
    {
        return Err(KeyError::Control);
    }
    if !key.is_empty()
        && key
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err(KeyError::DotSegment);
    }
    // `%2e` is a dot to a URL parser: a segment made only of dots, however written, is refused.
    if key.split('/').any(|s| {
        let lower = s.to_ascii_lowercase().replace("%2e", ".");
        !s.is_empty() && lower.bytes().all(|b| b == b'.')
    }) {
        return Err(KeyError::DotSegment);
    }
    Ok(())
}

/// `key` as a request path must carry it so the store decodes exactly `key`: every byte but ASCII
/// letters, digits, `-._~` and the `/` between segments as `%XX` (a `%` in a key stays a `%`). This
/// is the encoding SigV4 signs, and the one rusty-s3 applies: the path it builds is checked against it.
pub fn encode_path(key: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// What a listed key is to retention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listed {
    /// A file of a snapshot: its dated directory (`<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>`, relative to
    /// the prefix) and the date it names.
    Snapshot { dated: String, stamp: Stamp },
    /// A snapshot time's page (`…/<hh:mm:ss>/index.html`).
    TimePage { dated: String, stamp: Stamp },
    /// A day's page (`<program>/<yyyy>/<mm>/<dd>/index.html`); `day` ends in `/`.
    DayPage { day: String },
}

/// A path component of the layout (program, fqdn, file): not hidden.
fn component(s: &str) -> bool {
    !s.is_empty() && !s.starts_with('.')
}

/// Reads a listed `key`: used only if it passes [`check`], lies under `prefix` taken literally (no
/// normalisation), and has the archive's own shape.
pub fn classify(key: &str, prefix: &str) -> Result<Listed, KeyError> {
    check(key)?;
    let rel = key.strip_prefix(prefix).ok_or(KeyError::OutsidePrefix)?;
    let parts: Vec<&str> = rel.split('/').collect();
    let stamp = |p: &[&str]| {
        (component(p[0]))
            .then(|| Stamp::parse_components(p[1], p[2], p[3], p[4]))
            .flatten()
    };
    match parts[..] {
        [program, y, m, d, "index.html"] if component(program) => {
            Stamp::parse_components(y, m, d, "00:00:00").ok_or(KeyError::NotDated)?;
            Ok(Listed::DayPage {
                day: parts[..4].join("/") + "/",
            })
        }
        [_, _, _, _, _, "index.html"] => Ok(Listed::TimePage {
            dated: parts[..5].join("/"),
            stamp: stamp(&parts).ok_or(KeyError::NotDated)?,
        }),
        [_, _, _, _, _, fqdn, port, file]
            if component(fqdn) && component(file) && port.parse::<u16>().is_ok_and(|p| p > 0) =>
        {
            Ok(Listed::Snapshot {
                dated: parts[..5].join("/"),
                stamp: stamp(&parts).ok_or(KeyError::NotDated)?,
            })
        }
        _ => Err(KeyError::NotDated),
    }
}

/// Most characters of a skipped key shown.
const SHOWN_CHARS: usize = 120;

/// The listed keys a sweep skipped: how many for each reason, and the first one (escaped, bounded).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Skipped {
    counts: std::collections::BTreeMap<KeyError, usize>,
    first: Option<String>,
}

impl Skipped {
    /// Counts `key`, refused for `why`.
    pub fn add(&mut self, key: &str, why: KeyError) {
        // Lengths differ key to key: one entry for all the long ones.
        let why = match why {
            KeyError::TooLong(_) => KeyError::TooLong(0),
            w => w,
        };
        *self.counts.entry(why).or_default() += 1;
        if self.first.is_none() {
            let head: String = key.chars().take(SHOWN_CHARS + 1).collect();
            self.first = Some(nl6_text::logtext::remote_within(&head, SHOWN_CHARS));
        }
    }

    /// How many keys were skipped.
    pub fn total(&self) -> usize {
        self.counts.values().sum()
    }

    /// The sweep's one line about them, `None` when none was skipped.
    pub fn line(&self, location: &str) -> Option<String> {
        let first = self.first.as_ref()?;
        let reasons: Vec<String> = self
            .counts
            .iter()
            .map(|(k, n)| format!("{n} {}", k.reason()))
            .collect();
        Some(format!(
            "nl6 collect: retention: skipped {} listed under {location} ({}), the first \"{first}\": neither read nor deleted",
            crate::goflag::count(self.total(), "key", "keys"),
            reasons.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "fleet/";

    #[test]
    fn dated_keys_under_the_prefix_are_used() {
        let k = "fleet/svc/2020/01/01/00:00:00/h.example/80/cpu.pb.gz";
        assert!(matches!(
            classify(k, P),
            Ok(Listed::Snapshot { ref dated, .. }) if dated == "svc/2020/01/01/00:00:00"
        ));
        assert_eq!(
            classify("fleet/svc/2020/01/01/index.html", P),
            Ok(Listed::DayPage {
                day: "svc/2020/01/01/".into()
            })
        );
        assert!(matches!(
            classify("fleet/svc/2020/01/01/00:00:00/index.html", P),
            Ok(Listed::TimePage { .. })
        ));
    }

    #[test]
    fn hostile_keys_are_refused_for_what_they_are() {
        let dated = "svc/2020/01/01/00:00:00/h/80";
        let cases = [
            (
                format!("fleet/{dated}/../../../../../../../../victim/secret.txt"),
                KeyError::DotSegment,
            ),
            (format!("fleet/{dated}/%2e%2E/x"), KeyError::DotSegment),
            (format!("fleet/{dated}//x"), KeyError::DotSegment),
            (format!("fleet/{dated}/a\rb"), KeyError::Control),
            (format!("fleet/{dated}/a\u{85}b"), KeyError::Control),
            (format!("fleet/{dated}/a\u{202e}b"), KeyError::Control),
            (format!("fleet/{dated}/a\\..\\b"), KeyError::Control),
            (format!("other/{dated}/cpu.pb.gz"), KeyError::OutsidePrefix),
            (format!("/fleet/{dated}/cpu.pb.gz"), KeyError::DotSegment),
            ("fleet/notes/readme.txt".into(), KeyError::NotDated),
            (
                "fleet/svc/2020/13/01/00:00:00/h/80/x".into(),
                KeyError::NotDated,
            ),
            (format!("fleet/{dated}/.hidden"), KeyError::NotDated),
            (
                "fleet/svc/2020/01/01/00:00:00/h/0/x".into(),
                KeyError::NotDated,
            ),
        ];
        for (key, want) in cases {
            assert_eq!(classify(&key, P), Err(want), "{key:?}");
        }
        let long = format!("fleet/{dated}/{}", "a".repeat(KEY_MAX));
        assert!(matches!(classify(&long, P), Err(KeyError::TooLong(n)) if n == long.len()));
    }

    #[test]
    fn encoding_names_exactly_the_key() {
        assert_eq!(
            encode_path("p/svc/2026/11/29/23:00:00/h/80/a b%2F?#é"),
            "p/svc/2026/11/29/23%3A00%3A00/h/80/a%20b%252F%3F%23%C3%A9"
        );
    }

    #[test]
    fn the_skipped_line_counts_and_escapes() {
        let mut s = Skipped::default();
        assert_eq!(s.line("s3://b/p/"), None);
        s.add(
            &format!("a\r\u{202e}{}", "x".repeat(5000)),
            KeyError::Control,
        );
        s.add("y", KeyError::TooLong(9_000_000));
        s.add("z", KeyError::TooLong(2000));
        let line = s.line("s3://b/p/").unwrap();
        assert!(line.contains("skipped 3 keys"), "{line}");
        assert!(line.contains("2 longer than 1024 bytes"), "{line}");
        assert!(line.contains("a\\r\\u{202e}xx"), "{line}");
        assert!(line.len() < 400 && !line.contains('\r'), "{line}");
    }
}

//! Text from the other end of a connection (a collector's error body, a scrape target's answer) made
//! safe for one log line: control characters and bidirectional-override characters escaped, length
//! bounded. Anyone who can point nl6's push at their own server, or answer a `nl6 collect` scrape,
//! chooses that text; without this it could clear an operator's terminal, rewrite the log line with CR,
//! or forge further lines.
//!
//! [`remote`] (or [`remote_within`] for a longer bound) is the one function every log line or error
//! message built from remote text uses; [`terminal`] is the same escaping without a length bound, for
//! a profile's names in `nl6 report`'s output, collect's text files and flame graph SVGs.

use std::fmt::Write as _;

/// Most characters of remote text kept in one message (the rest becomes `…`).
pub const REMOTE_TEXT_LIMIT: usize = 200;

/// `text` with every control character escaped (`\r`, `\n`, `\t`, `\0`, `\x1b`, `\u{85}`), the Unicode
/// bidirectional controls escaped (`\u{202e}`), and at most [`REMOTE_TEXT_LIMIT`] characters of the
/// input kept (an ellipsis marks the cut). The result never contains a control character.
pub fn remote(text: &str) -> String {
    remote_within(text, REMOTE_TEXT_LIMIT)
}

/// [`remote`] without the length bound: every character kept, controls and bidi controls escaped. For
/// remote text whose length is bounded elsewhere (a profile's names, by `report::limits`).
pub fn terminal(text: &str) -> String {
    remote_within(text, usize::MAX)
}

/// [`remote`] keeping at most `max_chars` characters of the input.
pub fn remote_within(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars.saturating_mul(2)));
    for (i, c) in text.chars().enumerate() {
        if i == max_chars {
            out.push('…');
            break;
        }
        match c {
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\0' => out.push_str("\\0"),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x80 && c.is_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() || is_bidi_control(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// The characters that reorder displayed text (Trojan Source, CVE-2021-42574).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{061c}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_plain_text_kept() {
        assert_eq!(
            remote("\u{1b}[2J\u{7}a\rb\nc\td\0e\u{7f}\u{85}\u{202e}f\\"),
            "\\x1b[2J\\x07a\\rb\\nc\\td\\0e\\x7f\\u{85}\\u{202e}f\\\\"
        );
        assert_eq!(remote("disk full: café"), "disk full: café");
        let long = format!("\u{1b}]0;t\u{7}{}", "x".repeat(1000));
        assert_eq!(
            terminal(&long),
            format!("\\x1b]0;t\\x07{}", "x".repeat(1000))
        );
    }

    #[test]
    fn length_is_bounded_in_characters() {
        let out = remote(&"é".repeat(10_000));
        assert_eq!(out.chars().count(), REMOTE_TEXT_LIMIT + 1);
        assert!(out.ends_with('…'));
        assert_eq!(
            remote(&"x".repeat(REMOTE_TEXT_LIMIT)).len(),
            REMOTE_TEXT_LIMIT
        );
    }
}

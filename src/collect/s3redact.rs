//! Text a store sent back (an error's `<Code>` and `<Message>`, a transport error) made safe to print:
//! a store may echo the signed request URL or its headers, so every SigV4 credential, session token,
//! signature and `Authorization` value is replaced by `<redacted>` before the text is escaped and
//! bounded. The caller also strips the literal key, secret and token ([`scrub_secrets`]). No I/O.
#![forbid(unsafe_code)]

/// The names whose values are secrets, matched case-insensitively, followed by `=`, `:` or their
/// percent-encoded forms.
const NAMES: [&str; 4] = [
    "x-amz-security-token",
    "x-amz-signature",
    "x-amz-credential",
    "authorization",
];

/// What is printed in place of a secret value.
pub const REDACTED: &str = "<redacted>";

/// Where a value after a name ends: the next separator of a query, a header or markup.
fn value_end(b: u8) -> bool {
    matches!(
        b,
        b'&' | b'<' | b'>' | b'"' | b'\'' | b'\r' | b'\n' | b';' | b','
    ) || b.is_ascii_whitespace()
}

/// `text` with the value after every secret-bearing name replaced by [`REDACTED`].
pub fn redact(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let hit = NAMES.iter().find(|n| lower[i..].starts_with(*n));
        let Some(name) = hit else {
            let c = text[i..].chars().next().unwrap_or('\u{fffd}');
            out.push(c);
            i += c.len_utf8().max(1);
            continue;
        };
        let mut j = i + name.len();
        out.push_str(&text[i..j]);
        // The separator: `=`, `:` (and spaces after it), `%3D`, `%3A`.
        let sep = if lower[j..].starts_with("%3d") || lower[j..].starts_with("%3a") {
            3
        } else if bytes.get(j).is_some_and(|b| *b == b'=' || *b == b':') {
            1
        } else {
            0
        };
        if sep == 0 {
            i = j;
            continue;
        }
        let header_like = *name == "authorization" && bytes[j] == b':';
        out.push_str(&text[j..j + sep]);
        j += sep;
        while bytes.get(j) == Some(&b' ') {
            out.push(' ');
            j += 1;
        }
        // An `Authorization` value holds spaces (`AWS4-HMAC-SHA256 Credential=…, Signature=…`):
        // everything to the end of its line goes.
        let start = j;
        while j < bytes.len()
            && !(if header_like {
                matches!(bytes[j], b'\r' | b'\n' | b'<')
            } else {
                value_end(bytes[j])
            })
        {
            j += 1;
        }
        if j > start {
            out.push_str(REDACTED);
        }
        i = j;
    }
    out
}

/// `text` with each of `secrets` (plain and percent-encoded) replaced by [`REDACTED`]; empty ones are
/// ignored.
pub fn scrub_secrets(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        for form in [
            s.to_string(),
            super::s3key::encode_path(s).replace('/', "%2F"),
        ] {
            out = out.replace(&form, REDACTED);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoed_urls_and_headers_lose_their_secrets() {
        let echoed = "GET /fleet/p?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=KEY%2F20261204%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Security-Token=TOKEN%2Babc&x-amz-signature=deadbeef <Authorization: AWS4-HMAC-SHA256 Credential=KEY/x, Signature=ff>";
        let r = redact(echoed);
        for gone in ["KEY", "TOKEN", "deadbeef", "Signature=ff"] {
            assert!(!r.contains(gone), "{gone} in {r}");
        }
        assert!(
            r.contains("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=<redacted>&"),
            "{r}"
        );
        let enc = redact("x-amz-security-token%3DTOK&y");
        assert_eq!(enc, "x-amz-security-token%3D<redacted>&y");
        assert_eq!(redact("no secrets here: café"), "no secrets here: café");
        assert_eq!(
            scrub_secrets("t=se/cr+et or se%2Fcr%2Bet", &["se/cr+et", ""]),
            "t=<redacted> or <redacted>"
        );
    }
}

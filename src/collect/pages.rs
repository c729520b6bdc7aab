//! The archive's `index.html` pages, so a reader opens one page instead of listing keys: one per snapshot
//! time (`<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>/index.html`: every target's status, its flame graphs
//! inline, links to its top tables, diff, profiles and meta.json) and one per day
//! (`<program>/<yyyy>/<mm>/<dd>/index.html`: every snapshot time of that day). Links are relative, so the
//! pages work on a local `-out`, in a bucket's web view and after a copy. Plain text in, HTML out; no I/O.
#![forbid(unsafe_code)]

use std::fmt::Write as _;

use super::meta::Status;

/// Escapes `&`, `<`, `>`, `"` and `'` for HTML and XML text and attribute values.
pub fn markup_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes a path component for an `href` (`:` in `hh:mm:ss` would read as a URL scheme).
fn href(component: &str) -> String {
    let mut out = String::new();
    for b in component.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// One target's row on a snapshot page.
#[derive(Debug, Clone)]
pub struct Row {
    pub fqdn: String,
    pub port: u16,
    /// `None` for a snapshot found in the store that this collector did not take (another collector's).
    pub status: Option<Status>,
    /// The files its snapshot holds (meta.json apart).
    pub files: Vec<String>,
    pub error: Option<String>,
}

const HEAD: &str = "<!doctype html>\n<html><head><meta charset=\"utf-8\"><style>body{font-family:sans-serif;margin:1em}object{width:100%;max-width:1200px;display:block;border:1px solid #ccc;margin:.5em 0}.failed{color:#a00}.partial{color:#a60}</style>";

/// The page of one snapshot time of `program`.
pub fn snapshot_page(program: &str, stamp: &str, rows: &[Row]) -> String {
    let title = markup_escape(&format!("{program} {stamp}"));
    let mut s = format!("{HEAD}<title>{title}</title></head><body>\n<h1>{title}</h1>\n<p><a href=\"../index.html\">the day</a></p>\n");
    for r in rows {
        let status = match r.status {
            Some(Status::Ok) => "ok",
            Some(Status::Partial) => "partial",
            Some(Status::Failed) => "failed",
            None => "stored",
        };
        let dir = format!("{}/{}", href(&r.fqdn), r.port);
        let _ = write!(
            s,
            "<h2 id=\"{}-{}\">{}:{} <span class=\"{status}\">{status}</span></h2>\n<p>",
            markup_escape(&r.fqdn),
            r.port,
            markup_escape(&r.fqdn),
            r.port
        );
        if let Some(e) = &r.error {
            let _ = write!(s, "<span class=\"failed\">{}</span><br>", markup_escape(e));
        }
        for f in r
            .files
            .iter()
            .chain(std::iter::once(&"meta.json".to_string()))
        {
            let _ = write!(s, "<a href=\"{dir}/{}\">{}</a> ", href(f), markup_escape(f));
        }
        s.push_str("</p>\n");
        for kind in ["cpu", "heap"] {
            let svg = format!("{kind}.svg");
            if r.files.contains(&svg) {
                let _ = writeln!(
                    s,
                    "<object type=\"image/svg+xml\" data=\"{dir}/{svg}\">{kind} flame graph</object>"
                );
            }
        }
    }
    s.push_str("</body></html>\n");
    s
}

/// The page of one day of `program`, linking each snapshot time (`hh:mm:ss`) found that day.
pub fn day_page(program: &str, day: &str, times: &[String]) -> String {
    let title = markup_escape(&format!("{program} {day}"));
    let mut s = format!("{HEAD}<title>{title}</title></head><body>\n<h1>{title}</h1>\n<ul>\n");
    for t in times {
        let _ = writeln!(
            s,
            "<li><a href=\"{}/index.html\">{}</a></li>",
            href(t),
            markup_escape(t)
        );
    }
    s.push_str("</ul></body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_link_every_file_and_escape_names() {
        let rows = [Row {
            fqdn: "h<1>".into(),
            port: 80,
            status: Some(Status::Partial),
            files: vec!["cpu.svg".into(), "cpu.top.txt".into()],
            error: Some("heap: HTTP 503: <closed>".into()),
        }];
        let p = snapshot_page("svc", "2026-11-29T23:00:00Z", &rows);
        assert!(
            p.contains("<a href=\"h%3C1%3E/80/cpu.top.txt\">cpu.top.txt</a>"),
            "{p}"
        );
        assert!(p.contains("data=\"h%3C1%3E/80/cpu.svg\""), "{p}");
        assert!(
            p.contains("h&lt;1&gt;:80") && p.contains("&lt;closed&gt;"),
            "{p}"
        );
        assert!(p.contains("href=\"h%3C1%3E/80/meta.json\""));
        assert!(!p.contains("heap.svg"));
        let d = day_page("svc", "2026-11-29", &["23:00:00".into()]);
        assert!(
            d.contains("<a href=\"23%3A00%3A00/index.html\">23:00:00</a>"),
            "{d}"
        );
        assert_eq!(markup_escape("a&'\""), "a&amp;&#39;&quot;");
    }
}

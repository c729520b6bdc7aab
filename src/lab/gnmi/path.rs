//! gNMI paths as nl6 reads them: a request path (prefix joined with path, `origin` checked) as a list
//! of [`Elem`]s, the text form `/a/b[k=v]/c` the dial-out flag takes, and the matching rule of the gNMI
//! path conventions: `*` stands for one element, `...` for any number (none included), a key `*` or an
//! absent key for every instance, and a path ending above a leaf for every leaf below it.
//!
//! Plain values; no device state here (the leaves are [`super::schema`]'s).
#![forbid(unsafe_code)]

use super::proto::gnmi::{Path, PathElem};
use std::collections::BTreeMap;
use std::fmt;

/// One element of a path: a name and its list keys.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Elem {
    pub name: String,
    pub keys: BTreeMap<String, String>,
}

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    /// The text form did not parse (what was wrong).
    Syntax(String),
    /// An origin that is not OpenConfig's.
    Origin(String),
    /// Only the deprecated `element` strings were given.
    Deprecated,
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathError::Syntax(why) => write!(f, "bad path: {why}"),
            PathError::Origin(o) => write!(
                f,
                "origin {o:?} is not served: this target has OpenConfig paths only (origin \"\", \
                 \"openconfig\" or an openconfig-* module)"
            ),
            PathError::Deprecated => write!(
                f,
                "the path uses the deprecated `element` strings; send `elem` (PathElem) instead"
            ),
        }
    }
}

/// Parses `/a/b[k=v]/c` (the leading `/` optional; `[k=v]` repeated for several keys).
pub fn parse(text: &str) -> Result<Vec<Elem>, PathError> {
    let mut out = Vec::new();
    let body = text.strip_prefix('/').unwrap_or(text);
    if body.is_empty() {
        return Ok(out);
    }
    let mut rest = body;
    while !rest.is_empty() {
        let end = segment_end(rest)?;
        out.push(parse_elem(&rest[..end])?);
        rest = rest[end..].strip_prefix('/').unwrap_or(&rest[end..]);
    }
    Ok(out)
}

/// Where the segment at the start of `s` ends: the first `/` outside brackets.
fn segment_end(s: &str) -> Result<usize, PathError> {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' if depth == 0 => {
                return Err(PathError::Syntax(format!("a ']' without '[' in {s:?}")))
            }
            ']' => depth -= 1,
            '/' if depth == 0 => return Ok(i),
            _ => {}
        }
    }
    if depth != 0 {
        return Err(PathError::Syntax(format!("a '[' without ']' in {s:?}")));
    }
    Ok(s.len())
}

fn parse_elem(seg: &str) -> Result<Elem, PathError> {
    let (name, mut keys_text) = match seg.find('[') {
        Some(i) => (&seg[..i], &seg[i..]),
        None => (seg, ""),
    };
    if name.is_empty() {
        return Err(PathError::Syntax(format!("an empty element in {seg:?}")));
    }
    let mut keys = BTreeMap::new();
    while let Some(inner) = keys_text.strip_prefix('[') {
        let close = inner
            .find(']')
            .ok_or_else(|| PathError::Syntax(format!("unclosed key in {seg:?}")))?;
        let (k, v) = inner[..close]
            .split_once('=')
            .ok_or_else(|| PathError::Syntax(format!("a key without '=' in {seg:?}")))?;
        keys.insert(k.to_string(), v.to_string());
        keys_text = &inner[close + 1..];
    }
    if !keys_text.is_empty() {
        return Err(PathError::Syntax(format!("text after the keys in {seg:?}")));
    }
    Ok(Elem {
        name: name.to_string(),
        keys,
    })
}

/// The elements of `prefix` then `path` (either may be absent), after checking their origins.
pub fn join(prefix: Option<&Path>, path: Option<&Path>) -> Result<Vec<Elem>, PathError> {
    let mut out = Vec::new();
    for p in [prefix, path].into_iter().flatten() {
        check_origin(&p.origin)?;
        #[allow(deprecated)]
        if p.elem.is_empty() && !p.element.is_empty() {
            return Err(PathError::Deprecated);
        }
        out.extend(p.elem.iter().map(|e| Elem {
            name: e.name.clone(),
            keys: e.key.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        }));
    }
    // A module-qualified first element (`openconfig-interfaces:interfaces`) names the same node.
    if let Some(first) = out.first_mut() {
        if let Some((module, name)) = first.name.split_once(':') {
            check_origin(module)?;
            first.name = name.to_string();
        }
    }
    Ok(out)
}

fn check_origin(origin: &str) -> Result<(), PathError> {
    match origin {
        "" | "openconfig" => Ok(()),
        o if o.starts_with("openconfig-") => Ok(()),
        o => Err(PathError::Origin(o.to_string())),
    }
}

/// The proto form of `elems`.
pub fn to_proto(elems: &[Elem]) -> Path {
    Path {
        elem: elems
            .iter()
            .map(|e| PathElem {
                name: e.name.clone(),
                key: e.keys.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            })
            .collect(),
        ..Path::default()
    }
}

/// The text form of `elems` (`/a/b[k=v]`), for messages.
pub fn text(elems: &[Elem]) -> String {
    if elems.is_empty() {
        return "/".into();
    }
    let mut s = String::new();
    for e in elems {
        s.push('/');
        s.push_str(&e.name);
        for (k, v) in &e.keys {
            s.push_str(&format!("[{k}={v}]"));
        }
    }
    s
}

/// Whether request path `want` selects the leaf at `leaf` (see the module doc for the rule).
///
/// A set of states, one per position in `want`, advanced once per leaf element: the cost is
/// `want.len() × leaf.len()` whatever the wildcards, where trying every split of the leaf among the
/// `...`s would be exponential in their number.
pub fn selects(want: &[Elem], leaf: &[Elem]) -> bool {
    let end = want.len();
    let mut now = vec![false; end + 1];
    let mut next = vec![false; end + 1];
    now[0] = true;
    skip_any(want, &mut now);
    for l in leaf {
        if now[end] {
            return true; // `want` ended above this leaf: it selects everything below
        }
        next.fill(false);
        let mut live = false;
        for (i, w) in want.iter().enumerate() {
            if !now[i] {
                continue;
            }
            if w.name == "..." {
                next[i] = true; // `...` takes this element and may take more
                live = true;
            } else if elem_selects(w, l) {
                next[i + 1] = true;
                live = true;
            }
        }
        if !live {
            return false;
        }
        skip_any(want, &mut next);
        std::mem::swap(&mut now, &mut next);
    }
    now[end]
}

/// Adds to `states` every position reached by letting a `...` take no element.
fn skip_any(want: &[Elem], states: &mut [bool]) {
    for (i, w) in want.iter().enumerate() {
        if states[i] && w.name == "..." {
            states[i + 1] = true;
        }
    }
}

fn elem_selects(w: &Elem, l: &Elem) -> bool {
    (w.name == "*" || w.name == l.name)
        && w.keys
            .iter()
            .all(|(k, v)| l.keys.get(k).is_some_and(|lv| v == "*" || v == lv))
}

/// Whether `elems` holds a wildcard (a Set must name one leaf).
pub fn has_wildcard(elems: &[Elem]) -> bool {
    elems
        .iter()
        .any(|e| e.name == "*" || e.name == "..." || e.keys.values().any(|v| v == "*"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Vec<Elem> {
        parse(s).unwrap()
    }

    #[test]
    fn text_paths_parse_with_keys() {
        let e = p("/interfaces/interface[name=eth0]/state/counters");
        assert_eq!(e.len(), 4);
        assert_eq!(e[1].keys.get("name").map(String::as_str), Some("eth0"));
        assert_eq!(text(&e), "/interfaces/interface[name=eth0]/state/counters");
        assert!(parse("/a[b").is_err());
        assert!(parse("/a]").is_err());
        assert!(parse("/a//b").is_err());
        assert!(parse("/").unwrap().is_empty());
    }

    #[test]
    fn wildcards_select_as_the_conventions_say() {
        let leaf = p("/interfaces/interface[name=eth1]/state/counters/in-octets");
        for yes in [
            "/interfaces",
            "/interfaces/interface/state",
            "/interfaces/interface[name=*]/state/counters/in-octets",
            "/interfaces/interface[name=eth1]",
            "/*/interface/*/counters",
            "/interfaces/.../in-octets",
            "/...",
            "/.../interface[name=eth1]/.../in-octets",
        ] {
            assert!(selects(&p(yes), &leaf), "{yes}");
        }
        for no in [
            "/interfaces/interface[name=eth0]",
            "/system",
            "/interfaces/interface[index=1]",
            "/interfaces/*/in-octets",
            "/interfaces/interface/state/counters/in-octets/more",
        ] {
            assert!(!selects(&p(no), &leaf), "{no}");
        }
        assert!(has_wildcard(&p("/a[name=*]")) && !has_wildcard(&p("/a[name=x]/b")));
        assert!(selects(&p("/.../.../interface/.../in-octets/..."), &leaf));
        assert!(!selects(&p("/.../eth1/..."), &leaf));
    }

    /// The matcher the conventions describe, written as the recursion it is, to check the fast one.
    fn by_splits(want: &[Elem], leaf: &[Elem]) -> bool {
        match want.split_first() {
            None => true,
            Some((w, rest)) if w.name == "..." => {
                (0..=leaf.len()).any(|k| by_splits(rest, &leaf[k..]))
            }
            Some((w, rest)) => match leaf.split_first() {
                Some((l, tail)) => elem_selects(w, l) && by_splits(rest, tail),
                None => false,
            },
        }
    }

    #[test]
    fn the_matcher_agrees_with_trying_every_split() {
        let leaves = [
            p("/interfaces/interface[name=eth1]/state/counters/in-octets"),
            p("/system/state/hostname"),
            p("/a/a/a/b"),
        ];
        let parts = [
            "...",
            "*",
            "a",
            "b",
            "interfaces",
            "state",
            "interface[name=eth1]",
            "in-octets",
        ];
        // Every want of up to four parts: 8 + 64 + 512 + 4096 paths against each leaf.
        let mut wants = vec![String::new()];
        for _ in 0..4 {
            let mut more = Vec::new();
            for w in &wants {
                for part in parts {
                    more.push(format!("{w}/{part}"));
                }
            }
            for w in &more {
                for leaf in &leaves {
                    assert_eq!(selects(&p(w), leaf), by_splits(&p(w), leaf), "{w}");
                }
            }
            wants = more;
        }
    }

    #[test]
    fn many_wildcards_cost_time_linear_in_the_path() {
        let leaf = p("/interfaces/interface[name=eth1]/state/counters/in-octets");
        let mut want = vec![
            Elem {
                name: "...".into(),
                keys: BTreeMap::new()
            };
            10_000
        ];
        want.push(Elem {
            name: "nothing-here".into(),
            keys: BTreeMap::new(),
        });
        let t = std::time::Instant::now();
        for _ in 0..10 {
            assert!(!selects(&want, &leaf));
        }
        // The recursion takes hours on this; the state set, a few milliseconds (debug build).
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn origins_other_than_openconfig_are_refused() {
        let path = Path {
            origin: "cli".into(),
            ..Path::default()
        };
        assert_eq!(
            join(None, Some(&path)),
            Err(PathError::Origin("cli".into()))
        );
        let q = to_proto(&p("/openconfig-interfaces:interfaces/interface"));
        assert_eq!(join(None, Some(&q)).unwrap()[0].name, "interfaces");
    }
}

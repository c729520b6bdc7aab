//! The crate's public API is a checked-in list (`tests/public_api.txt`), so a change to it is
//! deliberate: this test compares the list with every `pub` declaration in the sources (items, fields,
//! re-exports and trait methods, by file, with their signature up to the body), skipping unit-test code and the modules
//! the crate root declares `pub(crate)`. It reads declarations, not rustdoc's view: a `pub` item in a
//! private submodule that is not re-exported is listed too (the list errs on the side of showing more).
//! A mismatch prints the difference; after a deliberate change, regenerate the list with
//!
//!   NL6_PROFILE_API_UPDATE=1 cargo test -p nl6-profile --test public_api
//!
//! and say why in the commit. The crate README's "Public API" section is this list, grouped by module.
use std::path::{Path, PathBuf};

const API_START: &str = "<!-- public-api -->\n";
const API_END: &str = "<!-- /public-api -->";

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `pub` declarations of one source file, `file: signature`, outside `#[cfg(test)]` modules.
fn declarations(rel: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_depth: Option<usize> = None;
    let mut depth = 0usize;
    let mut pending_test = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("#[cfg(test)]") {
            pending_test = true;
        }
        let opens = line.matches('{').count();
        let closes = line.matches('}').count();
        if pending_test && t.starts_with("mod ") {
            pending_test = false;
            if t.ends_with(';') {
                continue;
            }
            skip_depth = Some(depth);
        }
        if skip_depth.is_none() && t.starts_with("pub ") && !t.starts_with("pub(") {
            let sig = t
                .split(" {")
                .next()
                .unwrap()
                .trim_end_matches(['{', ';', ','])
                .trim();
            out.push(format!("{rel}: {sig}"));
        }
        depth = (depth + opens).saturating_sub(closes);
        if let Some(d) = skip_depth {
            if depth <= d && closes > 0 {
                skip_depth = None;
            }
        }
    }
    out
}

#[test]
fn the_public_api_is_the_checked_in_list() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    // Modules the crate root keeps private hold no public API, whatever they declare `pub`.
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let private: Vec<String> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub(crate) mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect();
    let mut now = Vec::new();
    for f in files {
        let rel = f
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let hidden = private
            .iter()
            .any(|m| rel == format!("src/{m}.rs") || rel.starts_with(&format!("src/{m}/")));
        if rel.ends_with("/tests.rs") || hidden {
            continue;
        }
        now.extend(declarations(&rel, &std::fs::read_to_string(&f).unwrap()));
    }
    let listed_path = root.join("tests/public_api.txt");
    let text = now.join("\n") + "\n";
    if std::env::var_os("NL6_PROFILE_API_UPDATE").is_some() {
        std::fs::write(&listed_path, &text).unwrap();
    }
    let readme_path = root.join("README.md");
    let readme = std::fs::read_to_string(&readme_path).unwrap();
    let (head, rest) = readme
        .split_once(API_START)
        .expect("README has the public API section");
    let (_, tail) = rest
        .split_once(API_END)
        .expect("README's public API section ends");
    let section = format!("{API_START}```text\n{text}```\n{API_END}");
    if std::env::var_os("NL6_PROFILE_API_UPDATE").is_some() {
        std::fs::write(&readme_path, format!("{head}{section}{tail}")).unwrap();
    } else {
        assert!(
            readme.contains(&section),
            "README's public API section is not tests/public_api.txt (regenerate both)"
        );
    }
    let listed = std::fs::read_to_string(&listed_path).unwrap_or_default();
    let listed: Vec<&str> = listed.lines().collect();
    let added: Vec<&String> = now
        .iter()
        .filter(|l| !listed.contains(&l.as_str()))
        .collect();
    let removed: Vec<&&str> = listed
        .iter()
        .filter(|l| !now.iter().any(|n| n == **l))
        .collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "the public API changed (regenerate tests/public_api.txt if deliberate):\nadded:\n  {}\nremoved:\n  {}",
        added.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  "),
        removed.iter().map(|s| **s).collect::<Vec<_>>().join("\n  ")
    );
}

#[test]
fn the_scan_sees_items_and_skips_test_modules() {
    let src = "pub fn a(x: u8) -> u8 {\n    x\n}\npub(crate) fn b() {}\n#[cfg(test)]\nmod tests {\n    pub fn c() {}\n}\npub struct D {\n    pub e: u8,\n}\n";
    assert_eq!(
        declarations("f.rs", src),
        [
            "f.rs: pub fn a(x: u8) -> u8",
            "f.rs: pub struct D",
            "f.rs: pub e: u8"
        ]
    );
}

/// Every public type prints with `{:?}` (a type added to the API without `Debug` fails to compile here
/// once it is listed; the list is checked against the snapshot's `pub struct`/`pub enum` lines).
#[test]
fn every_public_type_is_debug() {
    fn debug<T: std::fmt::Debug + ?Sized>(name: &str) -> String {
        let _ = std::marker::PhantomData::<T>;
        name.to_string()
    }
    use nl6_profile::*;
    let checked = [
        debug::<cpu::UnarmedThread>("UnarmedThread"),
        debug::<cpu::Coverage>("Coverage"),
        debug::<cpu::CpuError>("CpuError"),
        debug::<cpu::CpuSample>("CpuSample"),
        debug::<cpu::CpuProfile>("CpuProfile"),
        debug::<cpu::CpuSession>("CpuSession"),
        debug::<delta::HeapDelta>("HeapDelta"),
        debug::<delta::ContentionDelta>("ContentionDelta"),
        debug::<encode::HeapView>("HeapView"),
        debug::<heap::SamplingAllocator>("SamplingAllocator"),
        debug::<heap::HeapRecord>("HeapRecord"),
        debug::<heap::HeapSnapshot>("HeapSnapshot"),
        debug::<labels::Labelled<std::future::Ready<()>>>("Labelled"),
        debug::<labels::LabelSet>("LabelSet"),
        debug::<labels::LabelError>("LabelError"),
        debug::<labels::Entered>("Entered"),
        debug::<proto::Profile>("Profile"),
        debug::<proto::ValueType>("ValueType"),
        debug::<proto::Sample>("Sample"),
        debug::<proto::Label>("Label"),
        debug::<proto::Mapping>("Mapping"),
        debug::<proto::Location>("Location"),
        debug::<proto::Line>("Line"),
        debug::<proto::Function>("Function"),
        debug::<proto::DecodeError>("DecodeError"),
        debug::<pull::PullFuture>("PullFuture"),
        debug::<pull::PullRequest>("PullRequest"),
        debug::<pull::PullResponse>("PullResponse"),
        debug::<pull::ProfileEntry>("ProfileEntry"),
        debug::<pull::PullRoute>("PullRoute"),
        debug::<pull::PullSurface>("PullSurface"),
        debug::<SignalOptions>("SignalOptions"),
        debug::<SignalError>("SignalError"),
        debug::<threads::Missing>("Missing"),
        debug::<threads::ThreadStack>("ThreadStack"),
        debug::<wall::WallConfig>("WallConfig"),
        debug::<wall::WallError>("WallError"),
        debug::<wall::WallSample>("WallSample"),
        debug::<wall::WallProfile>("WallProfile"),
        debug::<wall::WallSession>("WallSession"),
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let listed = std::fs::read_to_string(root.join("tests/public_api.txt")).unwrap();
    for line in listed.lines() {
        let Some(decl) = line
            .split_once(": pub struct ")
            .or_else(|| line.split_once(": pub enum "))
            .map(|(_, d)| d)
        else {
            continue;
        };
        let name: String = decl
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        assert!(
            checked.contains(&name),
            "{name} is public: add it to every_public_type_is_debug"
        );
    }
}

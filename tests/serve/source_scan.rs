//! The profiling engine never opens a listener or a socket (its dependency tree holds no HTTP or TLS crate;
//! this scan also keeps std::net and libc socket calls out): every source file under crates/nl6-profile/src/ is
//! scanned (comments stripped) for the APIs that would. The push's outbound client lives in crates/nl6-push,
//! outside this set.
use std::path::{Path, PathBuf};

/// Identifiers and calls that open, bind, accept or connect sockets.
const FORBIDDEN: &[&str] = &[
    "TcpListener",
    "TcpStream",
    "UdpSocket",
    "UnixListener",
    "UnixStream",
    "UnixDatagram",
    "std::net",
    "std::os::unix::net",
    "ureq",
    "socket(",
    "socketpair(",
    "bind(",
    "connect(",
    "listen(",
    "accept(",
    "accept4(",
];

/// Code without `//` comments (doc comments included) — a comment may say "never opens a socket".
fn code_only(source: &str) -> String {
    source
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Forbidden names found in `source`, each preceded by a non-identifier character (so `rebind(` is fine).
fn findings(source: &str) -> Vec<&'static str> {
    let code = code_only(source);
    FORBIDDEN
        .iter()
        .copied()
        .filter(|pat| {
            code.match_indices(pat).any(|(i, _)| {
                i == 0
                    || !code[..i]
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_scanner_catches_what_it_should() {
    assert_eq!(
        findings("let l = std::net::TcpListener::bind(a);"),
        ["TcpListener", "std::net", "bind("]
    );
    assert_eq!(findings("unsafe { libc::socket(2, 1, 0) }"), ["socket("]);
    assert_eq!(findings("unsafe { libc::connect(fd, p, n) }"), ["connect("]);
    assert!(findings("// never opens a TcpListener or calls socket(\nfn rebind() {}").is_empty());
}

#[test]
fn profiling_sources_open_no_listener_or_socket() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/nl6-profile/src");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    assert!(
        files.len() >= 5,
        "expected the engine's files under {}",
        dir.display()
    );
    let mut bad = Vec::new();
    for f in &files {
        let found = findings(&std::fs::read_to_string(f).unwrap());
        if !found.is_empty() {
            bad.push(format!("{}: {found:?}", f.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "socket APIs in the profiling engine:\n{}",
        bad.join("\n")
    );
}

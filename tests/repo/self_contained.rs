//! A clone of the repository with nothing beside it must build and test: no file of the
//! project may point at a folder outside the checkout that a user's clone does not have (the team's
//! `shared` folder beside it, or its environment variable), and the push tests' `/ingest` double and its
//! build script must be in the repository.

use std::path::{Path, PathBuf};

/// Spelled in pieces so that this file does not match itself.
fn forbidden() -> [String; 3] {
    [
        format!("..{}shared", '/'),
        format!("NL6_{}", "SHARED"),
        format!("/work{}shared", '/'),
    ]
}

/// Every file under `dir` except build output and VCS data.
fn project_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if name == ".git" || name.starts_with("target") {
                continue;
            }
            project_files(&path, out);
        } else if kind.is_file() {
            out.push(path);
        }
    }
}

#[test]
fn no_file_points_outside_the_checkout() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    project_files(root, &mut files);
    assert!(files.len() > 50, "walked only {} files", files.len());
    let patterns = forbidden();
    let mut hits = Vec::new();
    for file in &files {
        let Ok(bytes) = std::fs::read(file) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        for (n, line) in text.lines().enumerate() {
            if patterns.iter().any(|p| line.contains(p.as_str())) {
                let shown = file.strip_prefix(root).unwrap_or(file).display();
                hits.push(format!("{shown}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "files that refer to a folder outside the checkout:\n{}",
        hits.join("\n")
    );
}

#[test]
fn the_ingest_double_and_its_build_script_are_in_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for file in [
        "tests/pyroscope-ingest/main.go",
        "tests/pyroscope-ingest/ingest.go",
        "tests/pyroscope-ingest/rules.go",
        "tests/pyroscope-ingest/store.go",
        "scripts/build-pyroscope-ingest.sh",
    ] {
        assert!(root.join(file).is_file(), "{file} is missing");
    }
    let test_sh = std::fs::read_to_string(root.join("scripts/test.sh")).unwrap();
    assert!(
        test_sh.contains("scripts/build-pyroscope-ingest.sh"),
        "scripts/test.sh builds the double from the repository"
    );
}

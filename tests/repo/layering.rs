//! Dependencies one way: the layer order written in ARCHITECTURE.md ("Layers") is what the
//! code does. For nl6's top-level modules, for the lab's submodules and for the engine crate's modules,
//! every `crate::NAME` (`crate::lab::NAME` in the lab) and every `super::` path that reaches the tree's
//! root is an edge; an edge may only go to a lower layer, so no import cycle can exist between two
//! modules. Every module must be in the table.
//!
//!   cargo test --test repo layering::
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One crate's modules and the top-level names each of them uses.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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

/// The code of a file without `//` comments (doc links are not dependencies). A `//` inside a string
/// literal (`"http://…"`) is not a comment: the rest of that line is still code.
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| &l[..comment_start(l)])
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where a line's `//` comment starts (its length when it has none), skipping string and char literals.
fn comment_start(line: &str) -> usize {
    let bytes = line.as_bytes();
    let (mut i, mut in_string) = (0, false);
    while i < bytes.len() {
        match (in_string, bytes[i]) {
            (true, b'\\') => i += 1,
            (true, b'"') => in_string = false,
            (false, b'"') => in_string = true,
            (false, b'\'') if bytes.get(i + 2) == Some(&b'\'') => i += 2,
            (false, b'/') if bytes.get(i + 1) == Some(&b'/') => return i,
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

#[test]
fn a_double_slash_inside_a_string_is_not_a_comment() {
    let line = r#"let u = "http://x"; use crate::gate; // crate::cli"#;
    assert_eq!(code_of(line), r#"let u = "http://x"; use crate::gate; "#);
    assert_eq!(code_of("a // b"), "a ");
    assert_eq!(code_of(r#"'"' // x"#), r#"'"' "#);
}

/// The first identifier of each item of a `{a::b, c, d::{e}}` group (the text after the `{`).
fn group_heads(group: &str) -> Vec<String> {
    let (mut depth, mut heads, mut item) = (1, Vec::new(), String::new());
    let mut at_start = true;
    for c in group.chars() {
        let ident = c.is_alphanumeric() || c == '_';
        if depth == 1 && at_start && ident {
            item.push(c);
            continue;
        }
        if !item.is_empty() {
            heads.push(std::mem::take(&mut item));
            at_start = false;
        }
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => at_start = true,
            _ => {}
        }
    }
    heads
}

/// The names used after each occurrence of `prefix` (`crate::`, `super::super::`) in `code`.
fn names_after(code: &str, prefix: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + prefix.len()..];
        // `a::super::` or `nl6_crate::` are not this path.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            names.extend(group_heads(group));
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != "super" {
                names.push(name);
            }
        }
    }
    names
}

/// One tree of modules: its directory, the file that declares its modules (`lib.rs`, `mod.rs`) and the
/// path that names its root from anywhere in the crate (`crate::`, `crate::lab::`).
struct Tree<'a> {
    src: &'a Path,
    root: &'a str,
    prefix: &'a str,
}

/// The modules a root file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn declared_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l
                .strip_prefix("pub(crate) mod ")
                .or_else(|| l.strip_prefix("pub mod "))
                .or_else(|| l.strip_prefix("mod "))?;
            Some(rest.strip_suffix(';')?.to_string())
        })
        .collect()
}

/// The module graph of the tree whose sources are in `tree.src`: a file belongs to the top-level module
/// of its first path component (a file that is no module's, e.g. one included with `#[path]`, belongs to
/// the module whose file names it).
fn graph_of(tree: &Tree) -> Graph {
    let src = tree.src;
    let modules = declared_modules(&std::fs::read_to_string(src.join(tree.root)).unwrap());
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let texts: Vec<(PathBuf, String)> = files
        .into_iter()
        .map(|f| {
            let t = std::fs::read_to_string(&f).unwrap();
            (f, t)
        })
        .collect();
    let mut graph: Graph = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    for (file, text) in &texts {
        let rel = file.strip_prefix(src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let stem = first.trim_end_matches(".rs").to_string();
        let owner = if modules.contains(&stem) {
            stem
        } else {
            let needle = format!("#[path = \"{first}\"]");
            match texts.iter().find(|(_, t)| t.contains(&needle)) {
                Some((f, _)) => {
                    let f = f.strip_prefix(src).unwrap();
                    let c = f.components().next().unwrap().as_os_str().to_string_lossy();
                    c.trim_end_matches(".rs").to_string()
                }
                None => continue, // lib.rs, main.rs, mod.rs: the root, which may use anything
            }
        };
        // `super::` hops from this file's module to the tree's root.
        let depth = rel.components().count() - usize::from(rel.ends_with("mod.rs"));
        let code = code_of(text);
        let mut used = names_after(&code, tree.prefix);
        used.extend(names_after(&code, &"super::".repeat(depth)));
        let deps = graph.get_mut(&owner).unwrap();
        deps.extend(
            used.into_iter()
                .filter(|n| *n != owner && modules.contains(n)),
        );
    }
    graph
}

/// The layers of a table in ARCHITECTURE.md: the lines between `<!-- layers: NAME -->` and
/// `<!-- /layers -->`, top first; each line's backticked names are one layer.
fn layers(architecture: &str, name: &str) -> Vec<Vec<String>> {
    let start = format!("<!-- layers: {name} -->");
    let body = architecture
        .split_once(&start)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no {start} table"))
        .1;
    let body = body
        .split_once("<!-- /layers -->")
        .expect("<!-- /layers --> closes the table")
        .0;
    body.lines()
        .map(|l| {
            l.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|names| !names.is_empty())
        .collect()
}

/// What breaks the order: modules missing from the table, and edges to the same or a higher layer.
fn violations(graph: &Graph, layers: &[Vec<String>]) -> Vec<String> {
    let layer_of: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, names)| names.iter().map(move |n| (n.as_str(), i)))
        .collect();
    let mut out = Vec::new();
    for (module, deps) in graph {
        let Some(&mine) = layer_of.get(module.as_str()) else {
            out.push(format!("`{module}` is in no layer of ARCHITECTURE.md"));
            continue;
        };
        for dep in deps {
            match layer_of.get(dep.as_str()) {
                Some(&theirs) if theirs > mine => {}
                Some(&theirs) => out.push(format!(
                    "`{module}` (layer {}) uses `{dep}` (layer {}): a module may use only lower layers{}",
                    mine + 1,
                    theirs + 1,
                    if graph.get(dep).is_some_and(|d| d.contains(module)) {
                        " — and they use each other: an import cycle"
                    } else {
                        ""
                    }
                )),
                None => {} // reported as missing from the table on its own line
            }
        }
    }
    for name in layer_of.keys() {
        if !graph.contains_key(*name) {
            out.push(format!(
                "ARCHITECTURE.md lists `{name}`, which is no module"
            ));
        }
    }
    out
}

fn check(tree: &Tree, table: &str) {
    let architecture = std::fs::read_to_string(manifest_dir().join("ARCHITECTURE.md")).unwrap();
    let graph = graph_of(tree);
    assert!(
        graph.len() >= 5,
        "too few modules found under {}",
        tree.src.display()
    );
    let bad = violations(&graph, &layers(&architecture, table));
    assert!(
        bad.is_empty(),
        "the code breaks ARCHITECTURE.md's layer order ({table}):\n{}\n\nthe graph: {graph:#?}",
        bad.join("\n")
    );
}

fn crate_tree(src: &Path) -> Tree<'_> {
    Tree {
        src,
        root: "lib.rs",
        prefix: "crate::",
    }
}

#[test]
fn nl6_modules_use_only_lower_layers() {
    check(&crate_tree(&manifest_dir().join("src")), "nl6");
}

/// The lab's own order: what several protocols share (sending as a device, the device, its address
/// range) sits below them, the protocols below the fleet that assembles them, so sharing goes one way.
#[test]
fn lab_submodules_use_only_lower_layers() {
    let src = manifest_dir().join("src/lab");
    let tree = Tree {
        src: &src,
        root: "mod.rs",
        prefix: "crate::lab::",
    };
    check(&tree, "lab");
}

#[test]
fn engine_modules_use_only_lower_layers() {
    check(
        &crate_tree(&manifest_dir().join("crates/nl6-profile/src")),
        "nl6-profile",
    );
}

#[test]
fn the_checker_sees_paths_groups_and_cycles() {
    let code = code_of(
        "use crate::{alpha::X, beta, gamma::{self, Y}};\nuse super::super::delta;\n\
         fn f() { crate::eps::go(); other_crate::zeta::no(); } // crate::comment",
    );
    assert_eq!(
        names_after(&code, "crate::"),
        ["alpha", "beta", "gamma", "eps"]
    );
    assert_eq!(names_after(&code, "super::super::"), ["delta"]);
    let graph: Graph = [("a", vec!["b"]), ("b", vec!["a"]), ("c", vec![])]
        .into_iter()
        .map(|(m, d)| (m.to_string(), d.into_iter().map(str::to_string).collect()))
        .collect();
    let table = |rows: &[&[&str]]| -> Vec<Vec<String>> {
        rows.iter()
            .map(|r| r.iter().map(|s| s.to_string()).collect())
            .collect()
    };
    let bad = violations(&graph, &table(&[&["a"], &["b"], &["c"]]));
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(
        bad[0].contains("`b` (layer 2) uses `a`") && bad[0].contains("cycle"),
        "{bad:?}"
    );
    let missing = violations(&graph, &table(&[&["a"], &["b"]]));
    assert!(
        missing.iter().any(|l| l.contains("`c` is in no layer")),
        "{missing:?}"
    );
}

//! Dependencies one way: the layer order written in ARCHITECTURE.md ("Layers") is what the code does,
//! at every level of the module tree. The tree is read from `lib.rs` down (`mod x;` declarations and
//! their `#[path]`s); every `crate::…` and `super::…` path in a file is resolved to the module it names
//! (through its parent's `use` of a child's item, as `super::Store` names `store`). An edge from module
//! `a::b::x` to `a::c::y` belongs to their nearest common module `a`, as the edge `b` → `c`: in `a`'s
//! table (`<!-- layers: a -->`, `nl6` for the crate root) it may only go to a lower layer, so no import
//! cycle can exist between two files. Every module with two or more submodules has a table, and every
//! submodule is in it. A module's own file is its face: it may use its submodules, and they its items.
//!
//!   cargo test --test repo layering::
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The submodules of one module and the submodules each of them uses.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// A module path from the crate root (`["collect", "store"]`; empty for the root).
type ModPath = Vec<String>;

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

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The paths of one path or use tree starting at `s[*i]`, groups flattened onto `prefix`:
/// `{a::X, b::{self, Y}}` gives `a::X`, `b`, `b::Y`. A path ends where its segments do (`as`, `*`,
/// `(`, `<`).
fn use_tree(s: &[u8], i: &mut usize, prefix: &mut ModPath, out: &mut Vec<ModPath>) {
    let depth = prefix.len();
    loop {
        if s.get(*i) == Some(&b'{') {
            *i += 1;
            while *i < s.len() {
                while s.get(*i).is_some_and(u8::is_ascii_whitespace) {
                    *i += 1;
                }
                if s.get(*i) == Some(&b'}') {
                    *i += 1;
                    break;
                }
                use_tree(s, i, prefix, out);
                // What follows an item (` as y`) up to its comma or the group's end.
                while s.get(*i).is_some_and(|c| *c != b',' && *c != b'}') {
                    *i += 1;
                }
                if s.get(*i) == Some(&b',') {
                    *i += 1;
                }
            }
            prefix.truncate(depth);
            return;
        }
        let start = *i;
        while s.get(*i).is_some_and(|c| is_ident(*c)) {
            *i += 1;
        }
        if *i == start {
            break;
        }
        let ident = std::str::from_utf8(&s[start..*i]).unwrap();
        if ident != "self" {
            prefix.push(ident.to_string());
        }
        if s[*i..].starts_with(b"::") {
            *i += 2;
        } else {
            break;
        }
    }
    if !prefix.is_empty() {
        out.push(prefix.clone());
    }
    prefix.truncate(depth);
}

/// Every path after `prefix` (`crate::`, `super::super::`) in `code`, groups flattened.
fn paths_after(code: &str, prefix: &str) -> Vec<ModPath> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(at) = code[from..].find(prefix).map(|i| from + i) {
        from = at + prefix.len();
        // `a::super::` or `nl6_crate::` are not this path, nor is a longer `super::` chain.
        let before = code[..at].bytes().next_back();
        if before.is_some_and(|c| is_ident(c) || c == b':') || code[from..].starts_with("super::") {
            continue;
        }
        let mut i = from;
        use_tree(bytes, &mut i, &mut Vec::new(), &mut out);
    }
    out
}

/// A path in a file: how many `super::` it climbs (`None`: from `crate::`) and its segments.
type Reference = (Option<usize>, ModPath);

fn references(code: &str) -> Vec<Reference> {
    let mut refs: Vec<Reference> = paths_after(code, "crate::")
        .into_iter()
        .map(|p| (None, p))
        .collect();
    // The deepest file in the crate is a few levels down; 8 `super::` is more than any uses.
    for up in 1..8 {
        let prefix = "super::".repeat(up);
        refs.extend(
            paths_after(code, &prefix)
                .into_iter()
                .map(|p| (Some(up), p)),
        );
    }
    refs
}

/// One module of the tree: its file, its submodules, and the names its file brings in from a
/// submodule with `use` (what `super::NAME` reaches through it).
#[derive(Default)]
struct Module {
    file: PathBuf,
    children: BTreeSet<String>,
    imports: BTreeMap<String, String>,
}

type Modules = BTreeMap<ModPath, Module>;

/// The modules a file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`), each with its
/// `#[path = "…"]` if it has one.
fn declared_modules(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut path_attr = None;
    for l in text.lines().map(str::trim) {
        if let Some(p) = l.strip_prefix("#[path = \"") {
            path_attr = p.strip_suffix("\"]").map(str::to_string);
            continue;
        }
        if l.starts_with("#[") {
            continue;
        }
        let rest = l
            .strip_prefix("pub(crate) mod ")
            .or_else(|| l.strip_prefix("pub(super) mod "))
            .or_else(|| l.strip_prefix("pub mod "))
            .or_else(|| l.strip_prefix("mod "));
        if let Some(name) = rest.and_then(|r| r.strip_suffix(';')) {
            out.push((name.to_string(), path_attr.take()));
        }
        path_attr = None;
    }
    out
}

/// The names a module's file takes from its own submodules with `use` (`use store::Store;`,
/// `pub use self::agent::{respond, Message};`): what its submodules reach as `super::NAME`.
fn imports_of(code: &str, children: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (at, _) in code.match_indices("use ") {
        let line_start = code[..at].rfind('\n').map_or(0, |i| i + 1);
        let head = code[line_start..at].trim();
        if !(head.is_empty() || head == "pub" || head.starts_with("pub(")) {
            continue;
        }
        let tree = code[at + 4..].split(';').next().unwrap_or("").trim_start();
        let tree = tree.strip_prefix("self::").unwrap_or(tree);
        let mut paths = Vec::new();
        use_tree(tree.as_bytes(), &mut 0, &mut Vec::new(), &mut paths);
        for p in paths
            .into_iter()
            .filter(|p| p.len() >= 2 && children.contains(&p[0]))
        {
            out.insert(p.last().unwrap().clone(), p[0].clone());
        }
    }
    out
}

/// The module at `path` in `file` and everything below it. `mod_rs`: its submodules' files sit beside
/// it (`lib.rs`, `mod.rs`, a `#[path]` file) rather than in a folder named after it.
fn load(path: ModPath, file: &Path, mod_rs: bool, out: &mut Modules) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let dir = file.parent().unwrap();
    let base = if mod_rs {
        dir.to_path_buf()
    } else {
        dir.join(file.file_stem().unwrap())
    };
    let mut children = BTreeSet::new();
    for (name, attr) in declared_modules(&text) {
        let mut child = path.clone();
        child.push(name.clone());
        let (child_file, child_mod_rs) = match attr {
            Some(p) => (dir.join(p), true),
            None if base.join(format!("{name}.rs")).exists() => {
                (base.join(format!("{name}.rs")), false)
            }
            None => (base.join(&name).join("mod.rs"), true),
        };
        load(child, &child_file, child_mod_rs, out);
        children.insert(name);
    }
    let imports = imports_of(&code_of(&text), &children);
    let module = Module {
        file: file.to_path_buf(),
        children,
        imports,
    };
    out.insert(path, module);
}

/// The module `reference` names from a file of module `from`: as deep as its segments name
/// submodules, then one step through a name the last module's file takes from a submodule.
fn resolve(modules: &Modules, from: &[String], (up, path): &Reference) -> Option<ModPath> {
    let mut at: ModPath = match up {
        None => Vec::new(),
        Some(up) => from.get(..from.len().checked_sub(*up)?)?.to_vec(),
    };
    for segment in path {
        let module = modules.get(&at)?;
        if module.children.contains(segment) {
            at.push(segment.clone());
            continue;
        }
        if let Some(child) = module.imports.get(segment) {
            at.push(child.clone());
        }
        break;
    }
    Some(at)
}

/// Each module's graph of its submodules: the edge from `a::b::…` to `a::c::…` is `b` → `c` in `a`'s.
fn graphs(modules: &Modules, refs: &BTreeMap<ModPath, Vec<Reference>>) -> BTreeMap<ModPath, Graph> {
    let mut out: BTreeMap<ModPath, Graph> = BTreeMap::new();
    for (path, module) in modules {
        if module.children.len() >= 2 {
            let graph = module
                .children
                .iter()
                .map(|c| (c.clone(), BTreeSet::new()))
                .collect();
            out.insert(path.clone(), graph);
        }
    }
    for (from, refs) in refs {
        for to in refs.iter().filter_map(|r| resolve(modules, from, r)) {
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue; // a module using what is below it, or its own face's items
            }
            if let Some(graph) = out.get_mut(&from[..common]) {
                let edges = graph.entry(from[common].clone()).or_default();
                edges.insert(to[common].clone());
            }
        }
    }
    out
}

/// The layers of a table in ARCHITECTURE.md: the lines between `<!-- layers: NAME -->` and
/// `<!-- /layers -->`, top first; each line's backticked names are one layer.
fn layers(architecture: &str, name: &str) -> Option<Vec<Vec<String>>> {
    let start = format!("<!-- layers: {name} -->");
    let body = architecture.split_once(&start)?.1;
    let body = body
        .split_once("<!-- /layers -->")
        .expect("<!-- /layers --> closes the table")
        .0;
    let rows = body
        .lines()
        .map(|l| {
            l.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|names| !names.is_empty())
        .collect();
    Some(rows)
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

/// Whether some modules of `graph` use each other, directly or through others.
fn has_cycle(graph: &Graph) -> bool {
    fn visit<'a>(
        graph: &'a Graph,
        n: &'a str,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> bool {
        if path.contains(&n) {
            return true;
        }
        if !done.insert(n) {
            return false;
        }
        path.push(n);
        let found = graph
            .get(n)
            .is_some_and(|deps| deps.iter().any(|d| visit(graph, d, path, done)));
        path.pop();
        found
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .any(|n| visit(graph, n, &mut Vec::new(), &mut done))
}

/// A module's table name: `root` for the crate root, else its path (`collect`, `http::server`).
fn table_name(root: &str, path: &[String]) -> String {
    match (root, path.is_empty()) {
        (_, true) => root.to_string(),
        // nl6's own tables go by module path; another crate's carry its name, so the two never clash.
        ("nl6", false) => path.join("::"),
        (_, false) => format!("{root}::{}", path.join("::")),
    }
}

/// The module tree under `src/lib.rs`, every file's references, and a check that every `.rs` file
/// under `src` is one of its modules (the binary's `main.rs` aside) so none escapes the order.
fn crate_graphs(src: &Path) -> (Modules, BTreeMap<ModPath, Graph>) {
    let mut modules = Modules::new();
    load(Vec::new(), &src.join("lib.rs"), true, &mut modules);
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let known: BTreeSet<&Path> = modules.values().map(|m| m.file.as_path()).collect();
    let stray: Vec<_> = files
        .iter()
        .filter(|f| !known.contains(f.as_path()) && !f.ends_with("main.rs"))
        .collect();
    assert!(stray.is_empty(), "files no `mod` declares: {stray:?}");
    let refs = modules
        .iter()
        .map(|(path, m)| {
            let text = std::fs::read_to_string(&m.file).unwrap();
            (path.clone(), references(&code_of(&text)))
        })
        .collect();
    let graphs = graphs(&modules, &refs);
    (modules, graphs)
}

/// Checks every module of the crate at `src` against its table, down to `depth` levels (1: the crate
/// root's modules only), except those in `pending` (which must still break the order: once one no
/// longer does, it comes off the list and gets its table).
fn check(src: &Path, root: &str, depth: usize, pending: &[&str]) {
    let architecture = std::fs::read_to_string(manifest_dir().join("ARCHITECTURE.md")).unwrap();
    let (modules, graphs) = crate_graphs(src);
    assert!(
        modules.len() >= 10 && graphs.get(&Vec::new()).is_some_and(|g| g.len() >= 5),
        "too few modules found under {}",
        src.display()
    );
    let mut bad = Vec::new();
    for (path, graph) in graphs.iter().filter(|(p, _)| p.len() < depth) {
        let name = table_name(root, path);
        let found = layers(&architecture, &name);
        let problems = match &found {
            Some(rows) => violations(graph, rows),
            None => vec![format!("no `<!-- layers: {name} -->` table")],
        };
        if pending.contains(&name.as_str()) {
            assert!(
                has_cycle(graph) && found.is_none(),
                "`{name}` has no import cycle now: take it off the pending list and give it its table"
            );
            continue;
        }
        if !problems.is_empty() {
            bad.extend(problems.iter().map(|p| format!("{name}: {p}")));
            bad.push(format!("  ({name}'s graph: {graph:?})"));
        }
    }
    assert!(
        bad.is_empty(),
        "the code breaks ARCHITECTURE.md's layer order:\n{}",
        bad.join("\n")
    );
}

/// Every module of nl6, at every depth: the top-level modules, the lab's protocols over what they
/// share, collect's store over its bucket, the server over its connection code…
#[test]
fn nl6_modules_use_only_lower_layers() {
    check(&manifest_dir().join("src"), "nl6", usize::MAX, PENDING);
}

/// Modules whose submodules still use each other (they have no table yet): none now; the list stays
/// so that a cycle found later can be named here while it is broken.
const PENDING: &[&str] = &[];

/// Every module of the engine, its folders' submodules included (tables named `nl6-profile::cpu`…).
#[test]
fn engine_modules_use_only_lower_layers() {
    check(
        &manifest_dir().join("crates/nl6-profile/src"),
        "nl6-profile",
        usize::MAX,
        &[],
    );
}

#[test]
fn the_checker_sees_paths_groups_and_cycles() {
    let code = code_of(
        "use crate::{alpha::X, beta, gamma::{self, Y}};\nuse super::super::delta;\n\
         fn f() { crate::eps::go(); other_crate::zeta::no(); } // crate::comment",
    );
    let strings = |ps: Vec<ModPath>| -> Vec<String> { ps.iter().map(|p| p.join("::")).collect() };
    assert_eq!(
        strings(paths_after(&code, "crate::")),
        ["alpha::X", "beta", "gamma", "gamma::Y", "eps::go"]
    );
    assert_eq!(strings(paths_after(&code, "super::super::")), ["delta"]);
    assert!(
        paths_after(&code, "super::").is_empty(),
        "a longer chain is not `super::`"
    );
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

/// Nested modules: `super::` climbs from the file's module, a parent's `use` of a child's item leads to
/// that child, and the edge lands in the nearest common module's graph.
#[test]
fn the_checker_resolves_nested_paths() {
    let p = |s: &str| -> ModPath {
        s.split("::")
            .filter(|x| !x.is_empty())
            .map(str::to_string)
            .collect()
    };
    let mut modules = Modules::new();
    let mut module = |path: &str, children: &[&str], imports: &[(&str, &str)]| {
        let m = Module {
            file: PathBuf::new(),
            children: children.iter().map(|c| c.to_string()).collect(),
            imports: imports
                .iter()
                .map(|(n, c)| (n.to_string(), c.to_string()))
                .collect(),
        };
        modules.insert(p(path), m);
    };
    module("", &["top", "low"], &[]);
    module("top", &["store", "bucket", "cycle"], &[("Store", "store")]);
    for leaf in ["low", "top::store", "top::bucket", "top::cycle"] {
        module(leaf, &[], &[]);
    }
    let code = "use super::Store; use crate::top::cycle::Next; use super::super::low;";
    let refs: Vec<Reference> = references(code);
    let bucket = p("top::bucket");
    let resolved: Vec<String> = refs
        .iter()
        .filter_map(|r| resolve(&modules, &bucket, r))
        .map(|m| m.join("::"))
        .collect();
    assert_eq!(resolved, ["top::cycle", "top::store", "low"]);
    let store_refs = references("use super::bucket::Bucket;");
    let refs = BTreeMap::from([(bucket, refs), (p("top::store"), store_refs)]);
    let graphs = graphs(&modules, &refs);
    let top = &graphs[&p("top")];
    assert_eq!(
        top["bucket"],
        BTreeSet::from(["store".to_string(), "cycle".to_string()])
    );
    assert_eq!(top["store"], BTreeSet::from(["bucket".to_string()]));
    assert_eq!(graphs[&p("")]["top"], BTreeSet::from(["low".to_string()]));
    assert!(has_cycle(top) && !has_cycle(&graphs[&p("")]));
    let bad = violations(
        top,
        &[
            vec!["store".into()],
            vec!["bucket".into()],
            vec!["cycle".into()],
        ],
    );
    assert!(bad.iter().any(|l| l.contains("import cycle")), "{bad:?}");
    let imports = imports_of(
        "pub use self::agent::{respond, Message};\n    use serve::run;\nuse std::fmt;\nlet reuse = 1;",
        &["agent".to_string(), "serve".to_string()].into(),
    );
    let want = [("Message", "agent"), ("respond", "agent"), ("run", "serve")];
    assert_eq!(
        imports,
        want.map(|(a, b)| (a.to_string(), b.to_string())).into()
    );
}

//! Writes the hostile profiles of tests/hostile_support into a directory, for measuring `nl6 report` on them:
//!
//! ```text
//! cargo run --release --example hostile_profiles -- /tmp/hostile
//! /usr/bin/time -v target/release/nl6 report /tmp/hostile/gzip-bomb.pb.gz
//! ```
//!
//! The same generator feeds `tests/harden/profiles.rs`.

#[path = "../tests/hostile_support/mod.rs"]
mod hostile_support;

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "hostile-profiles".to_string());
    std::fs::create_dir_all(&dir).expect("create the directory");
    let all = hostile_support::fixtures()
        .into_iter()
        .chain(hostile_support::at_limits());
    for (name, bytes) in all {
        let file: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect::<String>()
            .split('-')
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("-");
        let path = std::path::Path::new(&dir).join(format!("{file}.pb.gz"));
        std::fs::write(&path, &bytes).expect("write");
        println!("{} ({} bytes): {name}", path.display(), bytes.len());
    }
}

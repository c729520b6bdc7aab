//! `/proc/PID/maps` read by the tests themselves (not by the engine's parser), so a profile's mappings
//! are checked against the kernel's list. Shared with nl6's tests through `#[path]`.
#![allow(dead_code)] // each test binary uses its own subset

/// One line of a maps file.
#[derive(Debug, Clone)]
pub struct MapLine {
    pub start: u64,
    pub end: u64,
    pub executable: bool,
    pub offset: u64,
    /// The file's path, `[vdso]`-like names, or empty.
    pub path: String,
}

impl MapLine {
    pub fn contains(&self, addr: u64) -> bool {
        (self.start..self.end).contains(&addr)
    }
}

/// A maps file's lines (panics on a line not in the kernel's format: the kernel wrote it).
pub fn parse(text: &str) -> Vec<MapLine> {
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.splitn(6, ' ').collect();
            let (start, end) = f[0].split_once('-').expect("start-end");
            MapLine {
                start: u64::from_str_radix(start, 16).unwrap(),
                end: u64::from_str_radix(end, 16).unwrap(),
                executable: f[1].as_bytes()[2] == b'x',
                offset: u64::from_str_radix(f[2], 16).unwrap(),
                path: f.get(5).map_or("", |p| p.trim_start()).to_string(),
            }
        })
        .collect()
}

/// This process's mappings now.
pub fn read_self() -> Vec<MapLine> {
    parse(&std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps"))
}

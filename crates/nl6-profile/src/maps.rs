//! `/proc/self/maps`: the one parser of the process's memory map in the profiling engine.
//!
//! What it provides: [`MapsEntry`], one line of the map (range, permissions, file offset, inode, path), and
//! [`parse`] / [`read_self`]. The symbolizer builds the profile's Mappings from the executable entries
//! (as Go's runtime/pprof does); the unwinder's code range and stack bounds come from it too.
//!
//! What it never does: run in a signal handler (it reads a file and allocates).
#![forbid(unsafe_code)]

/// One line of `/proc/<pid>/maps`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MapsEntry {
    /// First address of the range.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// `r` permission.
    pub readable: bool,
    /// `w` permission.
    pub writable: bool,
    /// `x` permission.
    pub executable: bool,
    /// `s` (shared) rather than `p` (private).
    pub shared: bool,
    /// Offset in the file of the byte mapped at `start`.
    pub offset: u64,
    /// The file's inode (0 for anonymous mappings and pseudo-files such as `[vdso]`).
    pub inode: u64,
    /// The path as the kernel prints it: a file (possibly ending in ` (deleted)`), `[heap]`, `[stack]`,
    /// `[vdso]`…, or empty for anonymous memory.
    pub path: String,
}

impl MapsEntry {
    /// Whether `addr` lies in `[start, end)`.
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    /// Whether the entry maps a file (not anonymous memory or a `[pseudo]` region).
    pub fn is_file(&self) -> bool {
        self.path.starts_with('/')
    }
}

/// Parses one line; `None` if it is not in the kernel's format.
pub fn parse_line(line: &str) -> Option<MapsEntry> {
    let mut rest = line.trim_start();
    let mut field = || -> Option<&str> {
        let end = rest.find([' ', '\t']).unwrap_or(rest.len());
        let (f, r) = rest.split_at(end);
        rest = r.trim_start_matches([' ', '\t']);
        (!f.is_empty()).then_some(f)
    };
    let (range, perms, offset, _dev, inode) = (field()?, field()?, field()?, field()?, field()?);
    let (lo, hi) = range.split_once('-')?;
    let perms = perms.as_bytes();
    if perms.len() < 4 {
        return None;
    }
    Some(MapsEntry {
        start: u64::from_str_radix(lo, 16).ok()?,
        end: u64::from_str_radix(hi, 16).ok()?,
        readable: perms[0] == b'r',
        writable: perms[1] == b'w',
        executable: perms[2] == b'x',
        shared: perms[3] == b's',
        offset: u64::from_str_radix(offset, 16).ok()?,
        inode: inode.parse().ok()?,
        path: rest.trim_end_matches(['\n', '\r']).to_string(),
    })
}

/// Every well-formed line of a maps text, in the kernel's (address) order.
pub fn parse(text: &str) -> Vec<MapsEntry> {
    text.lines().filter_map(parse_line).collect()
}

/// The calling process's map.
pub fn read_self() -> std::io::Result<Vec<MapsEntry>> {
    std::fs::read_to_string("/proc/self/maps").map(|t| parse(&t))
}

/// The readable-writable entry containing `addr`: a thread's stack when `addr` is its stack pointer
/// (`unwind::mapping_bounds` asks this).
pub fn writable_at(entries: &[MapsEntry], addr: u64) -> Option<&MapsEntry> {
    entries
        .iter()
        .find(|e| e.readable && e.writable && e.contains(addr))
}

/// `[lowest start, highest end)` of `path`'s executable entries (`unwind::text_range` asks this).
pub fn executable_span(entries: &[MapsEntry], path: &str) -> Option<(u64, u64)> {
    entries
        .iter()
        .filter(|e| e.executable && e.path == path)
        .fold(None, |span, e| {
            Some(span.map_or((e.start, e.end), |(lo, hi): (u64, u64)| {
                (lo.min(e.start), hi.max(e.end))
            }))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_files_pseudo_files_anonymous_and_spaces() {
        let text = "55d0c0000000-55d0c0010000 r--p 00000000 08:01 42                         /usr/bin/nl6\n\
                    55d0c0010000-55d0c0200000 r-xp 00010000 08:01 42 /usr/bin/nl6\n\
                    7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n\
                    7ffd1000a000-7ffd1000c000 r-xp 00000000 00:00 0                  [vdso]\n\
                    7f0000002000-7f0000003000 r-xs 00001000 fe:00 77 /tmp/a dir/lib x.so (deleted)\n\
                    garbage\n";
        let m = parse(text);
        assert_eq!(m.len(), 5, "{m:?}");
        assert_eq!(
            (m[1].start, m[1].end, m[1].offset, m[1].inode),
            (0x55d0c0010000, 0x55d0c0200000, 0x10000, 42)
        );
        assert!(m[1].executable && m[1].readable && !m[1].writable && !m[1].shared);
        assert_eq!(m[1].path, "/usr/bin/nl6");
        assert!(m[1].is_file() && m[1].contains(0x55d0c0010000) && !m[1].contains(0x55d0c0200000));
        assert_eq!(m[2].path, "");
        assert!(m[2].writable && !m[2].is_file());
        assert_eq!((m[3].path.as_str(), m[3].inode), ("[vdso]", 0));
        assert_eq!(m[4].path, "/tmp/a dir/lib x.so (deleted)");
        assert!(m[4].shared);
    }

    #[test]
    fn answers_stack_top_and_code_span_queries() {
        let m = parse(
            "1000-2000 r-xp 00000000 08:01 9 /bin/p\n\
             2000-3000 r--p 00001000 08:01 9 /bin/p\n\
             3000-4000 r-xp 00002000 08:01 9 /bin/p\n\
             7000-9000 rw-p 00000000 00:00 0 [stack]\n",
        );
        assert_eq!(writable_at(&m, 0x8000).map(|e| e.end), Some(0x9000));
        assert_eq!(writable_at(&m, 0x1800), None);
        assert_eq!(executable_span(&m, "/bin/p"), Some((0x1000, 0x4000)));
        assert_eq!(executable_span(&m, "/bin/q"), None);
    }

    #[test]
    fn reads_this_process() {
        let own = parse_line as *const () as u64;
        let m = read_self().expect("/proc/self/maps");
        let text = m.iter().find(|e| e.contains(own)).expect("own code mapped");
        assert!(text.executable && text.is_file(), "{text:?}");
    }
}

//! The executable's code as the unwinder sees it: its address range and which of its functions keep a
//! frame pointer (their bodies are walked by frame record).
//!
//! Learnt once, outside any handler ([`learn_code`]): the range from `/proc/self/maps`; the functions from
//! the executable's symbol table (the file is mapped read-only for the parse, then unmapped), each
//! classified by its first bytes — `[endbr64] push rbp; mov rbp, rsp` keeps a frame pointer, anything else
//! (musl's `libc.a`, hand-written assembly, symbols without a size) does not. Frame-pointer functions are
//! merged into sorted ranges held in an anonymous mapping (not on the heap, so the table never shows in
//! nl6's own heap profile). Published once: the other fields first, then the range's upper end with
//! Release; a handler loads that end with Acquire **first** and sees everything or nothing.
//!
//! Never: allocates, locks or panics on the handler side ([`Code::load`] and the lookups).
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::arch::{sets_up_frame, PROLOGUE_BYTES};
use crate::maps::{self, MapsEntry};

/// `[start, end)` of code that keeps a frame pointer.
pub(crate) type Range = [u64; 2];

static TEXT_LO: AtomicU64 = AtomicU64::new(0);
/// The publication flag: 0 until everything else is stored.
static TEXT_HI: AtomicU64 = AtomicU64::new(0);
static FP_RANGES: AtomicPtr<Range> = AtomicPtr::new(std::ptr::null_mut());
static FP_LEN: AtomicUsize = AtomicUsize::new(0);
/// Serialises learning (outside handlers only).
static LEARNING: Mutex<()> = Mutex::new(());
/// Of the executable's function symbols classified, how many set up a frame pointer, and how many in all
/// (both 0 until learnt, or when the executable has no symbol table).
static FUNCTIONS_FP: AtomicUsize = AtomicUsize::new(0);
static FUNCTIONS: AtomicUsize = AtomicUsize::new(0);

/// `(functions that set up a frame pointer, functions classified)` of the executable, once
/// [`learn_code`] ran; `None` when no function could be classified (no symbol table).
pub(crate) fn frame_pointer_census() -> Option<(usize, usize)> {
    learn_code();
    let total = FUNCTIONS.load(Ordering::Relaxed);
    (total > 0).then(|| (FUNCTIONS_FP.load(Ordering::Relaxed), total))
}

/// A view of the learnt code map (copyable, handler-safe).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Code {
    pub lo: u64,
    pub hi: u64,
    /// Sorted, disjoint frame-pointer ranges; empty = unknown (every executable address is then
    /// treated as keeping a frame pointer, the behaviour before the table existed).
    pub fp: &'static [Range],
}

impl Code {
    /// The published map, or `None` before [`learn_code`] succeeded. Async-signal-safe.
    #[inline]
    pub(crate) fn load() -> Option<Code> {
        let hi = TEXT_HI.load(Ordering::Acquire);
        if hi == 0 {
            return None;
        }
        let (ptr, len) = (
            FP_RANGES.load(Ordering::Relaxed),
            FP_LEN.load(Ordering::Relaxed),
        );
        let fp: &'static [Range] = if ptr.is_null() {
            &[]
        } else {
            // SAFETY: published before TEXT_HI (Release, read above with Acquire); the mapping is never
            // unmapped or written again.
            unsafe { std::slice::from_raw_parts(ptr, len) }
        };
        Some(Code {
            lo: TEXT_LO.load(Ordering::Relaxed),
            hi,
            fp,
        })
    }

    /// True when `pc` lies in the executable's code.
    #[inline]
    pub(crate) fn contains(&self, pc: u64) -> bool {
        self.lo <= pc && pc < self.hi
    }

    /// True when `pc` is in a function of the executable that keeps a frame pointer (binary search).
    #[inline]
    pub(crate) fn keeps_frame_pointer(&self, pc: u64) -> bool {
        if !self.contains(pc) {
            return false;
        }
        if self.fp.is_empty() {
            return true;
        }
        let i = self.fp.partition_point(|r| r[0] <= pc);
        i > 0 && self.fp.get(i - 1).is_some_and(|r| pc < r[1])
    }
}

/// Merges functions `(start, end, keeps_fp)` into sorted frame-pointer ranges: consecutive frame-pointer
/// functions join (with the padding between them), any other function or sizeless symbol cuts.
pub(crate) fn fp_ranges(mut funcs: Vec<(u64, u64, bool)>) -> Vec<Range> {
    funcs.sort_unstable_by_key(|f| (f.0, f.1));
    let mut out: Vec<Range> = Vec::new();
    let mut open: Option<Range> = None;
    for (start, end, fp) in funcs {
        match (&mut open, fp && end > start) {
            (Some(r), true) if start <= r[1] + 64 => r[1] = r[1].max(end),
            (_, true) => {
                out.extend(open.take());
                open = Some([start, end]);
            }
            (_, false) => {
                if let Some(mut r) = open.take() {
                    r[1] = r[1].min(start).max(r[0]);
                    out.push(r);
                }
            }
        }
    }
    out.extend(open);
    out.retain(|r| r[1] > r[0]);
    out
}

/// The span of `exe`'s executable mappings, and the start of its mapping at file offset 0 (pure).
pub(crate) fn text_range(maps: &[MapsEntry], exe: &str) -> Option<(u64, u64, Option<u64>)> {
    let (lo, hi) = maps::executable_span(maps, exe)?;
    // The load base is the offset-0 mapping just below the code: the symbolizer maps the same file
    // read-only elsewhere (also at offset 0), and that copy must not be taken for the image.
    let base = maps
        .iter()
        .filter(|e| e.path == exe && e.offset == 0 && e.start <= lo)
        .map(|e| e.start)
        .max();
    Some((lo, hi, base))
}

/// Learns the code map (call outside any handler; cheap to repeat). On any failure the map stays
/// unpublished (frameless leaves are then not recognised) or is published without the function table.
pub(crate) fn learn_code() {
    if TEXT_HI.load(Ordering::Acquire) != 0 {
        return;
    }
    let _serial = LEARNING.lock().unwrap_or_else(|e| e.into_inner());
    if TEXT_HI.load(Ordering::Acquire) != 0 {
        return;
    }
    let (Ok(maps), Ok(exe)) = (maps::read_self(), std::fs::read_link("/proc/self/exe")) else {
        return;
    };
    let Some((lo, hi, base)) = text_range(&maps, &exe.to_string_lossy()) else {
        return;
    };
    if let Some(ranges) = base.and_then(|b| classify_functions(&exe, b, lo, hi)) {
        if let Some(table) = leak_in_mapping(&ranges) {
            FP_RANGES.store(table.as_ptr() as *mut Range, Ordering::Relaxed);
            FP_LEN.store(table.len(), Ordering::Relaxed);
        }
    }
    TEXT_LO.store(lo, Ordering::Relaxed);
    TEXT_HI.store(hi, Ordering::Release);
}

/// Reads the executable's function symbols and classifies each by its first bytes, read from the file
/// mapped for the parse (not from the running code: touching every page of it would keep them all in
/// nl6's resident set, while the file's pages leave it when the parse unmaps it).
fn classify_functions(exe: &std::path::Path, base: u64, lo: u64, hi: u64) -> Option<Vec<Range>> {
    use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};
    let file = MappedFile::open(exe)?;
    let obj = object::File::parse(file.bytes()).ok()?;
    let first_vaddr = obj.segments().map(|s| s.address()).min()? & !0xfff;
    let bias = base.wrapping_sub(first_vaddr);
    let funcs: Vec<(u64, u64, bool)> = obj
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
        .filter_map(|s| {
            let start = s.address().wrapping_add(bias);
            let end = start.saturating_add(s.size());
            if start < lo || start.saturating_add(PROLOGUE_BYTES as u64) > hi {
                return None;
            }
            let section = obj.section_by_index(s.section_index()?).ok()?;
            let first = section
                .data_range(s.address(), PROLOGUE_BYTES as u64)
                .ok()??;
            Some((start, end.min(hi), sets_up_frame(first)))
        })
        .collect();
    let with_fp = funcs.iter().filter(|f| f.2).count();
    FUNCTIONS_FP.store(with_fp, Ordering::Relaxed);
    FUNCTIONS.store(funcs.len(), Ordering::Relaxed);
    (!funcs.is_empty()).then(|| fp_ranges(funcs))
}

/// A fresh anonymous private read-write mapping of `bytes` (at least one page), never unmapped: the
/// unwinder's tables live there, off nl6's heap.
pub(crate) fn anonymous_mapping(bytes: usize) -> Option<*mut u8> {
    // SAFETY: a fresh anonymous mapping at an address the kernel chooses; it replaces nothing.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes.max(1),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p as *mut u8)
}

/// Copies `ranges` into an anonymous private mapping that is never unmapped.
fn leak_in_mapping(ranges: &[Range]) -> Option<&'static [Range]> {
    let table = anonymous_mapping(std::mem::size_of_val(ranges))? as *mut Range;
    // SAFETY: the mapping holds `ranges.len()` ranges (aligned: a page start); written once here, then
    // only read, and never unmapped.
    unsafe {
        std::ptr::copy_nonoverlapping(ranges.as_ptr(), table, ranges.len());
        Some(std::slice::from_raw_parts(table, ranges.len()))
    }
}

/// A file mapped read-only for the duration of a parse (kept off the heap).
pub(crate) struct MappedFile {
    ptr: *mut libc::c_void,
    len: usize,
}

impl MappedFile {
    pub(crate) fn open(path: &std::path::Path) -> Option<MappedFile> {
        use std::os::unix::io::AsRawFd;
        let f = std::fs::File::open(path).ok()?;
        let len = usize::try_from(f.metadata().ok()?.len()).ok()?;
        if len == 0 {
            return None;
        }
        // SAFETY: mapping a regular file we opened, read-only and private; unmapped on drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                f.as_raw_fd(),
                0,
            )
        };
        (ptr != libc::MAP_FAILED).then_some(MappedFile { ptr, len })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `len` bytes mapped readable at `ptr` until drop.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `open` mapped.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_pointer_ranges_merge_and_cut() {
        let r = fp_ranges(vec![
            (0x2c0, 0x300, true),
            (0x100, 0x140, true),
            (0x150, 0x180, true),
            (0x200, 0x240, false),
            (0x180, 0x180, false),
            (0x240, 0x2a0, true),
        ]);
        // 0x100..0x180 (padding merged), cut by the sizeless symbol at 0x180; 0x240..0x300 merged (gaps of padding up to 64 bytes).
        assert_eq!(r, vec![[0x100, 0x180], [0x240, 0x300]]);
        let code = Code {
            lo: 0x100,
            hi: 0x400,
            fp: Box::leak(r.into_boxed_slice()),
        };
        assert!(code.keeps_frame_pointer(0x100) && code.keeps_frame_pointer(0x17f));
        assert!(!code.keeps_frame_pointer(0x180) && !code.keeps_frame_pointer(0x210));
        assert!(code.keeps_frame_pointer(0x2ff) && !code.keeps_frame_pointer(0x300));
        assert!(!code.keeps_frame_pointer(0x50), "outside the executable");
    }

    #[test]
    fn parses_maps_for_the_text_range_and_base() {
        let text = "5555-6000 r--p 00000000 08:01 12 /bin/nl6\n\
                    6000-9000 r-xp 00001000 08:01 12 /bin/nl6\n\
                    9000-a000 r-xp 00000000 08:01 13 /lib/other.so\n\
                    7ff0000-7ff8000 rw-p 00000000 00:00 0 [stack]\n";
        let maps = &maps::parse(text);
        assert_eq!(
            text_range(maps, "/bin/nl6"),
            Some((0x6000, 0x9000, Some(0x5555)))
        );
        assert_eq!(text_range(maps, "/bin/none"), None);
        // The symbolizer's read-only copy of the same file, mapped below the image, is not its base.
        let with_copy = maps::parse(&format!(
            "1000-2000 r--p 00000000 08:01 12 /bin/nl6\n{text}"
        ));
        assert_eq!(
            text_range(&with_copy, "/bin/nl6"),
            Some((0x6000, 0x9000, Some(0x5555)))
        );
    }

    /// After the binary is replaced on disk, `/proc/self/exe` and the map both say `… (deleted)`; a path
    /// with spaces is kept whole too.
    #[test]
    fn text_range_of_a_replaced_binary_with_spaces_in_its_path() {
        let exe = "/opt/my app/nl6 (deleted)";
        let maps = maps::parse(&format!(
            "5000-6000 r--p 00000000 08:01 12 {exe}\n6000-9000 r-xp 00001000 08:01 12 {exe}\n"
        ));
        assert_eq!(text_range(&maps, exe), Some((0x6000, 0x9000, Some(0x5000))));
    }

    /// The real executable: learnt, and this test's own function keeps a frame pointer while a
    /// return address into it is recognised as one.
    #[test]
    fn learns_the_running_executable() {
        learn_code();
        let code = Code::load().expect("code map");
        let me = learns_the_running_executable as *const () as u64;
        assert!(code.contains(me));
        assert!(!code.fp.is_empty(), "no function table");
        assert!(code.keeps_frame_pointer(me + 4));
    }
}

//! Naming addresses of this process: function names (demangled) in the executable, every shared object and
//! the vDSO, and file/line when the executable carries DWARF.
//!
//! What it provides: [`symbolize`] (what `/debug/pprof/symbol` answers) and [`demangle`]; crate-private,
//! `Symbolizer::global`, a process-wide view of the process's executable mappings (read from
//! `/proc/self/maps` by the crate-private `maps`), one module per mapped object, the executable first, as
//! Go's runtime/pprof lists them; `Symbolizer::mappings` for the profile's `Mapping` messages (range, file
//! offset, path, build ID); `Symbolizer::resolve` for the encoder.
//!
//! Cost model: an object is mapped read-only when first needed (crate-private `mapped`, never read into the
//! heap), its function index (4 bytes per function) built on its first lookup, and each function named
//! once (a cache by symbol number; by address when DWARF gives lines). All of it is allocated unsampled
//! ([`super::heap::unsampled`]): the symbolizer is the profiler's, so it is not in nl6's heap profile.
//! The map is read again at most once a second (a profile built later sees libraries loaded since).
//!
//! An address inside an object's executable mapping that no symbol covers (a stripped object's local
//! functions) is named `object+0xOFFSET` (its file offset), so the time stays attributed to its object.
//!
//! What it never does: run in a signal handler or on the allocator's sampled path (it reads files, maps
//! them, allocates and locks). Samplers store raw addresses; encoding calls this module afterwards.
//!
//! Return addresses: the caller passes the address to look up. The encoder passes `addr - 1` for return
//! addresses (every frame except a CPU sample's interrupted instruction), as pprof does, so a call at the
//! very end of a function is not attributed to the next one.
#![forbid(unsafe_code)]

mod image;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use addr2line::gimli;
use image::Image;

use super::heap;
use super::maps::{self, MapsEntry};

/// One frame of an address: for inlined code, the innermost frame comes first and the last frame is the
/// function the symbol table names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    /// Demangled name without the hash (`nl6::lab::snmp::agent::serve`).
    pub(crate) name: String,
    /// The name as the binary spells it (the mangled symbol), pprof's `system_name`. Because it differs
    /// from `name`, `go tool pprof` shows `name` as it is instead of stripping its `<…>` generics.
    pub(crate) system_name: String,
    /// Source file, when DWARF knows it.
    pub(crate) file: Option<String>,
    /// Source line, when DWARF knows it (0 = unknown).
    pub(crate) line: u32,
}

/// Everything known about one address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// Innermost first; never empty.
    pub(crate) frames: Vec<Frame>,
    /// Runtime address of the enclosing symbol-table function's first instruction.
    pub(crate) entry: u64,
}

/// One executable mapping of the process, for a pprof `Mapping` message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MappingInfo {
    /// First address of the mapping.
    pub(crate) start: u64,
    /// One past the last address.
    pub(crate) limit: u64,
    /// Offset in the file of the byte mapped at `start`.
    pub(crate) file_offset: u64,
    /// The object's path as `/proc/self/maps` prints it (`[vdso]` for the vDSO).
    pub(crate) filename: String,
    /// GNU build ID in lowercase hex ("" when absent).
    pub(crate) build_id: String,
    /// True when the object could be read, so its functions are named.
    pub(crate) has_functions: bool,
    /// True when the object carries DWARF line tables (file/line known).
    pub(crate) has_debug_info: bool,
}

type Reader = gimli::EndianSlice<'static, gimli::RunTimeEndian>;

/// How old the module list may get before a lookup that misses every module reads the map again.
const MAPS_MAX_AGE: Duration = Duration::from_secs(1);

/// One mapped object: the executable, a shared object or the vDSO.
struct Module {
    /// The path as `/proc/self/maps` prints it.
    path: String,
    inode: u64,
    /// The executable (opened through `/proc/self/exe`; its DWARF, if any, is used).
    main: bool,
    /// Its executable entries of the map.
    exec: Vec<MapsEntry>,
    image: OnceLock<Option<Image>>,
    dwarf: OnceLock<Option<Mutex<addr2line::Context<Reader>>>>,
    /// Resolved functions by symbol number, or by address when DWARF gives per-address lines.
    cache: Mutex<HashMap<u64, Arc<Resolved>>>,
}

/// The module list and when it was read.
struct Modules {
    list: Arc<Vec<Arc<Module>>>,
    read_at: Option<Instant>,
}

/// The process-wide symbolizer.
pub(crate) struct Symbolizer {
    /// `/proc/self/exe`'s target: the path the map gives the executable.
    exe: String,
    modules: Mutex<Modules>,
}

static GLOBAL: OnceLock<Option<Symbolizer>> = OnceLock::new();

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer")
            .field("exe", &self.exe)
            .finish_non_exhaustive()
    }
}

impl Symbolizer {
    /// The symbolizer of this process; `None` if `/proc/self/maps` cannot be read (profiles then carry bare
    /// addresses).
    pub(crate) fn global() -> Option<&'static Symbolizer> {
        GLOBAL
            .get_or_init(|| heap::unsampled(Symbolizer::new))
            .as_ref()
    }

    fn new() -> Option<Symbolizer> {
        maps::read_self().ok()?;
        let exe = std::fs::read_link("/proc/self/exe")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        Some(Symbolizer {
            exe,
            modules: Mutex::new(Modules {
                list: Arc::new(Vec::new()),
                read_at: None,
            }),
        })
    }

    /// The module list, read again from the map when never read, or when `stale_ok` is false and it is
    /// older than [`MAPS_MAX_AGE`].
    fn modules(&self, stale_ok: bool) -> Arc<Vec<Arc<Module>>> {
        let mut m = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = m
            .read_at
            .is_some_and(|t| stale_ok || t.elapsed() < MAPS_MAX_AGE);
        if !fresh {
            if let Ok(entries) = maps::read_self() {
                m.list = Arc::new(group_modules(&entries, &self.exe, &m.list));
            }
            m.read_at = Some(Instant::now());
        }
        Arc::clone(&m.list)
    }

    fn module_at(&self, addr: u64) -> Option<Arc<Module>> {
        let find = |list: &[Arc<Module>]| {
            list.iter()
                .find(|m| m.exec.iter().any(|e| e.contains(addr)))
                .cloned()
        };
        find(&self.modules(true)).or_else(|| find(&self.modules(false)))
    }

    /// One entry per executable mapping of the process, the executable's first, then in address order
    /// (Go's order). Reads the map again if it is older than a second.
    pub(crate) fn mappings(&self) -> Vec<MappingInfo> {
        heap::unsampled(|| {
            let list = self.modules(false);
            let mut out = Vec::new();
            for m in list.iter() {
                let image = m.image();
                for e in &m.exec {
                    out.push(MappingInfo {
                        start: e.start,
                        limit: e.end,
                        file_offset: e.offset,
                        filename: m.path.clone(),
                        build_id: image.map(|i| i.build_id.clone()).unwrap_or_default(),
                        has_functions: image.is_some(),
                        has_debug_info: m.dwarf().is_some(),
                    });
                }
            }
            out
        })
    }

    /// Resolves a runtime address (pass `addr - 1` for return addresses). `None` when no executable
    /// mapping of the process contains it.
    pub(crate) fn resolve(&self, addr: u64) -> Option<Arc<Resolved>> {
        if let Some(name) = super::unwind::stop_name(addr) {
            return Some(heap::unsampled(|| stop_frame(name, addr)));
        }
        heap::unsampled(|| self.module_at(addr)?.resolve(addr))
    }

    /// What the executable's own file carries: `(a symbol table (.symtab), unwind rules (.eh_frame or
    /// .debug_frame, non-empty))`; `None` when the executable cannot be read.
    pub(crate) fn executable_carries(&self) -> Option<(bool, bool)> {
        use object::{Object, ObjectSection};
        heap::unsampled(|| {
            let list = self.modules(true);
            let image = list.iter().find(|m| m.main)?.image()?;
            let present = |name: &str| {
                image
                    .file
                    .section_by_name(name)
                    .is_some_and(|s| s.size() > 0)
            };
            Some((
                present(".symtab"),
                present(".eh_frame") || present(".debug_frame"),
            ))
        })
    }

    /// The name of the outermost function containing `addr` (the symbol table's), for `/symbol`.
    pub(crate) fn function_name(&self, addr: u64) -> Option<String> {
        self.resolve(addr)
            .and_then(|r| r.frames.last().map(|f| f.name.clone()))
    }
}

/// Groups the executable file and vDSO entries of a map into modules (the executable first), reusing the
/// modules of `old` that are still mapped the same way.
fn group_modules(entries: &[MapsEntry], exe: &str, old: &[Arc<Module>]) -> Vec<Arc<Module>> {
    let mut groups: Vec<(&str, u64, Vec<MapsEntry>)> = Vec::new();
    for e in entries
        .iter()
        .filter(|e| e.executable && (e.is_file() || e.path == "[vdso]"))
    {
        match groups.iter_mut().find(|g| g.0 == e.path && g.1 == e.inode) {
            Some(g) => g.2.push(e.clone()),
            None => groups.push((&e.path, e.inode, vec![e.clone()])),
        }
    }
    groups.sort_by_key(|g| g.0 != exe);
    groups
        .into_iter()
        .map(|(path, inode, exec)| {
            old.iter()
                .find(|m| m.path == path && m.inode == inode && m.exec == exec)
                .cloned()
                .unwrap_or_else(|| {
                    Arc::new(Module {
                        path: path.to_string(),
                        inode,
                        main: !exe.is_empty() && path == exe,
                        exec,
                        image: OnceLock::new(),
                        dwarf: OnceLock::new(),
                        cache: Mutex::new(HashMap::new()),
                    })
                })
        })
        .collect()
}

impl Module {
    fn image(&self) -> Option<&Image> {
        self.image
            .get_or_init(|| Image::load(&self.exec[0], self.main).ok())
            .as_ref()
    }

    fn dwarf(&self) -> Option<&Mutex<addr2line::Context<Reader>>> {
        if !self.main {
            return None;
        }
        self.dwarf
            .get_or_init(|| load_dwarf(&self.image()?.file).map(Mutex::new))
            .as_ref()
    }

    fn cached(&self, key: u64, make: impl FnOnce() -> Resolved) -> Arc<Resolved> {
        if let Some(hit) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Arc::clone(hit);
        }
        let r = Arc::new(make());
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, Arc::clone(&r));
        r
    }

    fn resolve(&self, addr: u64) -> Option<Arc<Resolved>> {
        let Some(image) = self.image() else {
            return Some(Arc::new(self.unnamed(addr)));
        };
        let link = addr.wrapping_sub(image.bias);
        let Some(f) = image.function_at(link) else {
            return Some(Arc::new(self.unnamed(addr)));
        };
        let entry = f.start.wrapping_add(image.bias);
        // Named (demangled) only on a cache miss: a profile looks up the same functions again and again.
        let symbol = || Frame {
            name: demangle(f.raw),
            system_name: f.raw.to_string(),
            file: None,
            line: 0,
        };
        if let Some(dwarf) = self.dwarf() {
            return Some(self.cached(addr, || Resolved {
                frames: dwarf_frames(dwarf, link, &symbol()),
                entry,
            }));
        }
        Some(self.cached(u64::from(f.number), || Resolved {
            frames: vec![symbol()],
            entry,
        }))
    }

    /// `object+0xOFFSET` for an address of this module that no symbol covers.
    fn unnamed(&self, addr: u64) -> Resolved {
        let e = self
            .exec
            .iter()
            .find(|e| e.contains(addr))
            .unwrap_or(&self.exec[0]);
        let base = self.path.rsplit('/').next().unwrap_or(&self.path);
        let name = format!(
            "{base}+{:#x}",
            addr.wrapping_sub(e.start).wrapping_add(e.offset)
        );
        Resolved {
            frames: vec![Frame {
                system_name: name.clone(),
                name,
                file: None,
                line: 0,
            }],
            entry: addr,
        }
    }
}

/// DWARF's frames for a link-time address, innermost first; frames without a name take the symbol table's
/// (the canonical name of the enclosing function); without any, the symbol table's name is the one frame.
fn dwarf_frames(
    dwarf: &Mutex<addr2line::Context<Reader>>,
    link: u64,
    symbol: &Frame,
) -> Vec<Frame> {
    let mut frames = Vec::new();
    let ctx = dwarf.lock().unwrap_or_else(|e| e.into_inner());
    if let Ok(mut iter) = ctx.find_frames(link).skip_all_loads() {
        while let Ok(Some(f)) = iter.next() {
            let raw = f
                .function
                .as_ref()
                .and_then(|n| n.raw_name().ok())
                .map(|n| n.into_owned())
                .unwrap_or_default();
            let (file, line) = match &f.location {
                Some(l) => (l.file.map(str::to_string), l.line.unwrap_or(0)),
                None => (None, 0),
            };
            let (name, system_name) = if raw.is_empty() {
                (symbol.name.clone(), symbol.system_name.clone())
            } else {
                (demangle(&raw), raw)
            };
            frames.push(Frame {
                name,
                system_name,
                file,
                line,
            });
        }
    }
    if frames.is_empty() {
        frames.push(symbol.clone());
    }
    frames
}

/// The one frame of an unwinder's stop entry (see `unwind::stop`): named for what stopped the walk.
fn stop_frame(name: String, addr: u64) -> Arc<Resolved> {
    Arc::new(Resolved {
        frames: vec![Frame {
            system_name: name.clone(),
            name,
            file: None,
            line: 0,
        }],
        entry: addr & !0xff,
    })
}

/// The function name for a runtime address, as `/debug/pprof/symbol` answers it (`None` if unknown).
pub fn symbolize(addr: u64) -> Option<String> {
    if addr == 0 {
        return None;
    }
    Symbolizer::global()?.function_name(addr)
}

/// Demangles a Rust (legacy or v0) symbol without its hash; other names are returned unchanged.
pub fn demangle(raw: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(raw))
}

fn load_dwarf(
    file: &object::read::elf::ElfFile64<'static, object::Endianness>,
) -> Option<addr2line::Context<Reader>> {
    use object::{Object, ObjectSection};
    let has_lines = file
        .section_by_name(".debug_line")
        .is_some_and(|s| s.size() > 0);
    if !has_lines {
        return None;
    }
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
        let data = match file.section_by_name(id.name()) {
            // Compressed sections (SHF_COMPRESSED) are not decoded here: treat them as absent.
            Some(s)
                if s.compressed_file_range()
                    .is_ok_and(|r| r.format == object::CompressionFormat::None) =>
            {
                s.data().unwrap_or(&[])
            }
            _ => &[],
        };
        Ok(gimli::EndianSlice::new(data, endian))
    };
    let dwarf = gimli::Dwarf::load(load).ok()?;
    addr2line::Context::from_dwarf(dwarf).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn named_probe_fn() -> u64 {
        std::hint::black_box(7)
    }

    #[test]
    fn resolves_own_functions_demangled() {
        let s = Symbolizer::global().expect("symbolizer reads /proc/self/maps");
        let addr = named_probe_fn as *const () as u64;
        let r = s
            .resolve(addr + 1)
            .expect("address inside a function resolves");
        let outer = r.frames.last().unwrap();
        assert!(
            outer.name.ends_with("symbols::tests::named_probe_fn"),
            "got {}",
            outer.name
        );
        assert_eq!(r.entry, addr);
        assert_eq!(symbolize(addr).as_deref(), Some(outer.name.as_str()));
        let exe = &s.mappings()[0];
        assert_eq!(
            exe.filename,
            std::fs::read_link("/proc/self/exe")
                .unwrap()
                .to_string_lossy()
        );
        assert!(
            !exe.build_id.is_empty() && exe.has_functions,
            "build id present (.cargo/config.toml links with --build-id)"
        );
        assert!(
            s.mappings()
                .iter()
                .any(|m| m.start <= addr && addr < m.limit),
            "address in an exec mapping"
        );
    }

    #[test]
    fn unknown_addresses_give_none() {
        assert_eq!(symbolize(0), None);
        assert_eq!(symbolize(8), None);
    }

    #[test]
    fn demangles_without_hash() {
        assert_eq!(
            demangle("_ZN3nl63lab4snmp5serve17h0123456789abcdefE"),
            "nl6::lab::snmp::serve"
        );
        assert_eq!(demangle("memcpy"), "memcpy");
    }

    /// Every executable mapping has a Mapping; shared objects and the vDSO are named from their own tables.
    #[test]
    fn names_shared_objects_and_the_vdso() {
        let s = Symbolizer::global().unwrap();
        let mappings = s.mappings();
        let maps = maps::read_self().unwrap();
        let exec = maps
            .iter()
            .filter(|e| e.executable && (e.is_file() || e.path == "[vdso]"))
            .count();
        assert_eq!(mappings.len(), exec, "{mappings:#?}");
        if cfg!(target_env = "gnu") {
            let munmap = libc::munmap as *const () as u64;
            let libc = mappings
                .iter()
                .find(|m| m.start <= munmap && munmap < m.limit)
                .expect("munmap in a mapping");
            assert!(libc.filename.contains("libc.so"), "{libc:?}");
            assert!(!libc.build_id.is_empty() && libc.has_functions);
            let name = symbolize(munmap).expect("libc's munmap named");
            assert!(name.ends_with("munmap"), "{name}");
        }
        if let Some(vdso) = mappings.iter().find(|m| m.filename == "[vdso]") {
            let names: Vec<String> = (vdso.start..vdso.limit)
                .step_by(16)
                .filter_map(symbolize)
                .collect();
            assert!(
                names.iter().any(|n| n.contains("clock_gettime")),
                "{names:?}"
            );
        }
    }

    #[test]
    fn modules_group_by_object_with_the_executable_first() {
        let text = "1000-2000 r-xp 00001000 08:01 7 /lib/libx.so\n\
                    3000-4000 r-xp 00000000 08:01 9 /bin/prog\n\
                    4000-5000 rw-p 00001000 08:01 9 /bin/prog\n\
                    6000-7000 r-xp 00000000 00:00 0 [vdso]\n\
                    7000-8000 r-xp 00000000 00:00 0 [vsyscall-like]\n\
                    9000-a000 r-xp 00000000 00:00 0 \n";
        let list = group_modules(&maps::parse(text), "/bin/prog", &[]);
        let paths: Vec<&str> = list.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(paths, ["/bin/prog", "/lib/libx.so", "[vdso]"]);
        assert!(list[0].main && !list[1].main);
        let again = group_modules(&maps::parse(text), "/bin/prog", &list);
        assert!(
            Arc::ptr_eq(&list[1], &again[1]),
            "unchanged modules are kept"
        );
        // An object that cannot be read still names its addresses after itself and the file offset.
        let r = list[1].resolve(0x1234).unwrap();
        assert_eq!(r.frames[0].name, "libx.so+0x1234");
    }
}

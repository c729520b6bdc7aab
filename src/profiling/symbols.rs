//! Naming addresses of this process: function names (demangled), and file/line when the binary carries DWARF.
//!
//! What it provides: [`Symbolizer::global`], a lazily built, process-wide view of `/proc/self/exe` (its ELF
//! symbol table sorted by address, the load bias of a PIE or static-pie binary, the GNU build ID, the
//! executable mapping from `/proc/self/maps`, and an `addr2line` context when DWARF is present), with a cache
//! of every address already resolved; [`symbolize`] for `/debug/pprof/symbol`.
//!
//! What it never does: run in a signal handler or on the allocator's sampled path (it reads files, allocates
//! and locks). Samplers store raw addresses; encoding calls this module afterwards.
//!
//! Return addresses: the caller passes the address to look up. The encoder passes `addr - 1` for return
//! addresses (every frame except a CPU sample's interrupted instruction), as pprof does, so a call at the
//! very end of a function is not attributed to the next one.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use addr2line::gimli;

/// One frame of an address: for inlined code, the innermost frame comes first and the last frame is the
/// function the symbol table names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Demangled name without the hash (`nl6::lab::snmp::agent::serve`).
    pub name: String,
    /// The name as the binary spells it (the mangled symbol), pprof's `system_name`. Because it differs
    /// from `name`, `go tool pprof` shows `name` as it is instead of stripping its `<…>` generics.
    pub system_name: String,
    /// Source file, when DWARF knows it.
    pub file: Option<String>,
    /// Source line, when DWARF knows it (0 = unknown).
    pub line: u32,
}

/// Everything known about one address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Innermost first; never empty.
    pub frames: Vec<Frame>,
    /// Runtime address of the enclosing symbol-table function's first instruction.
    pub entry: u64,
}

/// The main executable's mapping, for the pprof `Mapping` message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MappingInfo {
    pub start: u64,
    pub limit: u64,
    pub file_offset: u64,
    /// Resolved path of `/proc/self/exe`.
    pub filename: String,
    /// GNU build ID in lowercase hex ("" when absent).
    pub build_id: String,
    /// True when the binary carries DWARF line tables (file/line known).
    pub has_debug_info: bool,
}

#[derive(Debug, Clone)]
struct Symbol {
    /// Link-time address (add `bias` for runtime).
    addr: u64,
    size: u64,
    name: String,
    /// The mangled name, borrowed from the executable's bytes (read once, kept for the process's life).
    raw: &'static str,
}

type Reader = gimli::EndianSlice<'static, gimli::RunTimeEndian>;

/// A process-wide symbolizer for the running executable.
pub struct Symbolizer {
    symbols: Vec<Symbol>,
    /// Runtime address minus link-time address.
    bias: u64,
    mapping: MappingInfo,
    dwarf: Option<Mutex<addr2line::Context<Reader>>>,
    cache: Mutex<HashMap<u64, Option<Arc<Resolved>>>>,
}

/// A function the symbolizer can look up by its own address to learn the load bias.
#[inline(never)]
pub fn bias_anchor() -> u64 {
    std::hint::black_box(0x6e6c36)
}

static GLOBAL: OnceLock<Option<Symbolizer>> = OnceLock::new();

impl Symbolizer {
    /// The symbolizer of this process, built on first use; `None` if `/proc/self/exe` cannot be read or is
    /// not an ELF file (profiles then carry bare addresses).
    pub fn global() -> Option<&'static Symbolizer> {
        GLOBAL.get_or_init(|| Symbolizer::load().ok()).as_ref()
    }

    /// Reads `/proc/self/exe`. The file's bytes are leaked on purpose: the DWARF context borrows them for the
    /// life of the process, and this runs once.
    pub fn load() -> Result<Symbolizer, String> {
        let path = std::fs::read_link("/proc/self/exe")
            .map_err(|e| format!("reading /proc/self/exe link: {e}"))?;
        let data =
            std::fs::read("/proc/self/exe").map_err(|e| format!("reading /proc/self/exe: {e}"))?;
        let data: &'static [u8] = Box::leak(data.into_boxed_slice());
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        Symbolizer::from_parts(
            data,
            &path.to_string_lossy(),
            &maps,
            bias_anchor as *const () as u64,
        )
    }

    /// Builds a symbolizer from an ELF image, its runtime path, the text of `/proc/self/maps` and the
    /// runtime address of [`bias_anchor`].
    fn from_parts(
        data: &'static [u8],
        path: &str,
        maps: &str,
        anchor_runtime: u64,
    ) -> Result<Symbolizer, String> {
        use object::{Object, ObjectSymbol, SymbolKind};
        let file = object::File::parse(data).map_err(|e| format!("parsing {path} as ELF: {e}"))?;
        let text = |sym: object::Symbol<'static, '_>| -> Option<Symbol> {
            if sym.kind() != SymbolKind::Text || sym.address() == 0 {
                return None;
            }
            let raw = sym.name().ok()?;
            Some(Symbol {
                addr: sym.address(),
                size: sym.size(),
                name: demangle(raw),
                raw,
            })
        };
        let mut symbols: Vec<Symbol> = file.symbols().filter_map(text).collect();
        if symbols.is_empty() {
            symbols = file.dynamic_symbols().filter_map(text).collect();
        }
        symbols.sort_by(|a, b| a.addr.cmp(&b.addr).then(b.size.cmp(&a.size)));
        symbols.dedup_by_key(|s| s.addr);

        let build_id = match file.build_id() {
            Ok(Some(id)) => id.iter().map(|b| format!("{b:02x}")).collect(),
            _ => String::new(),
        };
        let exec = exec_mapping(maps, path);
        let bias = anchor_bias(&symbols, anchor_runtime)
            .or_else(|| exec.as_ref().and_then(|m| maps_bias(&file, m)))
            .unwrap_or(0);
        let dwarf = load_dwarf(&file).map(Mutex::new);
        let mut mapping = exec.unwrap_or_default();
        mapping.filename = path.to_string();
        mapping.build_id = build_id;
        mapping.has_debug_info = dwarf.is_some();
        Ok(Symbolizer {
            symbols,
            bias,
            mapping,
            dwarf,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The main executable's mapping.
    pub fn mapping(&self) -> &MappingInfo {
        &self.mapping
    }

    /// Resolves a runtime address (pass `addr - 1` for return addresses). `None` when no symbol covers it.
    pub fn resolve(&self, addr: u64) -> Option<Arc<Resolved>> {
        if let Some(hit) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&addr)
        {
            return hit.clone();
        }
        let resolved = self.resolve_uncached(addr).map(Arc::new);
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(addr, resolved.clone());
        resolved
    }

    fn symbol_at(&self, addr: u64) -> Option<&Symbol> {
        let link = addr.wrapping_sub(self.bias);
        let i = self
            .symbols
            .partition_point(|s| s.addr <= link)
            .checked_sub(1)?;
        let s = &self.symbols[i];
        let within = if s.size > 0 {
            link < s.addr + s.size
        } else {
            self.symbols.get(i + 1).is_some_and(|n| link < n.addr)
        };
        within.then_some(s)
    }

    fn resolve_uncached(&self, addr: u64) -> Option<Resolved> {
        let sym = self.symbol_at(addr)?;
        let entry = sym.addr.wrapping_add(self.bias);
        let mut frames = Vec::new();
        if let Some(ctx) = &self.dwarf {
            let ctx = ctx.lock().unwrap_or_else(|e| e.into_inner());
            let probe = addr.wrapping_sub(self.bias);
            if let Ok(mut iter) = ctx.find_frames(probe).skip_all_loads() {
                while let Ok(Some(f)) = iter.next() {
                    let raw = f
                        .function
                        .as_ref()
                        .and_then(|n| n.raw_name().ok())
                        .map(|n| n.into_owned())
                        .unwrap_or_default();
                    let name = demangle(&raw);
                    let (file, line) = match &f.location {
                        Some(l) => (l.file.map(str::to_string), l.line.unwrap_or(0)),
                        None => (None, 0),
                    };
                    frames.push(Frame {
                        name,
                        system_name: raw,
                        file,
                        line,
                    });
                }
            }
        }
        // DWARF frames without a name take the symbol table's (the canonical name of the enclosing
        // function); without DWARF the symbol table's name is the one frame.
        for f in frames.iter_mut().filter(|f| f.name.is_empty()) {
            f.name = sym.name.clone();
            f.system_name = sym.raw.to_string();
        }
        if frames.is_empty() {
            frames.push(Frame {
                name: sym.name.clone(),
                system_name: sym.raw.to_string(),
                file: None,
                line: 0,
            });
        }
        Some(Resolved { frames, entry })
    }

    /// The name of the outermost function containing `addr` (symbol table only), for `/symbol`.
    pub fn function_name(&self, addr: u64) -> Option<&str> {
        self.symbol_at(addr).map(|s| s.name.as_str())
    }
}

/// The function name for a runtime address, as `/debug/pprof/symbol` answers it (`None` if unknown).
pub fn symbolize(addr: u64) -> Option<String> {
    if addr == 0 {
        return None;
    }
    Symbolizer::global()?
        .function_name(addr)
        .map(str::to_string)
}

/// Demangles a Rust (legacy or v0) symbol without its hash; other names are returned unchanged.
pub fn demangle(raw: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(raw))
}

fn anchor_bias(symbols: &[Symbol], anchor_runtime: u64) -> Option<u64> {
    let s = symbols
        .iter()
        .find(|s| s.name == "nl6::profiling::symbols::bias_anchor")?;
    Some(anchor_runtime.wrapping_sub(s.addr))
}

/// The first executable mapping of `path` in `/proc/self/maps` text.
fn exec_mapping(maps: &str, path: &str) -> Option<MappingInfo> {
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (range, perms, offset) = (f.next()?, f.next()?, f.next()?);
        let (_dev, _inode) = (f.next(), f.next());
        let file = f.collect::<Vec<_>>().join(" ");
        if file != path || !perms.contains('x') {
            continue;
        }
        let (lo, hi) = range.split_once('-')?;
        return Some(MappingInfo {
            start: u64::from_str_radix(lo, 16).ok()?,
            limit: u64::from_str_radix(hi, 16).ok()?,
            file_offset: u64::from_str_radix(offset, 16).ok()?,
            ..MappingInfo::default()
        });
    }
    None
}

/// Bias from the executable mapping: runtime start minus the link address of the segment at that offset.
fn maps_bias<'d, R: object::ReadRef<'d>>(
    file: &object::File<'d, R>,
    exec: &MappingInfo,
) -> Option<u64> {
    use object::{Object, ObjectSegment};
    file.segments().find_map(|seg| {
        let (off, _) = seg.file_range();
        let page = off & !0xfff;
        (page == exec.file_offset).then(|| exec.start.wrapping_sub(seg.address() & !0xfff))
    })
}

fn load_dwarf<R: object::ReadRef<'static>>(
    file: &object::File<'static, R>,
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
        let s = Symbolizer::global().expect("symbolizer loads /proc/self/exe");
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
        assert!(
            !s.mapping().build_id.is_empty(),
            "build id present (.cargo/config.toml links with --build-id)"
        );
        assert!(
            s.mapping().start <= addr && addr < s.mapping().limit,
            "address in the exec mapping"
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

    #[test]
    fn exec_mapping_parses_maps_lines() {
        let maps = "55d0c0000000-55d0c0010000 r--p 00000000 08:01 42 /usr/bin/nl6\n\
                    55d0c0010000-55d0c0200000 r-xp 00010000 08:01 42 /usr/bin/nl6\n";
        let m = exec_mapping(maps, "/usr/bin/nl6").unwrap();
        assert_eq!(
            (m.start, m.limit, m.file_offset),
            (0x55d0c0010000, 0x55d0c0200000, 0x10000)
        );
        assert!(exec_mapping(maps, "/other").is_none());
    }
}

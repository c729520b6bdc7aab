//! One ELF image of the process (the executable, a shared object, the vDSO), mapped read-only, and the
//! compact function index built from it on first lookup.
//!
//! What it owns: opening the right file (the executable through `/proc/self/exe`; a shared object by its
//! path, only if its inode is the mapped one), the load bias, the build ID, the choice of symbol table
//! (the image's `.symtab`; else the `.symtab` of its separate debug file, found by build ID under
//! `/usr/lib/debug/.build-id/`; else `.dynsym`) and the index: function symbol numbers sorted by
//! address, 4 bytes per function. Names stay in the mapped file and are read when asked for.
//!
//! What it never does: copy a file into the heap.
#![forbid(unsafe_code)]

use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;

use object::elf::{FileHeader64, PF_X, PT_LOAD, SHN_UNDEF, STB_GLOBAL, STB_WEAK};
use object::elf::{STT_FUNC, STT_GNU_IFUNC};
use object::read::elf::{ElfFile64, ProgramHeader, Sym, SymbolTable};
use object::{Endianness, Object};

use super::super::mapped;
use super::super::maps::MapsEntry;

type Table = SymbolTable<'static, FileHeader64<Endianness>, &'static [u8]>;

/// Where the separate debug files of packaged libraries live (Debian's `*-dbg`/`*-dbgsym` packages).
const DEBUG_BY_BUILD_ID: &str = "/usr/lib/debug/.build-id";

/// A parsed, mapped ELF image.
pub(super) struct Image {
    pub(super) file: ElfFile64<'static, Endianness>,
    /// Runtime address minus link-time address.
    pub(super) bias: u64,
    /// GNU build ID, lowercase hex ("" when absent).
    pub(super) build_id: String,
    index: OnceLock<FunctionIndex>,
}

/// Function symbols of one table, sorted by address.
struct FunctionIndex {
    table: Table,
    /// Symbol numbers into `table`, by address; one per address (aliases dropped).
    order: Vec<u32>,
}

/// A function symbol found for an address.
pub(super) struct Function {
    /// Its number in the image's chosen table (stable: a cache key).
    pub(super) number: u32,
    /// Link-time address of its first instruction.
    pub(super) start: u64,
    /// The name as the binary spells it.
    pub(super) raw: &'static str,
}

impl Image {
    /// Maps the object that `exec` (an executable entry of `/proc/self/maps`) belongs to. `main` says it is
    /// the executable (opened through `/proc/self/exe`, which works even once the path is replaced).
    pub(super) fn load(exec: &MapsEntry, main: bool) -> Result<Image, String> {
        let data = if exec.path == "[vdso]" {
            mapped::vdso(exec.start, exec.end - exec.start)
                .ok_or_else(|| "the vdso is not at AT_SYSINFO_EHDR".to_string())?
        } else {
            let path = if main { "/proc/self/exe" } else { &exec.path };
            let f = std::fs::File::open(path).map_err(|e| format!("opening {path}: {e}"))?;
            let ino = f.metadata().map(|m| m.ino()).unwrap_or(0);
            if ino != exec.inode {
                return Err(format!(
                    "{path} is no longer the file mapped (inode changed)"
                ));
            }
            mapped::map_file(&f).map_err(|e| format!("mapping {path}: {e}"))?
        };
        let file = ElfFile64::<Endianness>::parse(data)
            .map_err(|e| format!("parsing {} as 64-bit ELF: {e}", exec.path))?;
        let build_id = match file.build_id() {
            Ok(Some(id)) => hex(id),
            _ => String::new(),
        };
        let bias = load_bias(&file, exec)
            .ok_or_else(|| format!("no loadable segment of {} at its offset", exec.path))?;
        Ok(Image {
            file,
            bias,
            build_id,
            index: OnceLock::new(),
        })
    }

    /// The function symbol containing the link-time address `link`, if a symbol covers it.
    pub(super) fn function_at(&self, link: u64) -> Option<Function> {
        let index = self.index.get_or_init(|| FunctionIndex::build(self));
        let endian = self.file.endian();
        let syms = index.table.symbols();
        let at = |i: usize| &syms[index.order[i] as usize];
        let i = index
            .order
            .partition_point(|&n| syms[n as usize].st_value(endian) <= link)
            .checked_sub(1)?;
        let (start, size) = (at(i).st_value(endian), at(i).st_size(endian));
        let within = if size > 0 {
            link < start.saturating_add(size)
        } else {
            i + 1 < index.order.len() && link < at(i + 1).st_value(endian)
        };
        if !within {
            return None;
        }
        let number = index.order[i];
        let raw = index.table.symbol_name(endian, at(i)).ok()?;
        Some(Function {
            number,
            start,
            raw: std::str::from_utf8(raw).ok()?,
        })
    }
}

impl FunctionIndex {
    fn build(image: &Image) -> FunctionIndex {
        let own = image.file.elf_symbol_table();
        let table = if function_count(own, image.file.endian()) > 0 {
            *own
        } else {
            debug_file_table(&image.build_id)
                .unwrap_or_else(|| *image.file.elf_dynamic_symbol_table())
        };
        let endian = image.file.endian();
        let syms = table.symbols();
        let mut order: Vec<u32> = (0..syms.len())
            .filter(|&i| is_function(&syms[i], endian))
            .filter_map(|i| u32::try_from(i).ok())
            .collect();
        // Among aliases (same address) keep the biggest, then global before weak before local.
        let rank = |s: &object::elf::Sym64<Endianness>| match s.st_bind() {
            STB_GLOBAL => 0,
            STB_WEAK => 1,
            _ => 2,
        };
        order.sort_by_key(|&n| {
            let s = &syms[n as usize];
            (
                s.st_value(endian),
                std::cmp::Reverse(s.st_size(endian)),
                rank(s),
            )
        });
        order.dedup_by_key(|n| syms[*n as usize].st_value(endian));
        order.shrink_to_fit();
        FunctionIndex { table, order }
    }
}

fn is_function(s: &object::elf::Sym64<Endianness>, endian: Endianness) -> bool {
    matches!(s.st_type(), STT_FUNC | STT_GNU_IFUNC)
        && s.st_value(endian) != 0
        && s.st_shndx(endian) != SHN_UNDEF
}

fn function_count(table: &Table, endian: Endianness) -> usize {
    table
        .symbols()
        .iter()
        .filter(|s| is_function(s, endian))
        .count()
}

/// The `.symtab` of the separate debug file with this build ID, when one is installed and has functions.
fn debug_file_table(build_id: &str) -> Option<Table> {
    if build_id.len() < 3 {
        return None;
    }
    let path = format!(
        "{DEBUG_BY_BUILD_ID}/{}/{}.debug",
        &build_id[..2],
        &build_id[2..]
    );
    let data = mapped::map_file(&std::fs::File::open(path).ok()?).ok()?;
    let file = ElfFile64::<Endianness>::parse(data).ok()?;
    let same = matches!(file.build_id(), Ok(Some(id)) if hex(id) == build_id);
    let table = *file.elf_symbol_table();
    (same && function_count(&table, file.endian()) > 0).then_some(table)
}

/// Bias of the image mapped by `exec`: the runtime start of the mapping minus the link address of the same
/// file byte, from the loadable segment that covers the mapping's file offset (an executable one first).
fn load_bias(file: &ElfFile64<'static, Endianness>, exec: &MapsEntry) -> Option<u64> {
    let endian = file.endian();
    let loads = || {
        file.elf_program_headers()
            .iter()
            .filter(|p| p.p_type(endian) == PT_LOAD)
    };
    let page = |off: u64| off & !0xfff;
    let covers = |p: &&object::elf::ProgramHeader64<Endianness>| {
        let (off, size) = (p.p_offset(endian), p.p_filesz(endian));
        page(off) <= exec.offset && exec.offset < off.saturating_add(size.max(1))
    };
    let seg = loads()
        .filter(|p| p.p_flags(endian) & PF_X != 0)
        .find(covers)
        .or_else(|| loads().find(covers))?;
    Some(
        exec.start
            .wrapping_sub(exec.offset)
            .wrapping_add(seg.p_offset(endian))
            .wrapping_sub(seg.p_vaddr(endian)),
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

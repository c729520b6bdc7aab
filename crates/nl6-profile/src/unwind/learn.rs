//! Learning the rule tables of the process's code objects (outside any handler): at profile start and at
//! every thread dump, `/proc/self/maps` is read and each executable object not yet known — the executable
//! (through `/proc/self/exe`), each shared object (glibc's `libc.so.6`, `ld.so`, …) and the vDSO (from
//! memory) — gets its table: rows from its CFI ([`super::cfi`]) packed into an anonymous mapping and
//! published ([`super::rules::publish_table`]). Objects are never forgotten (nl6 does not unload code).
//!
//! Also owns the objects' names, for the stop frames a walk writes ([`object_name`]).
//!
//! Never: runs in a handler; puts a table on nl6's heap (the rows are built in a temporary `Vec`, freed
//! before the function returns; callers learn under `heap::unsampled`, so the heap profile never sees
//! them).
use std::collections::BTreeMap;
use std::sync::Mutex;

use super::code::MappedFile;
use super::rules::{self, Rule, Table};
use crate::maps::{self, MapsEntry};

/// Published objects: (path as the map prints it, code start) → slot, and the names by slot.
struct Known {
    by_key: BTreeMap<(String, u64), usize>,
    names: Vec<String>,
}

static KNOWN: Mutex<Known> = Mutex::new(Known {
    by_key: BTreeMap::new(),
    names: Vec::new(),
});

/// The short name of published object `i` (`libc.so.6`, `[vdso]`, `nl6`), for stop frames.
pub(crate) fn object_name(i: usize) -> Option<String> {
    let k = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    k.names.get(i).cloned()
}

/// Learns the tables of every code object not yet known (cheap when nothing is new).
pub(crate) fn learn_objects() {
    let Ok(maps) = maps::read_self() else {
        return;
    };
    let exe = std::fs::read_link("/proc/self/exe")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    let mut paths: Vec<&str> = maps
        .iter()
        .filter(|e| e.executable && (e.is_file() || e.path == "[vdso]"))
        .map(|e| e.path.as_str())
        .collect();
    paths.dedup();
    for path in paths {
        let Some((lo, hi)) = maps::executable_span(&maps, path) else {
            continue;
        };
        if known.by_key.contains_key(&(path.to_string(), lo)) {
            continue;
        }
        let table = build(&maps, path, path == exe, lo, hi).unwrap_or(Table {
            lo,
            hi,
            rules: &[],
            pcs: &[],
            idx: &[],
        });
        let Some(slot) = rules::publish_table(table) else {
            return;
        };
        known.by_key.insert((path.to_string(), lo), slot);
        let short = path.rsplit('/').next().unwrap_or(path);
        known
            .names
            .push(short.trim_end_matches(" (deleted)").to_string());
    }
}

/// The table of the object at `path` with code `[lo, hi)`.
fn build(maps: &[MapsEntry], path: &str, is_exe: bool, lo: u64, hi: u64) -> Option<Table> {
    use object::{Object, ObjectSegment};
    let rows = if path == "[vdso]" {
        let v = maps.iter().find(|e| e.path == "[vdso]")?;
        let image = crate::mapped::vdso(v.start, v.end - v.start)?;
        let obj = object::File::parse(image).ok()?;
        let first = obj.segments().map(|s| s.address()).min()? & !0xfff;
        super::cfi::rows(&obj, v.start.wrapping_sub(first))
    } else {
        let (_, _, base) = super::code::text_range(maps, path)?;
        let file = if is_exe {
            MappedFile::open(std::path::Path::new("/proc/self/exe"))?
        } else {
            MappedFile::open(std::path::Path::new(path))?
        };
        let obj = object::File::parse(file.bytes()).ok()?;
        let first = obj.segments().map(|s| s.address()).min()? & !0xfff;
        super::cfi::rows(&obj, base?.wrapping_sub(first))
    };
    pack(lo, hi, &rows)
}

/// Packs rows into a fresh anonymous mapping (distinct rules, then offsets, then rule indices).
fn pack(lo: u64, hi: u64, rows: &[(u64, Rule)]) -> Option<Table> {
    let rows: Vec<(u32, Rule)> = rows
        .iter()
        .filter(|r| r.0 >= lo && r.0 - lo <= u32::MAX as u64)
        .map(|r| ((r.0 - lo) as u32, r.1))
        .collect();
    let mut distinct: Vec<Rule> = rows.iter().map(|r| r.1).collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() > u16::MAX as usize {
        return None;
    }
    let n = rows.len();
    let rule_bytes = distinct.len() * std::mem::size_of::<Rule>();
    let bytes = rule_bytes + n * 4 + n * 2;
    let p = super::code::anonymous_mapping(bytes)?;
    // SAFETY: a fresh mapping of `bytes` (page-aligned), filled below within its bounds, then only read
    // (never unmapped), which makes the `'static` slices sound.
    unsafe {
        let rules_p = p as *mut Rule;
        std::ptr::copy_nonoverlapping(distinct.as_ptr(), rules_p, distinct.len());
        let pcs_p = p.add(rule_bytes) as *mut u32;
        let idx_p = p.add(rule_bytes + n * 4) as *mut u16;
        for (i, (off, r)) in rows.iter().enumerate() {
            pcs_p.add(i).write(*off);
            let k = distinct.binary_search(r).unwrap_or(0) as u16;
            idx_p.add(i).write(k);
        }
        Some(Table {
            lo,
            hi,
            rules: std::slice::from_raw_parts(rules_p, distinct.len()),
            pcs: std::slice::from_raw_parts(pcs_p, n),
            idx: std::slice::from_raw_parts(idx_p, n),
        })
    }
}

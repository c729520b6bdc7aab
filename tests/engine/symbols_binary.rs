//! The engine's symbolizer through the real binary; the engine's own half is
//! crates/nl6-profile/tests/engine_symbols.rs.
//!
//! - The real binary's `/debug/pprof/symbol` names addresses in libc (glibc) and in the vDSO.
//! - The real binary's first CPU profile raises `RssAnon` by ≤ 1 MiB, and its heap profile has no
//!   symbolizer frames.
//!
//! Run on both builds:
//!   cargo test --test engine symbols_binary:: -- --test-threads=2
//!   cargo test --target x86_64-unknown-linux-musl --test engine symbols_binary:: -- --test-threads=2
use crate::common;
// /proc/PID/maps read by the test, not by the engine.
use crate::maps;

use common::{boot, status_field};
use nl6_profile::proto;
use object::{Object, ObjectSymbol};
use std::process::Command;
use std::time::{Duration, Instant};

/// The offset of `name` from the start of the vDSO's executable mapping, in this process (the kernel maps
/// the same image into every process).
fn vdso_offset_of(name: &str) -> Option<(u64, u64)> {
    let maps = maps::read_self();
    let v = maps.iter().find(|m| m.path == "[vdso]")?;
    // SAFETY: the kernel maps the vDSO readable for the life of the process over the maps entry's range.
    let image =
        unsafe { std::slice::from_raw_parts(v.start as *const u8, (v.end - v.start) as usize) };
    let file = object::File::parse(image).ok()?;
    let sym = file
        .dynamic_symbols()
        .find(|s| s.name() == Ok(name) && s.address() != 0)?;
    // The vDSO is linked at 0 (or its own base): its first segment sits at the mapping's start.
    let base = file
        .segments()
        .next()
        .map(|s| object::ObjectSegment::address(&s))?;
    Some((sym.address() - base, v.end - v.start))
}

/// The same shared object's address of a function in another process: same file offset, other base.
fn address_in(pid: u32, path: &str, own_addr: u64) -> u64 {
    let own = maps::read_self();
    let mine = own.iter().find(|m| m.contains(own_addr)).unwrap();
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let theirs = maps::parse(&text)
        .into_iter()
        .find(|m| m.path == path && m.executable && m.offset == mine.offset)
        .unwrap_or_else(|| panic!("{path} not mapped in {pid}"));
    theirs.start + (own_addr - mine.start)
}

#[test]
fn symbol_endpoint_names_shared_objects_and_the_vdso() {
    let n = boot().start();
    n.open_pull_only();
    let mut want = Vec::new();
    let text = std::fs::read_to_string(format!("/proc/{}/maps", n.pid())).unwrap();
    let child = maps::parse(&text);
    if let (Some((off, len)), Some(v)) = (
        vdso_offset_of("__vdso_clock_gettime"),
        child.iter().find(|m| m.path == "[vdso]"),
    ) {
        assert_eq!(v.end - v.start, len, "same vDSO image");
        want.push((v.start + off, "clock_gettime"));
    }
    if cfg!(target_env = "gnu") {
        let own = libc::munmap as *const () as u64;
        let path = maps::read_self()
            .into_iter()
            .find(|m| m.contains(own))
            .unwrap()
            .path;
        want.push((address_in(n.pid(), &path, own), "munmap"));
    }
    assert!(!want.is_empty(), "nothing to look up on this system");
    let query: Vec<String> = want.iter().map(|(a, _)| format!("{a:#x}")).collect();
    let (status, _, body) = n.http("POST", "/debug/pprof/symbol", query.join("+").as_bytes());
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 200, "{body}");
    for (addr, name) in &want {
        let line = body
            .lines()
            .find(|l| l.starts_with(&format!("{addr:#x} ")))
            .unwrap_or_else(|| panic!("{addr:#x} ({name}) not resolved: {body}"));
        assert!(line.contains(name), "{line} should name {name}");
    }
}

/// `RssAnon:` of a process, in KiB.
fn rss_anon(pid: u32) -> u64 {
    status_field(pid, "RssAnon:")
}

#[test]
fn first_cpu_profile_costs_at_most_a_mib_and_stays_out_of_the_heap_profile() {
    // The release build keeps the symbol table but no DWARF: test the same shape (this build's DWARF
    // would add addr2line's tables, a debug-build feature).
    let copy = std::env::temp_dir().join(format!("nl6-nodwarf-{}", std::process::id()));
    let st = Command::new("objcopy")
        .args(["--strip-debug", common::BIN])
        .arg(&copy)
        .status()
        .expect("objcopy (binutils)");
    assert!(st.success());
    let n = boot().binary(copy.to_str().unwrap()).start();
    n.open_pull_only();
    let pid = n.pid();
    std::thread::sleep(Duration::from_millis(300));
    let before = rss_anon(pid);
    let started = Instant::now();
    let (status, _, body) = n.http("GET", "/debug/pprof/profile?seconds=1", b"");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    proto::decode(&body).expect("a CPU profile");
    std::thread::sleep(Duration::from_millis(200));
    let after = rss_anon(pid);
    println!(
        "FIGURE first CPU profile: RssAnon {before} -> {after} KiB (+{} KiB) in {:?}",
        after.saturating_sub(before),
        started.elapsed()
    );
    assert!(
        after <= before + 1024,
        "RssAnon grew {before} -> {after} KiB on the first CPU profile"
    );

    let (status, _, body) = n.http("GET", "/debug/pprof/heap", b"");
    assert_eq!(status, 200);
    let heap = proto::decode(&body).unwrap();
    let s = |i: i64| heap.string_table[i as usize].as_str();
    let inuse = heap
        .sample_type
        .iter()
        .position(|t| s(t.r#type) == "inuse_space")
        .unwrap();
    let names = |loc: u64| -> Vec<&str> {
        let l = heap.location.iter().find(|l| l.id == loc).unwrap();
        l.line
            .iter()
            .map(|ln| {
                let f = heap
                    .function
                    .iter()
                    .find(|f| f.id == ln.function_id)
                    .unwrap();
                s(f.name)
            })
            .collect()
    };
    let symbolizer_bytes: i64 = heap
        .sample
        .iter()
        .filter(|smp| {
            smp.location_id.iter().flat_map(|&l| names(l)).any(|n| {
                n.contains("nl6_profile::symbols")
                    || n.contains("nl6_profile::mapped")
                    || n.starts_with("addr2line::")
            })
        })
        .map(|smp| smp.value[inuse])
        .sum();
    assert_eq!(
        symbolizer_bytes, 0,
        "the symbolizer holds {symbolizer_bytes} B of nl6's in-use heap"
    );
    drop(n);
    let _ = std::fs::remove_file(&copy);
}

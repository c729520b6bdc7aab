//! Every frame named, and the symbolizer out of nl6's own memory picture (issue 12, items 1 and 6a).
//!
//! - A CPU profile of work that spends its time in libc (`mmap`/`munmap`, `memcpy`) has `<unknown>` at
//!   ≤ 1 % of flat time as `go tool pprof -top` reads it back, and one Mapping per executable mapping (libc
//!   with its build ID on glibc).
//! - The real binary's `/debug/pprof/symbol` names addresses in libc (glibc) and in the vDSO.
//! - The real binary's first CPU profile raises `RssAnon` by ≤ 1 MiB, and its heap profile has no
//!   symbolizer frames.
//!
//! Run on both builds:
//!   cargo test --test engine_symbols -- --test-threads=2
//!   cargo test --target x86_64-unknown-linux-musl --test engine_symbols -- --test-threads=2
mod common;

use common::{boot, status_field};
use nl6::profiling::{cpu, encode, labels, proto};
use object::{Object, ObjectSymbol};
use std::process::Command;
use std::time::{Duration, Instant};

/// One MiB: the buffer each round maps, fills, copies and unmaps.
const CHUNK: usize = 1 << 20;

/// Work whose time is mostly in libc (on glibc) and in the kernel behind libc's system-call wrappers.
#[inline(never)]
fn libc_heavy_work(cpu_time: Duration) -> u64 {
    let src = vec![7u8; CHUNK];
    let mut dst = vec![0u8; CHUNK];
    let mut sum = 0u64;
    let start = cpu_now();
    while cpu_now() - start < cpu_time {
        // SAFETY: a fresh anonymous private mapping of CHUNK bytes, written and unmapped here only.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                CHUNK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            libc::memset(p, 1, CHUNK);
            dst.copy_from_slice(&src);
            sum += u64::from(*(p as *const u8)) + u64::from(dst[CHUNK / 2]);
            libc::munmap(p, CHUNK);
        }
    }
    std::hint::black_box(sum)
}

/// This thread's CPU time.
fn cpu_now() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn go_pprof(args: &[&str], path: &std::path::Path) -> String {
    let mut all: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    all.push(path.as_os_str());
    common::go_pprof_ok(&all, &std::env::temp_dir())
}

/// (flat %, name) rows of `go tool pprof -top`.
fn top_rows(top: &str) -> Vec<(f64, String)> {
    top.lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let pct = cols.get(1)?.strip_suffix('%')?.parse().ok()?;
            Some((pct, cols.get(5..)?.join(" ")))
        })
        .collect()
}

/// The GNU build ID of an ELF file, lowercase hex.
fn file_build_id(path: &str) -> String {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let file = object::File::parse(&*data).unwrap();
    let id = file.build_id().unwrap().unwrap_or_default();
    id.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn cpu_profile_of_libc_work_names_every_leaf() {
    let session = cpu::start(cpu::MAX_HZ).expect("start the CPU sampler");
    let worker = labels::spawn(labels::Subsystem::SNMP, "libc-work", || {
        libc_heavy_work(Duration::from_millis(1500))
    })
    .unwrap();
    worker.join().unwrap();
    let p = session.stop();
    let bytes = encode::cpu(&p);
    let path = std::env::temp_dir().join(format!("nl6-symbols-{}.pb.gz", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();

    let top = go_pprof(&["-top", "-nodecount=1000", "-nodefraction=0"], &path);
    let rows = top_rows(&top);
    assert!(rows.len() > 3, "{top}");
    let unknown: f64 = rows
        .iter()
        .filter(|(_, n)| n == "<unknown>")
        .fold(0.0, |sum, r| sum + r.0);
    println!("FIGURE libc-heavy CPU profile: <unknown> {unknown}% of flat time");
    assert!(
        unknown <= 1.0,
        "<unknown> is {unknown}% of flat time:\n{top}"
    );
    assert!(
        rows.iter().any(|(_, n)| n.ends_with("munmap")),
        "munmap is named:\n{top}"
    );

    let prof = proto::decode(&bytes).unwrap();
    let s = |i: i64| prof.string_table[i as usize].as_str();
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    assert_eq!(
        s(prof.mapping[0].filename),
        exe.to_string_lossy(),
        "the executable's Mapping comes first"
    );
    let maps = nl6::profiling::maps::read_self().unwrap();
    for m in maps.iter().filter(|m| m.executable && m.is_file()) {
        let mapping = prof
            .mapping
            .iter()
            .find(|p| p.memory_start == m.start && p.memory_limit == m.end)
            .unwrap_or_else(|| panic!("no Mapping for {m:?}"));
        assert_eq!(mapping.file_offset, m.offset, "{m:?}");
        assert_eq!(s(mapping.filename), m.path);
        assert_eq!(s(mapping.build_id), file_build_id(&m.path), "{m:?}");
        assert!(mapping.has_functions, "{m:?}");
    }
    if cfg!(target_env = "gnu") {
        assert!(
            prof.mapping
                .iter()
                .any(|m| s(m.filename).contains("/libc.so") && !s(m.build_id).is_empty()),
            "a Mapping for libc with its build ID"
        );
    }
    if std::env::var_os("NL6_KEEP_PROFILE").is_none() {
        let _ = std::fs::remove_file(&path);
    }
}

/// The offset of `name` from the start of the vDSO's executable mapping, in this process (the kernel maps
/// the same image into every process).
fn vdso_offset_of(name: &str) -> Option<(u64, u64)> {
    let maps = nl6::profiling::maps::read_self().unwrap();
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
    let own = nl6::profiling::maps::read_self().unwrap();
    let mine = own.iter().find(|m| m.contains(own_addr)).unwrap();
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let theirs = nl6::profiling::maps::parse(&text)
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
    let child = nl6::profiling::maps::parse(&text);
    if let (Some((off, len)), Some(v)) = (
        vdso_offset_of("__vdso_clock_gettime"),
        child.iter().find(|m| m.path == "[vdso]"),
    ) {
        assert_eq!(v.end - v.start, len, "same vDSO image");
        want.push((v.start + off, "clock_gettime"));
    }
    if cfg!(target_env = "gnu") {
        let own = libc::munmap as *const () as u64;
        let path = nl6::profiling::maps::read_self()
            .unwrap()
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
                n.contains("profiling::symbols")
                    || n.contains("profiling::mapped")
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

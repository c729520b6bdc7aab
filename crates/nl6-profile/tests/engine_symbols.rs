//! Every frame named, and the symbolizer out of nl6's own memory picture.
//!
//! - A CPU profile of work that spends its time in libc (`mmap`/`munmap`, `memcpy`) has `<unknown>` at
//!   ≤ 1 % of flat time as `go tool pprof -top` reads it back, and one Mapping per executable mapping (libc
//!   with its build ID on glibc).
//!
//! The same through the real binary (the symbol endpoint, the first profile's memory): nl6's
//! tests/engine/symbols_binary.rs. Run on both builds:
//!   cargo test -p nl6-profile --test engine_symbols -- --test-threads=2
//!   cargo test -p nl6-profile --target x86_64-unknown-linux-musl --test engine_symbols -- --test-threads=2
#[path = "support/go_pprof.rs"]
mod go_pprof_support;

mod support;
use nl6_profile::{cpu, encode};
use std::time::Duration;
use support::proto;

use nl6_profile::labels::LabelSet;
use object::Object;

/// A one-pair label set, `{subsystem = name}` (the engine has no vocabulary of its own).
fn label(name: &str) -> LabelSet {
    LabelSet::new([("subsystem", name)])
}

/// One MiB: the buffer each round maps, fills, copies and unmaps.
const CHUNK: usize = 1 << 20;

/// Work whose time is mostly in libc (on glibc) and in the kernel behind libc's system-call wrappers.
#[inline(never)]
fn libc_heavy_work(cpu_time: Duration) -> u64 {
    let src = vec![7u8; CHUNK];
    let mut dst = vec![0u8; CHUNK];
    let mut sum = 0u64;
    let start = support::thread_cpu();
    while support::thread_cpu() - start < cpu_time {
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

fn go_pprof(args: &[&str], path: &std::path::Path) -> String {
    let mut all: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    all.push(path.as_os_str());
    go_pprof_support::go_pprof_ok(&all, &std::env::temp_dir())
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
    let worker = nl6_profile::threads::spawn_labelled(label("snmp"), "libc-work", || {
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
    let maps = support::maps::read_self();
    for m in maps
        .iter()
        .filter(|m| m.executable && m.path.starts_with('/'))
    {
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

//! Low limits never give a silently partial profile (the real binary under `prlimit`):
//! - `RLIMIT_SIGPENDING` = 4: the CPU sampler can arm per-thread timers on 4 threads only; the profile's
//!   comments (`go tool pprof -comments`), one log line and `GET /api/v1/profiling` count and name the
//!   others. A thread dump lists every thread, a stack it could not capture with the reason.
//! - `RLIMIT_AS` = 1.2 GB: the heap sampler cannot reserve its usual region; it says so (log line,
//!   profile comment) and samples into the smaller one it could reserve.
//!
//! The pending-signal count is per user: nl6 runs as a uid of this test's own (`setpriv`), so other
//! processes' timers and signals never count against its limit. Runs on the static musl build too (the
//! `serve_pull` prefix of scripts/test.sh's musl list).
use crate::common;

use common::{boot, go_pprof_ok, json, threads_of, wait_until, Nl6};
use prost::Message;
use std::io::Read;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// `setpriv` to a uid nothing else uses (one per test: they run side by side), then `prlimit` with
/// `limit`, then nl6.
fn limited(limit: &str) -> Vec<String> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let uid = 40_000 + (std::process::id() % 5_000) * 4 + NEXT.fetch_add(1, Ordering::Relaxed) % 4;
    let uid = uid.to_string();
    [
        "setpriv",
        "--reuid",
        &uid,
        "--regid",
        &uid,
        "--clear-groups",
        "--",
        "prlimit",
        limit,
        "--",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn start(limit: &str, extra: &[&str]) -> Nl6 {
    let wrapper = limited(limit);
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let nl6 = boot().under(&wrapper).args(extra).start();
    nl6.open_pull_only();
    nl6
}

fn decode(gz: &[u8]) -> nl6_profile::proto::Profile {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut raw)
        .expect("gzip");
    nl6_profile::proto::Profile::decode(raw.as_slice()).expect("pprof")
}

fn comments(p: &nl6_profile::proto::Profile) -> Vec<String> {
    p.comment
        .iter()
        .map(|i| p.string_table[*i as usize].clone())
        .collect()
}

/// The number after `word` in `text` ("22 of 26" → 22 for `word` = "").
fn number_before(text: &str, marker: &str) -> usize {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} in {text:?}"));
    text[..at]
        .split(|c: char| !c.is_ascii_digit())
        .rfind(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a number before {marker:?} in {text:?}"))
}

/// The thread names of `pid` (`/proc/<pid>/task/*/comm`).
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
                .map(|s| s.trim_end().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_cpu_profile_under_sigpending_4_counts_and_names_the_threads_it_could_not_arm() {
    let mut nl6 = start("--sigpending=4:4", &[]);
    let threads = threads_of(nl6.pid());
    assert!(threads > 8, "{threads} threads: too few to show the limit");
    let (s, _, body) = nl6.http("GET", "/debug/pprof/profile?seconds=2", b"");
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
    let p = decode(&body);
    let notes = comments(&p);
    let note = notes
        .iter()
        .find(|c| c.contains("could not arm"))
        .unwrap_or_else(|| panic!("no comment names the unarmed threads: {notes:?}"));
    let unarmed = number_before(note, " of ");
    let seen = number_before(note, " threads");
    // Four timers fit under the limit (the collector thread is one of the threads seen).
    assert!(
        unarmed + 4 >= seen && unarmed < seen && seen + 2 >= threads,
        "{note} ({threads} threads)"
    );
    assert!(note.contains("RLIMIT_SIGPENDING"), "the cause: {note}");
    let names = thread_names(nl6.pid());
    assert!(
        names
            .iter()
            .filter(|n| n.starts_with("snmp") || n.starts_with("http"))
            .any(|n| note.contains(n.as_str())),
        "names the threads ({names:?}): {note}"
    );
    // go tool pprof shows it (an independent reader of the comment field).
    let work = tempdir();
    let file = work.join("cpu.pb.gz");
    std::fs::write(&file, &body).unwrap();
    let shown = go_pprof_ok(&["-comments".as_ref(), file.as_os_str()], &work);
    assert!(
        shown.contains("could not arm"),
        "go tool pprof -comments: {shown}"
    );
    // One log line, and the REST view.
    assert!(
        nl6.wait_for_log("could not arm", Duration::from_secs(2)),
        "no log line: {}",
        nl6.stderr()
    );
    let logged = nl6.log_lines("nl6: cpu profile:");
    assert_eq!(logged.len(), 1, "one line per profile: {logged:?}");
    let (s, _, b) = nl6.http("GET", "/api/v1/profiling", b"");
    assert_eq!(s, 200);
    let state = json(&b);
    let data = &state["data"];
    assert_eq!(
        data["cpu_threads_unarmed"].as_u64(),
        Some(unarmed as u64),
        "{state}"
    );
    let listed = data["cpu_threads_unarmed_names"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(listed, unarmed, "{state}");
    nl6.terminate(Duration::from_secs(25));
}

fn dump_blocks(dump: &str) -> Vec<&str> {
    dump.split("\n\n")
        .filter(|b| b.starts_with("goroutine "))
        .collect()
}

/// `goroutine?debug=2`, checked to list every one of `threads` (one may come or go meanwhile).
fn full_dump(nl6: &Nl6, threads: usize, when: &str) -> String {
    let (s, _, b) = nl6.http("GET", "/debug/pprof/goroutine?debug=2", b"");
    assert_eq!(s, 200);
    let dump = String::from_utf8_lossy(&b).into_owned();
    let listed = dump_blocks(&dump).len();
    assert!(
        listed + 1 >= threads,
        "{listed} of {threads} threads listed {when}:\n{dump}"
    );
    dump
}

#[test]
fn a_thread_dump_under_sigpending_4_lists_every_thread_and_why_a_stack_is_missing() {
    let mut nl6 = start("--sigpending=4:4", &[]);
    let threads = threads_of(nl6.pid());
    // No profile running: every thread listed, every stack captured (the capture waits for the queue).
    let dump = full_dump(&nl6, threads, "with no profile");
    let blocks = dump_blocks(&dump);
    let empty: Vec<&&str> = blocks.iter().filter(|b| b.contains("(no stack")).collect();
    assert!(
        empty.is_empty(),
        "stacks missing with the queue free: {empty:?}"
    );
    // During a CPU profile the timers hold every slot of the limit: no stack-capture signal can be
    // queued, and each thread says so.
    let addr = nl6.addr;
    let cpu = std::thread::spawn(move || {
        let path = "/debug/pprof/profile?seconds=3";
        common::request(addr, "GET", path, &[], b"", Duration::from_secs(20)).0
    });
    assert!(
        wait_until(Duration::from_secs(3), || nl6
            .stderr()
            .contains("could not arm")),
        "the CPU profile did not start: {}",
        nl6.stderr()
    );
    let dump = full_dump(&nl6, threads, "during a CPU profile");
    let blocks = dump_blocks(&dump);
    let unexplained: Vec<&&str> = blocks.iter().filter(|b| b.lines().count() < 2).collect();
    assert!(
        unexplained.is_empty(),
        "a thread with neither stack nor reason: {unexplained:?}"
    );
    assert!(
        blocks
            .iter()
            .any(|b| b.contains("(no stack: ") && b.contains("RLIMIT_SIGPENDING")),
        "no thread says why its stack is missing:\n{dump}"
    );
    // The proto form says the same in its comment.
    let (s, _, b) = nl6.http("GET", "/debug/pprof/goroutine", b"");
    assert_eq!(s, 200);
    let notes = comments(&decode(&b));
    assert!(
        notes
            .iter()
            .any(|c| c.contains("threads have no stack") && c.contains("RLIMIT_SIGPENDING")),
        "the goroutine profile's comments: {notes:?}"
    );
    assert_eq!(cpu.join().unwrap(), 200);
    nl6.terminate(Duration::from_secs(25));
}

#[test]
fn a_heap_sampler_under_a_1_2_gb_address_space_limit_says_so_and_samples_what_it_can() {
    let mut nl6 = start(
        "--as=1200000000",
        &["-profiling-heap-rate", "4096", "-devices", "2"],
    );
    // Some allocations to sample: serving requests allocates.
    for _ in 0..50 {
        let (s, _, _) = nl6.http("GET", "/api/v1/devices", b"");
        assert_eq!(s, 200);
    }
    let (s, _, body) = nl6.http("GET", "/debug/pprof/heap", b"");
    assert_eq!(s, 200);
    let p = decode(&body);
    let notes = comments(&p);
    assert!(
        notes
            .iter()
            .any(|c| c.contains("heap sampler") && c.contains("reserve")),
        "no comment says the region is smaller: {notes:?}"
    );
    assert!(
        !p.sample.is_empty(),
        "no heap sample under the limit (the sampler must degrade, not stop): {notes:?}"
    );
    assert!(
        nl6.wait_for_log("heap sampler", Duration::from_secs(2)),
        "no log line: {}",
        nl6.stderr()
    );
    let (s, _, b) = nl6.http("GET", "/api/v1/profiling", b"");
    assert_eq!(s, 200);
    let state = json(&b);
    let warnings = state["data"]["sampler_warnings"].to_string();
    assert!(warnings.contains("heap sampler"), "{state}");
    assert!(
        nl6.is_running(),
        "the region left the program too little: {}",
        nl6.stderr()
    );
    nl6.terminate(Duration::from_secs(25));
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "nl6-low-limits-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

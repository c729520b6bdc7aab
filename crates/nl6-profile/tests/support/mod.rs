//! Helpers the engine crate's integration tests share (`mod support;` in each test file that needs
//! them): the calling thread's CPU clock, and a decoded profile's samples as function names.
#![allow(dead_code)] // each test binary uses its own subset

use std::time::Duration;

/// pprof's wire types and their bounded decoder: the engine keeps them crate-private (prost is no part of
/// its API), so the tests compile the same file to read what the engine wrote.
#[path = "../../src/proto.rs"]
pub mod proto;

/// POSIX timers this process holds, as the kernel lists them (`/proc/self/timers`), not as the engine
/// counts them.
pub fn proc_timers() -> usize {
    std::fs::read_to_string("/proc/self/timers")
        .expect("/proc/self/timers")
        .lines()
        .filter(|l| l.starts_with("ID:"))
        .count()
}

pub mod maps;
pub mod reference_timer;

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Each sample's function names, leaf first, every line of every location (inlined frames included),
/// with the sample's values.
pub fn sample_names(p: &proto::Profile) -> Vec<(Vec<String>, Vec<i64>)> {
    let name = |id: u64| -> String {
        let f = p.function.iter().find(|f| f.id == id).unwrap();
        p.string_table[f.name as usize].clone()
    };
    p.sample
        .iter()
        .map(|s| {
            let names = s
                .location_id
                .iter()
                .flat_map(|id| {
                    let loc = p.location.iter().find(|l| l.id == *id).unwrap();
                    loc.line
                        .iter()
                        .map(|l| name(l.function_id))
                        .collect::<Vec<_>>()
                })
                .collect();
            (names, s.value.clone())
        })
        .collect()
}

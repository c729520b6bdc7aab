//! The `threadcreate` profile names where each thread was spawned: every function between the spawn and
//! the spawning thread's root, in order, with no frame missing or invented (checked against the call
//! chain this file's source makes, read back from the encoded profile), on both builds:
//!   cargo test -p nl6-profile --test engine_threadcreate
//!   cargo test -p nl6-profile --target x86_64-unknown-linux-musl --test engine_threadcreate
mod support;

use nl6_profile::{encode, threads};
use support::proto;

#[inline(never)]
fn spawn_site_inner() -> std::thread::JoinHandle<u32> {
    threads::spawn_recorded("tc-probe", || 7).unwrap()
}

#[inline(never)]
fn spawn_site_outer() -> std::thread::JoinHandle<u32> {
    let h = spawn_site_inner();
    std::hint::black_box(h)
}

/// The spawn's third caller (out of line, so it keeps its frame in an optimised build too).
#[inline(never)]
fn spawn_from_here() -> u32 {
    spawn_site_outer().join().unwrap()
}

#[test]
fn threadcreate_stacks_hold_the_spawn_call_chain() {
    assert_eq!(spawn_from_here(), 7);
    let p = proto::decode(&encode::threadcreate(&threads::threadcreate_stacks())).unwrap();
    let all: Vec<Vec<String>> = support::sample_names(&p)
        .into_iter()
        .map(|(names, _)| names)
        .collect();
    let mine = all
        .iter()
        .find(|names| names.iter().any(|n| n.ends_with("::spawn_site_inner")))
        .unwrap_or_else(|| panic!("no threadcreate stack through spawn_site_inner: {all:#?}"));
    let at = |suffix: &str| {
        mine.iter()
            .position(|n| n.ends_with(suffix))
            .unwrap_or_else(|| panic!("{suffix} missing: {mine:#?}"))
    };
    let (recorded, inner, outer, test) = (
        at("::spawn_recorded"),
        at("::spawn_site_inner"),
        at("::spawn_site_outer"),
        at("::spawn_from_here"),
    );
    assert_eq!(recorded, 0, "the leaf is the spawn itself: {mine:#?}");
    assert!(
        mine[..recorded + 1]
            .iter()
            .all(|n| n.contains("spawn_recorded")),
        "{mine:#?}"
    );
    assert_eq!(inner, 1, "spawn_recorded's caller: {mine:#?}");
    assert_eq!(outer, inner + 1, "spawn_site_inner's caller: {mine:#?}");
    assert_eq!(test, outer + 1, "spawn_site_outer's caller: {mine:#?}");
    assert!(
        mine[test + 1..].iter().any(|n| n
            .contains("threadcreate_stacks_hold_the_spawn_call_chain")
            || n.contains("call_once")),
        "spawn_from_here's caller: {mine:#?}"
    );
    assert!(
        mine[test..].iter().any(|n| n.contains("thread_start")),
        "the stack reaches the spawning thread's root: {mine:#?}"
    );
}

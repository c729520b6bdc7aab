use super::*;

#[test]
fn settings_out_of_range_are_refused_by_name() {
    let e = start_with(WallConfig {
        hz: 0,
        max_threads: 4,
    })
    .err()
    .unwrap();
    assert!(e.to_string().contains("hz=0"), "{e}");
    let e = start_with(WallConfig {
        hz: 99,
        max_threads: 0,
    })
    .err()
    .unwrap();
    assert!(e.to_string().contains("max_threads=0"), "{e}");
}

/// One session at a time; the flag is given back when the session stops, and when it is dropped.
#[test]
fn one_session_at_a_time() {
    let _serial = TEST_SESSIONS.lock().unwrap_or_else(|e| e.into_inner());
    let first = start().expect("first session");
    assert!(matches!(start(), Err(WallError::Busy)));
    // 25 ticks are due; 2 is what even an emulated (qemu-user) or loaded machine gives.
    std::thread::sleep(Duration::from_millis(250));
    let p = first.stop();
    assert!(p.ticks >= 2, "{} ticks in 250 ms at 99 Hz", p.ticks);
    assert_eq!(p.period_ns, 1_000_000_000 / 99);
    let second = start().expect("free again after stop");
    drop(second);
    assert!(!is_running());
    drop(start().expect("free again after drop"));
}

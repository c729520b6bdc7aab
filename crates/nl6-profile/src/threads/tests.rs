use super::*;

fn slots(n: usize) -> Vec<Slot> {
    (0..n).map(|_| Slot::new()).collect()
}

/// A handler answering with one recognisable frame.
fn answer(slots: &[Slot], me: i32, frame: u64) -> bool {
    answer_in(slots, me, |d| {
        d.label = 3;
        d.frames[0] = frame;
        d.depth = 1;
    })
}

fn stack(frame: u64) -> Answer {
    Answer::Stack {
        label: 3,
        frames: vec![frame],
        unbounded_rsp: 0,
    }
}

#[inline(never)]
fn parked_foreign(rx: std::sync::mpsc::Receiver<()>) {
    std::hint::black_box(rx.recv()).ok();
}

/// A thread nl6 did not spawn, outside any CPU profile: nobody learnt its stack bounds, yet the
/// capture returns its whole stack (learnt from its first, leaf-only answer) and keeps no entry.
#[test]
fn a_foreign_thread_gets_its_whole_stack_and_no_entry_is_left() {
    // A wall-clock session keeps the bounds it learnt until it stops: none may run meanwhile.
    let _serial = TEST_WALL_SESSIONS.lock().unwrap_or_else(|e| e.into_inner());
    let (tx, rx) = std::sync::mpsc::channel();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        tid_tx.send(signal::gettid()).unwrap();
        parked_foreign(rx);
    });
    let tid = tid_rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let stacks = capture_all(Duration::from_secs(2));
    let t = stacks.iter().find(|t| t.tid == tid).expect("the thread");
    let names: Vec<String> = t
        .stack
        .iter()
        .filter_map(|a| crate::symbols::symbolize(a.saturating_sub(1)))
        .collect();
    assert!(
        names.iter().any(|n| n.contains("parked_foreign")),
        "{names:#?}"
    );
    assert!(unwind::foreign_bounds(tid).is_none(), "entry left behind");
    tx.send(()).unwrap();
    h.join().unwrap();
}

#[test]
fn a_handler_answers_only_the_slot_armed_for_its_thread() {
    let s = slots(3);
    assert_eq!(arm_slots(&s, &[7, 8], 1), vec![0, 1]);
    assert!(!answer(&s, 9, 0x99), "no slot for thread 9");
    assert!(answer(&s, 8, 0x88));
    assert!(!answer(&s, 8, 0x89), "a second signal finds nothing armed");
    assert_eq!(s[0].take_back(1, Duration::ZERO), Answer::Unanswered);
    assert_eq!(s[1].take_back(1, Duration::ZERO), stack(0x88));
    assert!(s.iter().all(Slot::is_free));
    // A handler arriving after its capture gave up on it finds nothing to claim.
    assert!(!answer(&s, 7, 0x77));
}

/// Capture 1 gives up on a handler that is still writing; capture 2 runs while it writes. The slot must
/// not be re-armed, and the late writer's publish must not count as capture 2's answer or touch its
/// slots; once it finished, the slot is reused.
#[test]
fn a_late_writer_is_quarantined_and_cannot_corrupt_the_next_capture() {
    let s = slots(3);
    assert_eq!(arm_slots(&s, &[7], 1), vec![0]);
    let seen = s[0].armed_for(7).expect("armed for 7");
    let late_gen = s[0].claim(seen).expect("the late handler claims");
    // SAFETY: claimed above; this test is the only user.
    unsafe { s[0].data_mut() }.frames[0] = 0xdead;
    assert_eq!(s[0].take_back(1, Duration::ZERO), Answer::Quarantined);
    assert!(!s[0].is_free());

    // Capture 2 skips the quarantined slot.
    assert_eq!(arm_slots(&s, &[7, 8], 2), vec![1, 2]);
    assert!(
        answer(&s, 7, 0x70),
        "thread 7's new signal finds its new slot"
    );
    // The late writer finishes its own slot only.
    // SAFETY: still the claim from capture 1.
    let late = unsafe { s[0].data_mut() };
    late.depth = 1;
    late.label = 9;
    s[0].publish(late_gen);
    assert_eq!(s[1].take_back(2, Duration::ZERO), stack(0x70));
    assert_eq!(s[2].take_back(2, Duration::ZERO), Answer::Unanswered);
    assert!(
        s.iter().all(Slot::is_free),
        "the late writer's slot is free again"
    );

    // Capture 3 reuses it, and reads its own answer, not the stale one.
    assert_eq!(arm_slots(&s, &[8], 3), vec![0]);
    assert!(answer(&s, 8, 0x80));
    assert_eq!(s[0].take_back(3, Duration::ZERO), stack(0x80));
}

/// A handler that saw an arming, then lost the CPU while the capture took the slot back and the next
/// capture armed it for another thread: its claim must fail (the generation differs).
#[test]
fn a_stale_claim_fails_after_the_slot_is_rearmed() {
    let s = slots(1);
    arm_slots(&s, &[7], 1);
    let seen = s[0].armed_for(7).expect("armed for 7");
    assert_eq!(s[0].take_back(1, Duration::ZERO), Answer::Unanswered);
    arm_slots(&s, &[8], 2);
    assert_eq!(
        s[0].claim(seen),
        None,
        "thread 7 must not write thread 8's slot"
    );
    assert_eq!(s[0].armed_for(7), None);
    assert!(answer(&s, 8, 0x80));
    assert_eq!(s[0].take_back(2, Duration::ZERO), stack(0x80));
}

/// A writer finishing within the spin is waited for, not quarantined.
#[test]
fn take_back_waits_for_a_writer_that_finishes_within_the_spin() {
    let s = slots(1);
    arm_slots(&s, &[7], 1);
    let generation = s[0].armed_for(7).and_then(|seen| s[0].claim(seen)).unwrap();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(5));
            // SAFETY: the claim above; the main thread only spins on the state word meanwhile.
            let d = unsafe { s[0].data_mut() };
            (d.label, d.depth, d.frames[0]) = (3, 1, 0x71);
            s[0].publish(generation);
        });
        assert_eq!(s[0].take_back(1, Duration::from_secs(5)), stack(0x71));
    });
}

//! The gate state machine, tested as values: named rows for each rule of the issue, then an exhaustive
//! sweep over states × requests × startup × environment checking the invariants.
use super::*;

const FLAG: &str = "http://pyroscope:4040";
const OTHER: &str = "http://other:4040";

fn startup(flag: bool) -> Startup {
    if flag {
        Startup::new(
            Some(FLAG.to_string()),
            Some(("user".to_string(), "secret".to_string())),
            Some("tenant-1".to_string()),
            Duration::from_secs(15),
        )
    } else {
        Startup::new(None, None, None, Duration::from_secs(15))
    }
}

/// A fixed present: 2027-01-15T08:00:00Z on the wall clock, and one monotonic instant per test run.
fn t0() -> Now {
    static MONO: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    Now {
        wall: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        mono: *MONO.get_or_init(Instant::now),
    }
}

fn pushing(addr: &str) -> GateState {
    GateState {
        value: GateValue {
            enabled: true,
            push_address: Some(addr.to_string()),
        },
        pushing: true,
        ..Default::default()
    }
}

fn pull_only() -> GateState {
    GateState {
        value: GateValue {
            enabled: true,
            push_address: None,
        },
        ..Default::default()
    }
}

fn post(enabled: bool, addr: AddressField, duration: Option<Duration>) -> PostRequest {
    PostRequest {
        enabled,
        server_address: addr,
        duration,
    }
}

fn val(s: &str) -> AddressField {
    AddressField::Value(s.to_string())
}

fn starts(t: &Transition) -> Vec<&PushTarget> {
    t.actions
        .iter()
        .filter_map(|a| match a {
            Action::StartPush(p) => Some(p),
            Action::StopPush => None,
        })
        .collect()
}

fn stops(t: &Transition) -> usize {
    t.actions.iter().filter(|a| **a == Action::StopPush).count()
}

#[test]
fn enabling_without_flag_is_pull_only() {
    let t = on_post(
        &GateState::default(),
        &post(true, AddressField::Omitted, None),
        &startup(false),
        false,
        t0(),
    )
    .unwrap();
    assert_eq!(t.state, pull_only());
    assert!(t.actions.is_empty());
    assert_eq!(t.log, "[profiling] POST: gate open, pull-only");
}

#[test]
fn omitted_address_uses_the_flag_with_credentials() {
    let t = on_post(
        &GateState::default(),
        &post(true, AddressField::Omitted, None),
        &startup(true),
        false,
        t0(),
    )
    .unwrap();
    assert_eq!(t.state, pushing(FLAG));
    let s = starts(&t);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].address, FLAG);
    assert_eq!(
        s[0].basic_auth,
        Some(("user".to_string(), "secret".to_string()))
    );
    assert_eq!(s[0].tenant.as_deref(), Some("tenant-1"));
    assert_eq!(s[0].interval, Duration::from_secs(15));
    assert!(!t.log.contains("secret") && !t.log.contains("tenant-1"));
}

#[test]
fn omitted_address_keeps_a_running_push() {
    let t = on_post(
        &pushing(OTHER),
        &post(true, AddressField::Omitted, Some(Duration::from_secs(60))),
        &startup(true),
        false,
        t0(),
    )
    .unwrap();
    assert!(t.actions.is_empty(), "{:?}", t.actions);
    assert_eq!(t.state.value.push_address.as_deref(), Some(OTHER));
    assert!(t.state.pushing);
    assert!(t.log.contains("unchanged"), "{}", t.log);
}

#[test]
fn empty_address_is_pull_only_even_with_the_flag() {
    let t = on_post(
        &pushing(FLAG),
        &post(true, AddressField::Empty, None),
        &startup(true),
        false,
        t0(),
    )
    .unwrap();
    assert_eq!(t.actions, vec![Action::StopPush]);
    assert_eq!(t.state, pull_only());
}

#[test]
fn same_address_twice_is_a_no_op_after_normalising() {
    let t = on_post(
        &pushing(FLAG),
        &post(true, val("HTTP://PYROSCOPE:4040/"), None),
        &startup(true),
        false,
        t0(),
    )
    .unwrap();
    assert!(t.actions.is_empty());
    assert_eq!(t.state, pushing(FLAG));
}

#[test]
fn a_different_address_stops_then_starts_without_credentials() {
    let t = on_post(
        &pushing(FLAG),
        &post(true, val(OTHER), None),
        &startup(true),
        false,
        t0(),
    )
    .unwrap();
    assert_eq!(t.actions.len(), 2);
    assert_eq!(t.actions[0], Action::StopPush);
    let s = starts(&t);
    assert_eq!(s[0].address, OTHER);
    assert_eq!(s[0].basic_auth, None);
    assert_eq!(s[0].tenant, None);
    assert!(
        t.log
            .contains("credentials withheld: address differs from -profiling-pyroscope"),
        "{}",
        t.log
    );
}

#[test]
fn the_flag_address_spelled_differently_gets_credentials() {
    let t = on_post(
        &pull_only(),
        &post(true, val("http://PyroScope:4040/"), None),
        &startup(true),
        false,
        t0(),
    )
    .unwrap();
    assert!(starts(&t)[0].basic_auth.is_some());
    assert!(!t.log.contains("withheld"));
}

#[test]
fn no_credentials_means_nothing_to_withhold() {
    let t = on_post(
        &pull_only(),
        &post(true, val(OTHER), None),
        &startup(false),
        false,
        t0(),
    )
    .unwrap();
    assert!(!t.log.contains("withheld"));
}

#[test]
fn refusals_name_the_field() {
    let s = pushing(FLAG);
    let e = on_post(
        &s,
        &post(false, val(OTHER), None),
        &startup(true),
        false,
        t0(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("server_address") && e.contains("enabled:false"),
        "{e}"
    );
    let e = on_post(
        &s,
        &post(false, AddressField::Empty, None),
        &startup(true),
        false,
        t0(),
    )
    .unwrap_err();
    assert_eq!(e, PostRefusal::AddressWhileDisabling);
    assert!(e.to_string().contains("server_address"), "{e}");
    let e = on_post(
        &s,
        &post(true, val("ftp://x"), None),
        &startup(true),
        false,
        t0(),
    )
    .unwrap_err();
    assert!(matches!(e, PostRefusal::Address(_)), "{e}");
    assert!(e.to_string().starts_with("server_address: "), "{e}");
}

#[test]
fn duration_schedules_a_revert_to_the_previous_value() {
    let d = Duration::from_millis(300);
    let t = on_post(
        &GateState::default(),
        &post(true, AddressField::Empty, Some(d)),
        &startup(true),
        false,
        t0(),
    )
    .unwrap();
    let r = t.state.revert.clone().unwrap();
    assert_eq!(r.at, t0().wall + d);
    assert_eq!(r.due, t0().mono + d);
    assert_eq!(r.to, GateValue::default());
    assert!(
        t.log
            .contains("reverts at 2027-01-15T08:00:00.300Z to closed"),
        "{}",
        t.log
    );
    assert_eq!(
        on_revert_due(
            &t.state,
            &startup(true),
            false,
            t0().mono + Duration::from_millis(299)
        ),
        None
    );
    let back = on_revert_due(&t.state, &startup(true), false, t0().mono + d).unwrap();
    assert_eq!(back.state, GateState::default());
    assert!(back.actions.is_empty());
    assert_eq!(
        back.log,
        "[profiling] duration elapsed, reverted: gate closed"
    );
}

#[test]
fn revert_restores_a_push_and_stops_the_temporary_one() {
    let t = on_post(
        &pushing(FLAG),
        &post(true, val(OTHER), Some(Duration::from_secs(1))),
        &startup(true),
        false,
        t0(),
    )
    .unwrap();
    let back = on_revert_due(
        &t.state,
        &startup(true),
        false,
        t0().mono + Duration::from_secs(2),
    )
    .unwrap();
    assert_eq!(back.actions[0], Action::StopPush);
    assert_eq!(starts(&back)[0].address, FLAG);
    assert!(starts(&back)[0].basic_auth.is_some());
    assert_eq!(back.state, pushing(FLAG));
}

#[test]
fn a_later_post_cancels_a_pending_revert() {
    let t = on_post(
        &GateState::default(),
        &post(true, AddressField::Empty, Some(Duration::from_secs(60))),
        &startup(false),
        false,
        t0(),
    )
    .unwrap();
    let t2 = on_post(
        &t.state,
        &post(true, AddressField::Empty, None),
        &startup(false),
        false,
        t0(),
    )
    .unwrap();
    assert_eq!(t2.state.revert, None);
    assert!(t2.log.contains("pending revert cancelled"), "{}", t2.log);
    assert_eq!(
        on_revert_due(
            &t2.state,
            &startup(false),
            false,
            t0().mono + Duration::from_secs(3600)
        ),
        None
    );
    // A later POST with its own duration reverts to the value before *it*, not the original.
    let t3 = on_post(
        &t.state,
        &post(false, AddressField::Omitted, Some(Duration::from_secs(5))),
        &startup(false),
        false,
        t0(),
    )
    .unwrap();
    assert_eq!(t3.state.revert.unwrap().to, pull_only().value);
}

#[test]
fn adhoc_env_refuses_a_runtime_push_but_keeps_the_gate_open() {
    let t = on_post(
        &GateState::default(),
        &post(true, val(OTHER), None),
        &startup(false),
        true,
        t0(),
    )
    .unwrap();
    assert!(t.actions.is_empty());
    assert!(t.state.value.enabled && !t.state.pushing);
    let msg = t.failure.unwrap().to_string();
    assert!(msg.contains(ADHOC_ENV));
    assert_eq!(t.state.last_error.as_deref(), Some(msg.as_str()));
    assert!(t.log.contains(ADHOC_ENV));
    // Pull-only needs no push, so the variable does not matter.
    let p = on_post(
        &GateState::default(),
        &post(true, AddressField::Empty, None),
        &startup(false),
        true,
        t0(),
    )
    .unwrap();
    assert_eq!(p.failure, None);
}

#[test]
fn startup_and_shutdown() {
    let t = on_startup(&startup(true), false);
    assert_eq!(t.state, pushing(FLAG));
    assert!(starts(&t)[0].basic_auth.is_some());
    assert!(t
        .log
        .starts_with("[profiling] startup: gate open, pushing to http://pyroscope:4040"));
    let none = on_startup(&startup(false), false);
    assert_eq!(none.state, GateState::default());
    assert!(none.actions.is_empty());
    let down = on_shutdown(&t.state, &startup(true));
    assert_eq!(down.actions, vec![Action::StopPush]);
    assert_eq!(down.state, GateState::default());
}

#[test]
fn exhaustive_sweep_holds_the_invariants() {
    let failed = GateState {
        value: GateValue {
            enabled: true,
            push_address: Some(OTHER.to_string()),
        },
        pushing: false,
        last_error: Some("x".to_string()),
        revert: None,
    };
    let reverting = GateState {
        revert: Some(Revert {
            at: t0().wall,
            due: t0().mono,
            to: GateValue::default(),
        }),
        ..pushing(OTHER)
    };
    let states = [
        GateState::default(),
        pull_only(),
        pushing(FLAG),
        pushing(OTHER),
        failed,
        reverting,
    ];
    let addrs = [
        AddressField::Omitted,
        AddressField::Empty,
        val(FLAG),
        val("http://PYROSCOPE:4040/"),
        val(OTHER),
        val("nope"),
    ];
    let mut checked = 0;
    for state in &states {
        for enabled in [false, true] {
            for addr in &addrs {
                for duration in [None, Some(Duration::from_secs(30))] {
                    for flag in [false, true] {
                        for adhoc in [false, true] {
                            let req = post(enabled, addr.clone(), duration);
                            let st = startup(flag);
                            let r = on_post(state, &req, &st, adhoc, t0());
                            let should_refuse = (!enabled && *addr != AddressField::Omitted)
                                || (enabled && *addr == val("nope"));
                            assert_eq!(r.is_err(), should_refuse, "{state:?} {req:?}");
                            let Ok(t) = r else { continue };
                            checked += 1;
                            let ctx = format!("{state:?} {req:?} flag={flag} adhoc={adhoc}: {t:?}");
                            assert_eq!(t.state.value.enabled, enabled, "{ctx}");
                            assert!(
                                t.log.starts_with("[profiling] ") && !t.log.contains('\n'),
                                "{ctx}"
                            );
                            assert!(
                                !t.log.contains("secret") && !t.log.contains("tenant-1"),
                                "{ctx}"
                            );
                            if t.state.pushing {
                                assert!(enabled && t.state.value.push_address.is_some(), "{ctx}");
                            }
                            if !enabled {
                                assert_eq!(t.state.value.push_address, None, "{ctx}");
                            }
                            let old = state
                                .pushing
                                .then(|| state.value.push_address.clone().unwrap());
                            let new = t.state.value.push_address.clone().filter(|_| enabled);
                            let kept =
                                matches!((&old, &new), (Some(o), Some(n)) if address::same(o, n));
                            assert_eq!(stops(&t), usize::from(old.is_some() && !kept), "{ctx}");
                            let s = starts(&t);
                            let want_start = new.is_some() && !kept && !adhoc;
                            assert_eq!(s.len(), usize::from(want_start), "{ctx}");
                            if let Some(p) = s.first() {
                                let bound = flag && address::same(&p.address, FLAG);
                                assert_eq!(p.basic_auth.is_some(), bound, "{ctx}");
                                assert_eq!(p.tenant.is_some(), bound, "{ctx}");
                                assert_eq!(
                                    t.log.contains("credentials withheld"),
                                    flag && !bound,
                                    "{ctx}"
                                );
                                assert!(t.state.pushing, "{ctx}");
                            }
                            assert_eq!(
                                t.failure.is_some(),
                                new.is_some() && !kept && adhoc,
                                "{ctx}"
                            );
                            match duration {
                                Some(d) => assert_eq!(
                                    t.state.revert,
                                    Some(Revert {
                                        at: t0().wall + d,
                                        due: t0().mono + d,
                                        to: state.value.clone()
                                    }),
                                    "{ctx}"
                                ),
                                None => assert_eq!(t.state.revert, None, "{ctx}"),
                            }
                            if let Some(start_at) = t
                                .actions
                                .iter()
                                .position(|a| matches!(a, Action::StartPush(_)))
                            {
                                // StopPush, when present, always comes first.
                                assert!(
                                    t.actions[..start_at].iter().all(|a| *a == Action::StopPush),
                                    "{ctx}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(checked, 288, "every accepted combination was checked");
}

#[test]
fn a_revert_falls_due_on_the_monotonic_clock_whatever_the_wall_clock_says() {
    // The wall clock read at the POST only dates the revert; the monotonic deadline decides. A wall clock
    // stepped back an hour (or forward a day) after the POST therefore neither delays nor hastens it: the
    // state machine is never even told the wall time when asked whether the revert is due.
    let d = Duration::from_secs(60);
    let stepped_back = Now {
        wall: t0().wall - Duration::from_secs(3600),
        mono: t0().mono,
    };
    let t = on_post(
        &GateState::default(),
        &post(true, AddressField::Empty, Some(d)),
        &startup(false),
        false,
        stepped_back,
    )
    .unwrap();
    let r = t.state.revert.clone().unwrap();
    assert_eq!(r.at, stepped_back.wall + d, "displayed from the wall clock");
    assert_eq!(r.due, t0().mono + d, "scheduled on the monotonic clock");
    let not_yet = t0().mono + d - Duration::from_millis(1);
    assert_eq!(
        on_revert_due(&t.state, &startup(false), false, not_yet),
        None
    );
    assert!(on_revert_due(&t.state, &startup(false), false, t0().mono + d).is_some());
}

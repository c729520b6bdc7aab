//! The serve command line as a Go user types it, checked on the real binary: bare booleans, `-listen
//! :PORT`, unknown flags echoed as typed, "did you mean" for a mistyped subcommand, counted nouns, the
//! descriptor limit named at boot, and the startup line for an API reachable beyond loopback.
use crate::common;

use common::boot;
use std::time::Duration;

fn stderr_of(args: &[&str]) -> (i32, String) {
    let out = boot().args(args).run();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn refusals_echo_what_was_typed() {
    let (code, err) = stderr_of(&["-bogus"]);
    assert_eq!(code, 2);
    assert_eq!(
        err.trim(),
        "nl6: flag provided but not defined: -bogus (see nl6 -h)"
    );
    let (code, err) = stderr_of(&["colect", "-targets", "t"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown command \"colect\": did you mean collect?"),
        "{err}"
    );
    let (_, err) = stderr_of(&["collect", "-bogus"]);
    assert!(
        err.contains("flag provided but not defined: -bogus"),
        "{err}"
    );
    assert!(!err.contains("--bogus"), "{err}");
    let (_, err) = stderr_of(&["report", "-bogus", "x.pb.gz"]);
    assert!(
        err.contains("flag provided but not defined: -bogus"),
        "{err}"
    );
    let (code, err) = stderr_of(&["-trap-inform=yes"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False"),
        "{err}"
    );
}

#[test]
fn a_bare_boolean_is_true_and_one_device_is_singular() {
    // An INFORM target that never answers: INFORM mode shows as its two threads.
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = sink.local_addr().unwrap().to_string();
    let n = boot()
        .args(&["-devices", "1", "-trap-target", &target, "-trap-inform"])
        .start();
    let line = n.log_lines("nl6 listening on ").remove(0);
    assert!(line.ends_with("; 1 simulated device"), "{line}");
    let (status, _, body) = n.http("GET", "/api/v1/devices", b"");
    assert_eq!(status, 200);
    assert!(common::json(&body)["data"].as_array().unwrap().len() == 1);
    let tasks = std::fs::read_dir(format!("/proc/{}/task", n.pid())).unwrap();
    let names: Vec<String> = tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .collect();
    assert!(
        names.iter().any(|c| c.starts_with("trap-inform-re")),
        "bare -trap-inform must turn INFORM mode on: {names:?}"
    );
}

#[test]
fn listen_with_an_empty_host_binds_every_interface_and_says_who_can_reach_it() {
    let n = boot().args(&["-listen", ":0", "-devices", "0"]).start();
    let line = n.log_lines("nl6 listening on ").remove(0);
    assert!(line.starts_with("nl6 listening on 0.0.0.0:"), "{line}");
    assert!(line.ends_with("; 0 simulated devices"), "{line}");
    assert!(
        n.wait_for_log("reachable beyond loopback", Duration::from_secs(5)),
        "{}",
        n.stderr()
    );
    let warning = n.log_lines("nl6: warning: the REST API on 0.0.0.0:");
    assert_eq!(warning.len(), 1, "{}", n.stderr());
    assert!(
        warning[0]
            .contains("anyone who can reach it can open the profiling gate and redirect the push")
            && warning[0].contains("SECURITY.md"),
        "{}",
        warning[0]
    );
    let local = boot().args(&["-devices", "0"]).start();
    assert!(
        local.log_lines("nl6: warning: the REST API").is_empty(),
        "loopback only: no warning: {}",
        local.stderr()
    );
}

#[test]
fn running_out_of_descriptors_at_boot_names_the_limit_and_the_need() {
    let out = boot()
        .nofile(64)
        .args(&[
            "-listen",
            "127.0.0.1:0",
            "-snmp-port",
            "0",
            "-devices",
            "200",
        ])
        .run_within(Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the open-file limit is 64"), "{err}");
    assert!(
        err.contains("200 devices need about 264 file descriptors"),
        "{err}"
    );
    assert!(
        err.contains("ulimit -n 264") && err.contains("LimitNOFILE=264"),
        "{err}"
    );
    assert!(
        !err.contains("-snmp-port 0"),
        "the port is not the problem: {err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// `nl6 report -svg -d.svg` writes `-d.svg`, as Go's flag package and `nl6 -profiling-pyroscope-tenant
/// -x` take a dash-led value, not `--d.svg`.
#[test]
fn report_takes_a_dash_led_value_as_typed() {
    let n = boot().args(&["-devices", "0"]).start();
    n.open_pull_only();
    let (status, _, profile) = n.http("GET", "/debug/pprof/heap", b"");
    assert_eq!(status, 200);
    let dir = std::env::temp_dir().join(format!("nl6-flags-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("heap.pb.gz"), &profile).unwrap();
    let out = std::process::Command::new(common::BIN)
        .args(["report", "-svg", "-d.svg", "heap.pb.gz"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.join("-d.svg").is_file(), "no -d.svg");
    assert!(!dir.join("--d.svg").exists(), "the value was rewritten");
    std::fs::remove_dir_all(&dir).unwrap();
}

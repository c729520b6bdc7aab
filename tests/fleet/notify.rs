//! Traps and INFORMs received by Debian's snmptrapd (which acknowledges INFORMs), plus INFORM retries
//! against a target that never answers.
use crate::common;
use crate::fleet_common;

use common::wait_for;
use fleet_common::{free_udp_port, Guard};
use nl6::lab::{Fleet, FleetConfig};
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// snmptrapd in the foreground on a free loopback port, its log lines collected.
struct TrapReceiver {
    _child: Guard,
    addr: SocketAddr,
    log: Arc<Mutex<String>>,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl TrapReceiver {
    fn start() -> TrapReceiver {
        let dir = std::env::temp_dir().join(format!(
            "nl6-trapd-{}-{}",
            std::process::id(),
            free_udp_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("snmptrapd.conf");
        std::fs::write(
            &conf,
            "disableAuthorization yes\nauthCommunity log,execute,net public\n",
        )
        .unwrap();
        let port = free_udp_port();
        let mut child = Command::new("snmptrapd")
            .args([
                "-f",
                "-Lo",
                "-C",
                "-c",
                conf.to_str().unwrap(),
                "-On",
                &format!("udp:127.0.0.1:{port}"),
            ])
            .env("SNMP_PERSISTENT_DIR", &dir)
            .env("MIBS", "")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("snmptrapd must be installed (Debian package snmptrapd)");
        let log = Arc::new(Mutex::new(String::new()));
        let (out, l2) = (child.stdout.take().unwrap(), log.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let mut g = l2.lock().unwrap();
                g.push_str(&line);
                g.push('\n');
            }
        });
        let r = TrapReceiver {
            _child: Guard(child),
            addr: format!("127.0.0.1:{port}").parse().unwrap(),
            log,
            _dir: TempDir(dir),
        };
        wait_for("snmptrapd to start", 10, || {
            r.text().contains("NET-SNMP version")
        });
        r
    }
    fn text(&self) -> String {
        self.log.lock().unwrap().clone()
    }
    fn count(&self, needle: &str) -> usize {
        self.text().matches(needle).count()
    }
}

const LINK_DOWN: &str = "OID: .1.3.6.1.6.3.1.1.5.3";
const LINK_UP: &str = "OID: .1.3.6.1.6.3.1.1.5.4";

#[test]
fn snmptrapd_receives_link_traps() {
    let rx = TrapReceiver::start();
    let f = Fleet::start(
        FleetConfig::default()
            .with_devices(2)
            .with_snmp_port(0)
            .with_trap_target(Some(rx.addr), Duration::from_secs(3600)),
    )
    .unwrap();
    assert!(f.set_link(1, 3, false));
    wait_for("linkDown at snmptrapd", 5, || rx.count(LINK_DOWN) == 1);
    assert!(f.set_link(1, 3, true));
    wait_for("linkUp at snmptrapd", 5, || rx.count(LINK_UP) == 1);
    let log = rx.text();
    assert!(
        log.contains(".1.3.6.1.2.1.2.2.1.8.3 = INTEGER: 2"),
        "ifOperStatus.3 down: {log}"
    );
    assert!(
        log.contains("STRING: \"nl6-dev-0001\""),
        "sysName identifies the device: {log}"
    );
    assert_eq!(
        f.devices()[1].counters.traps_sent.load(Ordering::Relaxed),
        2
    );
}

#[test]
fn snmptrapd_acknowledges_informs() {
    let rx = TrapReceiver::start();
    let cfg = FleetConfig::default()
        .with_devices(1)
        .with_snmp_port(0)
        .with_trap_target(Some(rx.addr), Duration::from_secs(3600))
        .with_inform(true, Duration::from_secs(1), 2);
    let f = Fleet::start(cfg).unwrap();
    assert!(f.set_link(0, 1, false));
    assert!(f.set_link(0, 1, true));
    let c = &f.devices()[0].counters;
    wait_for("two INFORM acks", 5, || {
        c.informs_acked.load(Ordering::Relaxed) == 2
    });
    assert_eq!(f.informs_pending(), 0);
    assert_eq!(c.informs_failed.load(Ordering::Relaxed), 0);
    // snmptrapd acknowledges before its log line reaches our pipe: wait for the log, bounded.
    wait_for("both INFORMs in snmptrapd's log", 5, || {
        rx.count(LINK_DOWN) + rx.count(LINK_UP) == 2
    });
}

#[test]
fn periodic_link_toggles_reach_snmptrapd() {
    let rx = TrapReceiver::start();
    let f = Fleet::start(
        FleetConfig::default()
            .with_devices(2)
            .with_snmp_port(0)
            .with_trap_target(Some(rx.addr), Duration::from_millis(200)),
    )
    .unwrap();
    wait_for("a linkDown and a linkUp from both devices", 10, || {
        let t = rx.text();
        t.matches(LINK_DOWN).count() >= 2
            && t.matches(LINK_UP).count() >= 2
            && t.contains("nl6-dev-0000")
            && t.contains("nl6-dev-0001")
    });
    drop(f);
}

#[test]
fn unanswered_informs_are_retried_then_counted_failed() {
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let cfg = FleetConfig::default()
        .with_devices(1)
        .with_snmp_port(0)
        .with_trap_target(
            Some(silent.local_addr().unwrap()),
            Duration::from_secs(3600),
        )
        .with_inform(true, Duration::from_millis(100), 2);
    let f = Fleet::start(cfg).unwrap();
    assert!(f.set_link(0, 2, false));
    let mut buf = [0u8; 1500];
    for attempt in 0..3 {
        let n = silent
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("INFORM attempt {attempt}: {e}"));
        let m = nl6::lab::snmp::Message::decode(&buf[..n]).unwrap();
        assert_eq!(m.pdu_type, nl6::lab::snmp::pdu::INFORM, "attempt {attempt}");
    }
    let c = &f.devices()[0].counters;
    wait_for("the INFORM to fail", 5, || {
        c.informs_failed.load(Ordering::Relaxed) == 1
    });
    assert_eq!(f.informs_pending(), 0);
    silent
        .set_read_timeout(Some(Duration::from_millis(400)))
        .unwrap();
    assert!(
        silent.recv(&mut buf).is_err(),
        "no fourth attempt after 2 retries"
    );
}

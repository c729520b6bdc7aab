//! The good dial-out collector (`collector.py`, grpcio's generic handler) run from a test: what it
//! received, per device and subscription name, and the device counters its tests compare with.
use crate::common::Nl6;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A running collector and what it received, per device.
pub struct Collector {
    child: Child,
    pub port: u16,
    pub seen: Arc<Mutex<BTreeMap<String, u64>>>,
    pub names: Arc<Mutex<Vec<String>>>,
    rpcs: Arc<AtomicU64>,
}

impl Collector {
    /// Serves on 127.0.0.1:`port` (0: an ephemeral port).
    pub fn start(port: u16) -> Collector {
        Collector::start_mode(port, "ok")
    }
    /// Serves on 127.0.0.1:`port` in `mode` (`collector.py` lists them: ok, unavailable, huge).
    pub fn start_mode(port: u16, mode: &str) -> Collector {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/gnmi_support/collector.py"
        );
        let mut child = Command::new("python3")
            .args([script, &port.to_string(), mode])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 with grpcio (scripts/setup.sh)");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("the collector's port line").unwrap();
        let port = first
            .strip_prefix("port ")
            .unwrap_or_else(|| panic!("{first}"))
            .parse()
            .unwrap();
        let (seen, names) = (
            Arc::new(Mutex::new(BTreeMap::new())),
            Arc::new(Mutex::new(Vec::new())),
        );
        let rpcs = Arc::new(AtomicU64::new(0));
        let (s, n, r) = (seen.clone(), names.clone(), rpcs.clone());
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let v: Value = serde_json::from_str(&line).unwrap();
                if v.get("rpc").is_some() {
                    r.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                *s.lock()
                    .unwrap()
                    .entry(v["target"].as_str().unwrap().to_string())
                    .or_insert(0) += 1;
                let name = v["subscription"].as_str().unwrap().to_string();
                let mut n = n.lock().unwrap();
                if !n.contains(&name) {
                    n.push(name);
                }
            }
        });
        Collector {
            child,
            port,
            seen,
            names,
            rpcs,
        }
    }
    /// Publish streams opened so far.
    pub fn rpcs(&self) -> u64 {
        self.rpcs.load(Ordering::Relaxed)
    }
    /// Notifications received from `device`.
    pub fn count(&self, device: &str) -> u64 {
        self.seen.lock().unwrap().get(device).copied().unwrap_or(0)
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Device `i`'s name.
pub fn name(i: usize) -> String {
    format!("nl6-dev-{i:04}")
}

/// Device `i`'s `(dialout_sent, dialout_dropped, dialout_reconnects)`.
pub fn counters(nl6: &Nl6, i: usize) -> (u64, u64, u64) {
    let c = super::device(nl6, i)["counters"].clone();
    let g = |k: &str| c[k].as_u64().unwrap_or_else(|| panic!("{k} in {c}"));
    (
        g("dialout_sent"),
        g("dialout_dropped"),
        g("dialout_reconnects"),
    )
}

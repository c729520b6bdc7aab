//! CPU-profile read-back of a funnel's label under load: a thread born `scenario` keeps the syslog fire
//! funnel busy; every CPU sample taken inside the funnel carries `syslog`, the rest of that thread's samples
//! carry `scenario` (the nesting rule, seen by the sampler itself).
use nl6::lab::device::Device;
use nl6::lab::syslog::{SyslogExporter, SEVERITY_INFO};
use nl6::labels::Subsystem;
use nl6_profile::symbols::symbolize;
use std::net::UdpSocket;
use std::time::{Duration, Instant, SystemTime};

#[test]
fn cpu_samples_inside_the_syslog_funnel_are_labelled_syslog() {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_nonblocking(true).unwrap();
    let exporter = SyslogExporter::udp(
        UdpSocket::bind("127.0.0.1:0").unwrap(),
        sink.local_addr().unwrap(),
    );
    let session = nl6_profile::cpu::start(500).expect("CPU profiler");
    let h = nl6_profile::threads::spawn_labelled(Subsystem::SCENARIO, "busy-scenario", move || {
        let d = Device::new(0, Instant::now());
        let end = Instant::now() + Duration::from_millis(1500);
        let mut buf = [0u8; 2048];
        while Instant::now() < end {
            exporter.fire(
                &d,
                SEVERITY_INFO,
                "LOAD",
                "keeping the funnel busy",
                SystemTime::now(),
            );
            while sink.recv(&mut buf).is_ok() {}
        }
    })
    .unwrap();
    h.join().unwrap();
    let profile = session.stop();
    let (mut inside, mut wrong) = (0u64, Vec::new());
    for s in &profile.samples {
        let names: Vec<String> = s
            .stack
            .iter()
            .filter_map(|a| symbolize(a.saturating_sub(1)))
            .collect();
        if names
            .iter()
            .any(|n| n.contains("SyslogExporter::fire_unscoped"))
        {
            inside += s.count;
            if s.label != Subsystem::SYSLOG.index() {
                wrong.push((Subsystem::name_of(s.label), names));
            }
        }
    }
    assert!(
        inside >= 5,
        "the funnel was sampled ({inside} samples of {} total)",
        profile.samples.len()
    );
    assert!(
        wrong.is_empty(),
        "samples inside the funnel without `syslog`: {wrong:#?}"
    );
    let outer: u64 = profile
        .samples
        .iter()
        .filter(|s| s.label == Subsystem::SCENARIO.index())
        .map(|s| s.count)
        .sum();
    assert!(
        outer > 0,
        "the busy thread's work outside the funnel carries `scenario`"
    );
}

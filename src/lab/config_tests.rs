//! Tests of [`super`]: the flag table against the defaults, parsing errors that name the flag, the
//! cross-field checks of `validate` and the exposure warning.
use super::*;

#[test]
fn flag_table_matches_defaults_and_setter() {
    let d = FleetConfig::default();
    let values = d.flag_values();
    assert_eq!(
        values.len(),
        FLAGS.len(),
        "every flag has a value and vice versa"
    );
    let mut names: Vec<_> = FLAGS.iter().map(|f| f.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), FLAGS.len(), "no duplicate flag");
    for (f, (name, value)) in FLAGS.iter().zip(&values) {
        assert_eq!(f.name, *name);
        assert_eq!(f.default, value, "documented default of -{name}");
        let mut c = FleetConfig::default();
        c.set(f.name, f.default)
            .unwrap_or_else(|e| panic!("default of -{name} must parse: {e}"));
        assert_eq!(c, d);
    }
}

#[test]
fn devices_beyond_loopback_with_the_default_community_are_warned_about() {
    let any: IpAddr = "0.0.0.0".parse().unwrap();
    let warning = FleetConfig::default().with_bind(any).exposure_warning();
    let w = warning.expect("a warning");
    assert!(
        w.contains("beyond loopback (0.0.0.0)") && w.contains("-snmp-community"),
        "{w}"
    );
    let quiet = [
        FleetConfig::default(),
        FleetConfig::default().with_bind("::1".parse().unwrap()),
        FleetConfig::default()
            .with_bind(any)
            .with_snmp_community("s3cret"),
        FleetConfig::default().with_bind(any).with_devices(0),
    ];
    for c in quiet {
        assert_eq!(c.exposure_warning(), None, "{c:?}");
    }
    let lan = FleetConfig::default().with_device_net(DeviceNet::parse("10.9.0.0/16").ok());
    let w = lan.exposure_warning().expect("a warning");
    assert!(
        w.contains("-device-net 10.9.0.0/16") && w.contains("127.1.0.0/16"),
        "{w}"
    );
    assert!(!w.contains("-bind 127.0.0.1"), "{w}");
}

#[test]
fn values_parse_and_errors_name_the_flag() {
    let mut c = FleetConfig::default();
    c.set("-devices", "1000").unwrap();
    c.set("snmp-port", "0").unwrap();
    c.set("trap-target", "127.0.0.1:16200").unwrap();
    c.set("syslog-target", "tcp://127.0.0.1:6514").unwrap();
    c.set("flow-interval", "1m30s").unwrap();
    c.set("snmp-io", "epoll").unwrap();
    assert_eq!(c.snmp_io(), SnmpIo::Epoll);
    assert_eq!(c.devices(), 1000);
    assert_eq!(c.syslog_target().unwrap().0, Transport::Tcp);
    assert_eq!(c.flow_interval(), Duration::from_secs(90));
    for (flag, value, needle) in [
        ("devices", "many", "-devices: invalid number"),
        ("snmp-port", "70000", "-snmp-port: port 70000"),
        ("bind", "localhost", "-bind: invalid IP"),
        ("trap-interval", "0s", "-trap-interval: duration"),
        (
            "syslog-target",
            "http://x:1",
            "-syslog-target: invalid syslog target",
        ),
        ("flow-target", "nope", "-flow-target:"),
        ("trap-inform", "maybe", "-trap-inform: invalid boolean"),
        (
            "snmp-io",
            "io_uring",
            "-snmp-io: invalid mode \"io_uring\": give auto",
        ),
        (
            "traffic",
            "100us",
            "-traffic: period \"100us\" is below 1ms",
        ),
        ("traffic", "0s", "-traffic: duration"),
        ("gnmi-portt", "1", "-gnmi-portt: unknown fleet flag"),
        ("gnmi-port", "70000", "-gnmi-port: invalid port"),
        ("gnmi-dialout", "nope", "-gnmi-dialout:"),
        (
            "gnmi-dialout-paths",
            "/a[b",
            "-gnmi-dialout-paths: path \"/a[b\"",
        ),
        (
            "gnmi-dialout-queue",
            "0",
            "-gnmi-dialout-queue: want a queue bound",
        ),
        (
            "gnmi-dialout-interval",
            "1ms",
            "-gnmi-dialout-interval: interval",
        ),
    ] {
        let e = FleetConfig::default()
            .set(flag, value)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(needle), "{flag}={value}: {e}");
    }
    let e = FleetConfig::default()
        .with_devices(100)
        .with_snmp_port(65500)
        .validate()
        .unwrap_err()
        .to_string();
    assert!(e.contains("65599"), "{e}");
    assert!(FleetConfig::default()
        .with_devices(0)
        .with_snmp_port(65535)
        .validate()
        .is_ok());
    for (flag, value, needle) in [
        (
            "gnmi-tls-cert",
            "c.pem",
            "-gnmi-tls-cert needs -gnmi-tls-key",
        ),
        (
            "gnmi-username",
            "u",
            "-gnmi-username and -gnmi-password go together",
        ),
    ] {
        let mut c = FleetConfig::default();
        c.set(flag, value).unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.starts_with(needle), "{flag}: {e}");
    }
    let e = FleetConfig::default()
        .with_devices(u32::MAX as usize + 1)
        .validate()
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("-devices 4294967296: at most 4294967295"),
        "{e}"
    );
    let mut c = FleetConfig::default().with_devices(100);
    c.set("gnmi-port", "65500").unwrap();
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("-gnmi-port 65500"));
    let mut c = FleetConfig::default();
    c.set("device-net", "127.1.0.0/16").unwrap();
    c.set("syslog-target", "udp://10.0.0.5:514").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.starts_with("-syslog-target 10.0.0.5:514"), "{e}");
}

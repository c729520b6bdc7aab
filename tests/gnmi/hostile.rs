//! The gNMI target against hostile peers: a path of many wildcards, a Get of thousands of paths, a
//! subscription list of thousands of entries, refusals that would echo a huge request, a Set toggling
//! one leaf thousands of times, HTTP/2 settings, and connections that never finish their handshake.
//! Each check is bounded in time; the client is nl6's own tonic client (it sends what pygnmi will not).
use crate::common;
use crate::gnmi_support;

use gnmi_support::stream::{client, path, runtime};
use gnmi_support::{boot, gnmi_addr};
use nl6::lab::gnmi::proto::gnmi::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use tokio_stream::StreamExt;

/// The CPU time (user + system) of `pid`'s thread named `name`, from `/proc`.
fn thread_cpu(pid: u32, name: &str) -> Duration {
    let mut ticks = 0u64;
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = rest.split_whitespace().collect();
        ticks += f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        ticks += f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    Duration::from_millis(ticks * 10) // USER_HZ is 100 on Linux
}

fn rss_kb(pid: u32) -> u64 {
    common::status_field(pid, "VmRSS:")
}

fn get_of(paths: Vec<Path>) -> GetRequest {
    GetRequest {
        path: paths,
        encoding: Encoding::Proto as i32,
        ..GetRequest::default()
    }
}

/// One Get against `at` bounded by `limit`: its answer, or the refusal (a timeout as DEADLINE_EXCEEDED).
fn get(at: SocketAddr, req: GetRequest, limit: Duration) -> Result<GetResponse, tonic::Status> {
    runtime().block_on(async move {
        let mut c = client(at).await;
        match tokio::time::timeout(limit, c.get(req)).await {
            Ok(r) => r.map(|r| r.into_inner()),
            Err(_) => Err(tonic::Status::deadline_exceeded(
                "the test's client gave up",
            )),
        }
    })
}

fn counter(nl6: &common::Nl6, i: usize, name: &str) -> u64 {
    gnmi_support::device(nl6, i)["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name}"))
}

#[test]
fn a_path_of_many_wildcards_costs_little_and_stalls_no_other_device() {
    let nl6 = boot(2, &[]);
    let (a, b) = (gnmi_addr(&nl6, 0), gnmi_addr(&nl6, 1));
    let cpu0 = thread_cpu(nl6.pid(), "gnmi");
    // 70 `...` then a name no leaf has: every split of the leaf among the wildcards is a dead end.
    let mut names = vec!["..."; 70];
    names.push("nothing-here");
    let hostile =
        std::thread::spawn(move || get(a, get_of(vec![path(&names)]), Duration::from_secs(1)));
    std::thread::sleep(Duration::from_millis(100));
    // Meanwhile another device's Gets must be answered, each within a second.
    let end = Instant::now() + Duration::from_secs(2);
    let (mut ok, mut failed) = (0, Vec::new());
    while Instant::now() < end && ok + failed.len() < 20 {
        let req = get_of(vec![path(&["system", "state", "hostname"])]);
        match get(b, req, Duration::from_secs(1)) {
            Ok(_) => ok += 1,
            Err(e) => failed.push(e.code()),
        }
    }
    let refused = hostile.join().unwrap().expect_err("no data at that path");
    let cpu = thread_cpu(nl6.pid(), "gnmi").saturating_sub(cpu0);
    eprintln!("gnmi thread CPU over the run: {cpu:?}; other device: {ok} answered, {failed:?}");
    assert!(
        failed.is_empty() && ok > 0,
        "{ok} answered, failed {failed:?}"
    );
    assert!(
        matches!(
            refused.code(),
            tonic::Code::InvalidArgument | tonic::Code::NotFound
        ),
        "{refused:?}"
    );
    assert!(cpu < Duration::from_millis(500), "gnmi thread CPU {cpu:?}");
    // Within the element limit the matcher still answers at once.
    let mut names = vec!["..."; 30];
    names.push("nothing-here");
    let t = Instant::now();
    let r = get(a, get_of(vec![path(&names)]), Duration::from_secs(1)).unwrap_err();
    assert_eq!(
        r.code(),
        tonic::Code::NotFound,
        "{r:?} after {:?}",
        t.elapsed()
    );
}

#[test]
fn thousands_of_empty_paths_or_subscriptions_are_refused_with_little_memory() {
    let nl6 = boot(1, &[]);
    let at = gnmi_addr(&nl6, 0);
    let before = rss_kb(nl6.pid());
    let r = get(
        at,
        get_of(vec![Path::default(); 10_000]),
        Duration::from_secs(10),
    );
    let grown = rss_kb(nl6.pid()).saturating_sub(before);
    eprintln!("RSS growth for a Get of 10 000 empty paths: {grown} kB; {r:?}");
    let e = r.expect_err("over the path limit");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("256 paths"), "names the limit: {e:?}");
    assert!(grown < 32 * 1024, "RSS grew {grown} kB");
    // Within the path limit, an answer over the response limit is refused, not built whole.
    let e = get(
        at,
        get_of(vec![Path::default(); 256]),
        Duration::from_secs(10),
    )
    .unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("1 MiB"), "names the limit: {e:?}");
    let list = SubscriptionList {
        subscription: vec![Subscription::default(); 50_000],
        mode: subscription_list::Mode::Stream as i32,
        encoding: Encoding::Proto as i32,
        ..SubscriptionList::default()
    };
    let req = SubscribeRequest {
        request: Some(subscribe_request::Request::Subscribe(list)),
        extension: Vec::new(),
    };
    let before = rss_kb(nl6.pid());
    let r = runtime().block_on(async move {
        let mut c = client(at).await;
        let call = c.subscribe(tokio_stream::iter([req]));
        match tokio::time::timeout(Duration::from_secs(10), call).await {
            Ok(Ok(_)) => Err("accepted".to_string()),
            Ok(Err(e)) => Ok(e),
            Err(_) => Err("no answer in 10 s".to_string()),
        }
    });
    let grown = rss_kb(nl6.pid()).saturating_sub(before);
    let e = r.unwrap();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("256 subscriptions"), "{e:?}");
    assert!(grown < 32 * 1024, "RSS grew {grown} kB");
    assert!(
        counter(&nl6, 0, "gnmi_refused") >= 3,
        "refusals are counted"
    );
}

#[test]
fn refusals_are_short_and_escaped_whatever_the_request_held() {
    let nl6 = boot(1, &[]);
    let at = gnmi_addr(&nl6, 0);
    let long = format!("a\u{1}\n{}", "x".repeat(400_000));
    let e = get(
        at,
        get_of(vec![path(&["interfaces", &long])]),
        Duration::from_secs(10),
    )
    .unwrap_err();
    eprintln!(
        "refusal of a 400 000-byte name: {} bytes",
        e.message().len()
    );
    assert!(
        matches!(
            e.code(),
            tonic::Code::NotFound | tonic::Code::InvalidArgument
        ),
        "{}",
        e.code()
    );
    assert!(e.message().len() <= 1024, "{} bytes", e.message().len());
    assert!(
        !e.message().chars().any(char::is_control),
        "escaped: {:?}",
        e.message()
    );
    let mut p = path(&["interfaces", "interface", "config", "enabled"]);
    p.elem[1].key.insert("name".into(), "eth0".into());
    let value = TypedValue {
        value: Some(typed_value::Value::StringVal("v".repeat(3 << 20))),
    };
    let set = SetRequest {
        update: vec![Update {
            path: Some(p),
            val: Some(value),
            ..Update::default()
        }],
        ..SetRequest::default()
    };
    let e = runtime().block_on(async move { client(at).await.set(set).await.unwrap_err() });
    eprintln!("refusal of a 3 MiB value: {} bytes", e.message().len());
    assert!(
        matches!(
            e.code(),
            tonic::Code::InvalidArgument | tonic::Code::ResourceExhausted | tonic::Code::OutOfRange
        ),
        "{}",
        e.code()
    );
    assert!(e.message().len() <= 1024, "{} bytes", e.message().len());
}

/// The server's SETTINGS parameters, read from a raw HTTP/2 connection.
fn server_settings(at: SocketAddr) -> Vec<(u16, u32)> {
    let mut s = TcpStream::connect(at).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).unwrap(); // an empty SETTINGS
    let mut head = [0u8; 9];
    s.read_exact(&mut head).unwrap();
    assert_eq!(head[3], 4, "the server's first frame is SETTINGS");
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    body.chunks(6)
        .map(|c| {
            (
                u16::from_be_bytes([c[0], c[1]]),
                u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
            )
        })
        .collect()
}

#[test]
fn http2_settings_bound_streams_and_windows() {
    let nl6 = boot(1, &[]);
    let settings = server_settings(gnmi_addr(&nl6, 0));
    let streams = settings.iter().find(|(k, _)| *k == 3).map(|(_, v)| *v);
    assert!(
        streams.is_some_and(|n| (1..=128).contains(&n)),
        "MAX_CONCURRENT_STREAMS: {settings:?}"
    );
    let window = settings.iter().find(|(k, _)| *k == 4).map(|(_, v)| *v);
    assert!(
        window.is_some_and(|n| n <= 65_535),
        "INITIAL_WINDOW_SIZE: {settings:?}"
    );
}

#[test]
fn a_set_changes_each_leaf_once_and_a_huge_one_is_refused() {
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = sink.local_addr().unwrap().to_string();
    let syslog = format!("udp://{to}");
    let flags = [
        "-trap-target",
        &to,
        "-trap-interval",
        "1h",
        "-syslog-target",
        &syslog,
        "-syslog-interval",
        "1h",
    ];
    let nl6 = boot(1, &flags);
    let at = gnmi_addr(&nl6, 0);
    let toggles = |n: usize| {
        let mut p = path(&["interfaces", "interface", "config", "enabled"]);
        p.elem[1].key.insert("name".into(), "eth1".into());
        let update = (0..n)
            .map(|k| Update {
                path: Some(p.clone()),
                val: Some(TypedValue {
                    value: Some(typed_value::Value::BoolVal(k % 2 == 1)),
                }),
                ..Update::default()
            })
            .collect();
        SetRequest {
            update,
            ..SetRequest::default()
        }
    };
    let traps_before = counter(&nl6, 0, "traps_sent");
    let (traps, lines) = (traps_before, counter(&nl6, 0, "syslog_sent"));
    let r = runtime().block_on(async move { client(at).await.set(toggles(200)).await });
    let r = r.expect("200 updates are within the limit").into_inner();
    assert_eq!(r.response.len(), 200, "one result per update");
    std::thread::sleep(Duration::from_millis(300));
    let traps = counter(&nl6, 0, "traps_sent") - traps;
    let lines = counter(&nl6, 0, "syslog_sent") - lines;
    assert!(
        traps <= 1 && lines <= 1,
        "{traps} traps, {lines} syslog lines for one leaf"
    );
    let d = gnmi_support::device(&nl6, 0);
    assert_eq!(
        d["interfaces"][1]["admin_status"], "up",
        "the last update wins"
    );
    let e =
        runtime().block_on(async move { client(at).await.set(toggles(1_000)).await.unwrap_err() });
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("256 updates"), "{e:?}");
    // 20 000 toggles are 1.4 MB: over the request size limit, refused before decoding.
    let e =
        runtime().block_on(async move { client(at).await.set(toggles(20_000)).await.unwrap_err() });
    assert_eq!(e.code(), tonic::Code::OutOfRange, "{e:?}");
    assert_eq!(
        counter(&nl6, 0, "traps_sent"),
        traps_before + traps,
        "refused Sets change nothing"
    );
}

/// Whether the server closed `s` (end of stream or a reset) within `limit`.
fn closed_within(mut s: &TcpStream, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    let mut buf = [0u8; 4096];
    while Instant::now() < end {
        s.set_read_timeout(Some(
            end.saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        ))
        .unwrap();
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return true,
        }
    }
    false
}

#[test]
fn silent_and_half_handshaken_connections_are_closed_and_live_ones_kept() {
    let nl6 = boot(1, &[]);
    let at = gnmi_addr(&nl6, 0);
    let t0 = Instant::now();
    let silent: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(at).unwrap()).collect();
    let preface: Vec<TcpStream> = (0..10)
        .map(|_| {
            let mut s = TcpStream::connect(at).unwrap();
            s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
            s
        })
        .collect();
    // A live, idle stream: ON_CHANGE of oper-status on a quiet device sends nothing after its sync.
    let live = std::thread::spawn(move || {
        runtime().block_on(async move {
            let mut c = client(at).await;
            let mut p = path(&["interfaces", "interface", "state", "oper-status"]);
            p.elem[1].key.insert("name".into(), "eth0".into());
            let list = SubscriptionList {
                subscription: vec![Subscription {
                    path: Some(p),
                    mode: SubscriptionMode::OnChange as i32,
                    ..Subscription::default()
                }],
                mode: subscription_list::Mode::Stream as i32,
                encoding: Encoding::Proto as i32,
                ..SubscriptionList::default()
            };
            let req = SubscribeRequest {
                request: Some(subscribe_request::Request::Subscribe(list)),
                extension: Vec::new(),
            };
            let mut s = c
                .subscribe(tokio_stream::iter([req]).chain(tokio_stream::pending()))
                .await
                .unwrap()
                .into_inner();
            let end = Instant::now() + Duration::from_secs(11);
            loop {
                match tokio::time::timeout_at(end.into(), s.message()).await {
                    Err(_) => return Ok(()), // still open at the end
                    Ok(Ok(Some(_))) => {}
                    Ok(other) => return Err(format!("{other:?} after {:?}", t0.elapsed())),
                }
            }
        })
    });
    let limit = Duration::from_secs(12);
    let closed = silent
        .iter()
        .chain(preface.iter())
        .filter(|s| closed_within(s, limit.saturating_sub(t0.elapsed())))
        .count();
    eprintln!("{closed} of 20 closed after {:?}", t0.elapsed());
    assert_eq!(
        closed, 20,
        "silent and preface-only connections closed within {limit:?}"
    );
    live.join().unwrap().expect("a live idle stream stays open");
}

#[test]
fn half_a_tls_client_hello_is_closed() {
    let dir = std::env::temp_dir().join(format!("nl6-gnmi-hostile-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let out = crate::fleet_common::run(
        "openssl",
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=nl6-lab",
            "-keyout",
            key.to_str().unwrap(),
            "-out",
            cert.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let nl6 = boot(
        1,
        &[
            "-gnmi-tls-cert",
            cert.to_str().unwrap(),
            "-gnmi-tls-key",
            key.to_str().unwrap(),
        ],
    );
    let at = gnmi_addr(&nl6, 0);
    let t0 = Instant::now();
    // A TLS record header announcing a 512-byte ClientHello, then only its first 40 bytes.
    let mut half = vec![
        0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
    ];
    half.resize(45, 0x2a);
    let conns: Vec<TcpStream> = (0..10)
        .map(|_| {
            let mut s = TcpStream::connect(at).unwrap();
            s.write_all(&half).unwrap();
            s
        })
        .collect();
    let limit = Duration::from_secs(12);
    let closed = conns
        .iter()
        .filter(|s| closed_within(s, limit.saturating_sub(t0.elapsed())))
        .count();
    eprintln!(
        "{closed} of 10 half-handshaken TLS connections closed after {:?}",
        t0.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(closed, 10, "closed within {limit:?}");
}

#[test]
fn streams_past_the_connection_limit_wait_at_the_client() {
    let nl6 = boot(1, &[]);
    let at = gnmi_addr(&nl6, 0);
    let pid = nl6.pid();
    let before = rss_kb(pid);
    let (held, after) = runtime().block_on(async {
        // The client's windows at their smallest: the server may send almost nothing.
        let ch = tonic::transport::Endpoint::from_shared(format!("http://{at}"))
            .unwrap()
            .initial_stream_window_size(Some(1))
            .initial_connection_window_size(Some(65_535))
            .connect()
            .await
            .unwrap();
        let mut streams = Vec::new();
        for _ in 0..300 {
            let mut c = nl6::lab::gnmi::proto::gnmi::g_nmi_client::GNmiClient::new(ch.clone());
            let mut req = gnmi_support::stream::sample_request(Duration::from_millis(10));
            if let Some(subscribe_request::Request::Subscribe(l)) = &mut req.request {
                l.subscription[0].path = Some(Path::default()); // every leaf, every 10 ms
            }
            streams.push(tokio::spawn(async move {
                let reqs = tokio_stream::iter([req]).chain(tokio_stream::pending());
                let _unread = c.subscribe(reqs).await;
                std::future::pending::<()>().await // held, never read, until aborted
            }));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let held = (rss_kb(pid), counter(&nl6, 0, "gnmi_rpcs"));
        for s in &streams {
            s.abort();
        }
        drop(streams);
        drop(ch);
        tokio::time::sleep(Duration::from_secs(1)).await;
        (held, rss_kb(pid))
    });
    let (rss_held, rpcs) = held;
    let grown = rss_held.saturating_sub(before);
    let left = after.saturating_sub(before);
    eprintln!(
        "300 zero-window SAMPLE streams on one connection: {rpcs} reached the target; RSS +{grown} kB \
         held, +{left} kB after close"
    );
    assert!(rpcs <= 100, "{rpcs} RPCs past MAX_CONCURRENT_STREAMS");
    // About 1 MiB a stream is buffered for a client that reads nothing (hyper's send buffer and
    // tonic's encoder): bounded by the stream limit, not by what the client asks.
    assert!(grown < 192 * 1024, "held {grown} kB");
}

//! gNMI beside SNMP on this machine, one run, one client at a time (`cargo bench --bench gnmi_serve`):
//! - SNMP GET/s: sysName.0 GETs from one UDP socket, each waiting for its answer;
//! - gNMI Get/s: Gets of `/system/state/hostname` (PROTO) over one HTTP/2 connection, each waiting;
//! - gNMI updates/s: one STREAM SAMPLE subscription of every leaf of a device at 10 ms, leaves received
//!   per second (and notifications per second);
//! - 1 000 STREAM subscriptions at 1 s SAMPLE (250 devices × 4) held for 5 s: updates per second and the
//!   worst gap between two notifications of one subscription (its cadence).
//!
//! The fleet runs in-process; the client runs on a tokio runtime of its own in the bench thread.
use nl6::lab::gnmi::config::GnmiConfig;
use nl6::lab::gnmi::proto::gnmi::subscribe_request::Request as Req;
use nl6::lab::gnmi::proto::gnmi::subscribe_response::Response as Resp;
use nl6::lab::gnmi::proto::gnmi::*;
use nl6::lab::snmp::ber::{Oid, Value};
use nl6::lab::snmp::{pdu, Message, VERSION_2C};
use nl6::lab::{Fleet, FleetConfig};
use std::time::{Duration, Instant};

// The gNMI tests' Rust client: the same paths and connections as the tests'.
#[path = "../tests/gnmi_support/stream.rs"]
mod gnmi_stream;
use gnmi_stream::{client, path};

const RUN: Duration = Duration::from_secs(3);

fn snmp_gets(fleet: &Fleet) -> f64 {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let to = fleet.devices()[0].snmp_addr().unwrap();
    let mut buf = [0u8; 2048];
    let (start, mut n) = (Instant::now(), 0u64);
    while start.elapsed() < RUN {
        let m = Message {
            version: VERSION_2C,
            community: b"public".to_vec(),
            pdu_type: pdu::GET,
            request_id: n as i32,
            error_status: 0,
            error_index: 0,
            varbinds: vec![(Oid(vec![1, 3, 6, 1, 2, 1, 1, 5, 0]), Value::Null)],
        };
        s.send_to(&m.encode(), to).unwrap();
        s.recv(&mut buf).expect("an SNMP answer");
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

async fn gnmi_gets(at: std::net::SocketAddr) -> f64 {
    let mut c = client(at).await;
    let (start, mut n) = (Instant::now(), 0u64);
    while start.elapsed() < RUN {
        let req = GetRequest {
            path: vec![path(&["system", "state", "hostname"])],
            encoding: Encoding::Proto as i32,
            ..GetRequest::default()
        };
        c.get(req).await.expect("Get");
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn stream_request(interval: Duration) -> SubscribeRequest {
    let list = SubscriptionList {
        subscription: vec![Subscription {
            path: Some(path(&[])),
            mode: SubscriptionMode::Sample as i32,
            sample_interval: interval.as_nanos() as u64,
            ..Subscription::default()
        }],
        encoding: Encoding::Proto as i32,
        ..SubscriptionList::default()
    };
    SubscribeRequest {
        request: Some(Req::Subscribe(list)),
        extension: Vec::new(),
    }
}

/// Leaves and notifications per second, and the worst gap between two notifications.
async fn stream(
    at: std::net::SocketAddr,
    interval: Duration,
    run: Duration,
) -> (u64, u64, Duration) {
    let mut c = client(at).await;
    let mut s = c
        .subscribe(tokio_stream::iter([stream_request(interval)]))
        .await
        .unwrap()
        .into_inner();
    let (start, mut leaves, mut notes) = (Instant::now(), 0u64, 0u64);
    let (mut last, mut worst) = (None::<Instant>, Duration::ZERO);
    while start.elapsed() < run {
        let Ok(Ok(Some(r))) = tokio::time::timeout(run, s.message()).await else {
            break;
        };
        if let Some(Resp::Update(n)) = r.response {
            let now = Instant::now();
            if let Some(l) = last.filter(|_| notes > 1) {
                worst = worst.max(now - l);
            }
            last = Some(now);
            leaves += n.update.len() as u64;
            notes += 1;
        }
    }
    (leaves, notes, worst)
}

fn main() {
    let gnmi = GnmiConfig::default().with_port(Some(0));
    let fleet = Fleet::start(
        FleetConfig::default()
            .with_devices(250)
            .with_snmp_port(0)
            .with_gnmi(gnmi),
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let at = fleet.devices()[0].gnmi_addr().unwrap();
    let snmp = snmp_gets(&fleet);
    let get = rt.block_on(gnmi_gets(at));
    let (leaves, notes, _) = rt.block_on(stream(at, Duration::from_millis(10), RUN));
    println!("SNMP GET (sysName.0), one client: {snmp:.0}/s");
    println!(
        "gNMI Get (/system/state/hostname, PROTO), one client: {get:.0}/s ({:.2} × SNMP's)",
        get / snmp
    );
    let secs = RUN.as_secs_f64();
    println!("gNMI STREAM SAMPLE 10 ms, every leaf of one device: {:.0} updates/s in {:.0} notifications/s", leaves as f64 / secs, notes as f64 / secs);
    let hold = Duration::from_secs(5);
    let addrs: Vec<_> = fleet
        .devices()
        .iter()
        .map(|d| d.gnmi_addr().unwrap())
        .collect();
    let results = rt.block_on(async {
        let tasks: Vec<_> = (0..1000)
            .map(|k| tokio::spawn(stream(addrs[k % addrs.len()], Duration::from_secs(1), hold)))
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    });
    let total: u64 = results.iter().map(|r| r.0).sum();
    let worst = results.iter().map(|r| r.2).max().unwrap_or_default();
    let short = results.iter().filter(|r| r.1 < 4).count();
    println!(
        "1 000 STREAM SAMPLE 1 s subscriptions for 5 s: {:.0} updates/s, worst gap between two notifications {:.2} s, {short} with fewer than 4 notifications",
        total as f64 / hold.as_secs_f64(),
        worst.as_secs_f64()
    );
}

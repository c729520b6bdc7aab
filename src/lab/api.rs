//! The fleet's REST routes, as one routing function over request and reply values:
//!
//! - `GET /api/v1/devices?offset=&limit=&name=`: one page, `{"total":N,"offset":…,"limit":…,"data":[…]}`,
//!   each device's name, SNMP address and port, interfaces and counters (messages sent, dropped,
//!   malformed packets received, and their parts); at most [`MAX_PAGE`] devices a page, [`DEFAULT_PAGE`]
//!   unless asked, so 30 000 devices never make one unbounded body; `name=PREFIX` keeps the devices whose
//!   name starts with PREFIX (ASCII case ignored), and `total` counts those;
//! - `GET /api/v1/fleet`: the fleet at a glance: `devices`, `totals` (every device's message counters
//!   added up: what the fleet sent and dropped, per kind) and `scheduler` (how late its jobs were
//!   reached, p50/p99/p999 and the histogram, and the periods it skipped; see [`super::lateness`]), and
//!   `snmp_kernel_drops` (requests the kernel dropped at the SNMP sockets' full buffers), `snmp_io`
//!   (how the SNMP sockets are served: `io_uring` or `epoll`);
//! - `GET /api/v1/scenarios`: `{"data":[…]}`, every scenario and its state;
//! - `POST /api/v1/scenarios`: `{"name":"link-flap","device":"…","duration":"30s","start_at"?:RFC 3339}`
//!   → 201 with the scenario; a bad body → 400 whose error names the field; 429 when
//!   [`scenario::MAX_ACTIVE`] scenarios are already scheduled or running;
//! - `DELETE /api/v1/scenarios/{id}`: cancels a scheduled or running scenario → 200 with it (state
//!   `cancelled`); 404 for an unknown id, 409 for one that has ended, 400 for an id that is not a number.
//!
//! `HEAD` is answered wherever `GET` is (the server sends the head only).
//!
//! Errors are `{"error":"…"}`; every body is `application/json`. Handlers never touch a socket.
#![forbid(unsafe_code)]

use super::device::{prefix_ranges, Device};
use super::fleet::Fleet;
use super::scenario;
use crate::http::{Request, Response};
use std::time::Instant;

// The one REST body writer and error shape, shared with the profiling gate's routes.
use crate::api::rest::{error, json};

/// Routes a request to the fleet API; `None` when the path is not ours.
pub fn route(req: &crate::http::Request, fleet: &Fleet) -> Option<crate::http::Response> {
    Some(match (req.method.as_str(), req.path.as_str()) {
        ("GET" | "HEAD", "/api/v1/devices") => match page(req) {
            Ok((offset, limit)) => {
                let prefix = req.query_param("name").unwrap_or_default();
                devices(fleet, offset, limit, &prefix)
            }
            Err(e) => error(400, &e.to_string()),
        },
        ("GET" | "HEAD", "/api/v1/fleet") => fleet_totals(fleet),
        ("GET" | "HEAD", "/api/v1/scenarios") => list_scenarios(fleet),
        ("POST", "/api/v1/scenarios") => post_scenario(req, fleet),
        (m, p @ ("/api/v1/devices" | "/api/v1/fleet")) => {
            error(405, &format!("method {m} not allowed on {p} (GET, HEAD)"))
                .header("Allow", "GET, HEAD")
        }
        (m, p @ "/api/v1/scenarios") => error(
            405,
            &format!("method {m} not allowed on {p} (GET, HEAD, POST)"),
        )
        .header("Allow", "GET, HEAD, POST"),
        (m, p) if p.starts_with(SCENARIO_PREFIX) => match m {
            "DELETE" => cancel_scenario(&p[SCENARIO_PREFIX.len()..], fleet),
            _ => error(405, &format!("method {m} not allowed on {p} (DELETE)"))
                .header("Allow", "DELETE"),
        },
        _ => return None,
    })
}

/// Where one scenario's path starts (`/api/v1/scenarios/{id}`).
const SCENARIO_PREFIX: &str = "/api/v1/scenarios/";

/// Devices in a page when the request does not say.
pub const DEFAULT_PAGE: usize = 100;
/// The most devices one page holds.
pub const MAX_PAGE: usize = 1000;

/// Why a page's query was refused; `Display` names the parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PageError {
    NotNumber {
        name: &'static str,
        value: String,
    },
    /// A `limit` of 0 or above [`MAX_PAGE`].
    Limit(usize),
}

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PageError::NotNumber { name, value } => write!(
                f,
                "query parameter {name}: want a whole number, not {value:?}"
            ),
            PageError::Limit(n) => {
                write!(f, "query parameter limit: want 1 to {MAX_PAGE}, not {n}")
            }
        }
    }
}

/// `?offset=&limit=`, each optional; the error names the parameter.
fn page(req: &Request) -> Result<(usize, usize), PageError> {
    let number = |name: &'static str, default: usize| match req.query_param(name) {
        None => Ok(default),
        Some(v) if v.is_empty() => Ok(default),
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| PageError::NotNumber { name, value: v }),
    };
    let offset = number("offset", 0)?;
    let limit = number("limit", DEFAULT_PAGE)?;
    if limit == 0 || limit > MAX_PAGE {
        return Err(PageError::Limit(limit));
    }
    Ok((offset, limit))
}

/// One page of the devices whose name starts with `prefix`: the matching indices come as ranges from
/// the prefix ([`prefix_ranges`]), so the count and the page cost nothing per device of the fleet.
fn devices(fleet: &Fleet, offset: usize, limit: usize, prefix: &str) -> Response {
    let now = Instant::now();
    let all = fleet.devices();
    let ranges = prefix_ranges(prefix, all.len());
    let total: usize = ranges.iter().map(|r| r.len()).sum();
    let mut skip = offset;
    let mut picked = Vec::with_capacity(limit.min(total.saturating_sub(offset)));
    for r in ranges {
        if skip >= r.len() {
            skip -= r.len();
            continue;
        }
        let want = limit - picked.len();
        picked.extend((r.start + skip..r.end).take(want));
        skip = 0;
        if picked.len() == limit {
            break;
        }
    }
    let data: Vec<serde_json::Value> = picked
        .into_iter()
        .map(|i| device_json(&all[i], now))
        .collect();
    json(
        200,
        &serde_json::json!({ "total": total, "offset": offset, "limit": limit, "data": data }),
    )
}

/// One device of a page; reads its state and counters without making them live.
fn device_json(d: &Device, now: Instant) -> serde_json::Value {
    let addr = d.snmp_addr();
    let interfaces: Vec<serde_json::Value> = d
        .advance(now)
        .interfaces
        .iter()
        .map(|i| {
            serde_json::json!({
                "index": i.index, "name": i.name, "oper_status": if i.oper_up { "up" } else { "down" },
                "admin_status": if i.admin_up { "up" } else { "down" },
                "in_octets": i.in_octets, "out_octets": i.out_octets, "in_errors": i.in_errors, "flaps": i.flaps,
            })
        })
        .collect();
    serde_json::json!({
        "name": d.name(),
        "sys_descr": d.sys_descr(),
        "uptime_seconds": d.uptime_ticks(now) / 100,
        "snmp": { "address": addr.map(|a| a.ip().to_string()), "port": addr.map(|a| a.port()) },
        "gnmi": d.gnmi_addr().map(|a| serde_json::json!({ "address": a.ip().to_string(), "port": a.port() })),
        "interfaces": interfaces,
        "counters": d.counters.peek().to_json(),
    })
}

/// The counters every device keeps, added up over the fleet (one pass, no allocation per device).
fn fleet_totals(fleet: &Fleet) -> Response {
    use std::sync::atomic::Ordering::Relaxed;
    let (mut sums, mut sent, mut dropped) =
        ([0u64; crate::lab::device::DeviceCounters::NAMED], 0, 0);
    for d in fleet.devices() {
        let c = d.counters.peek();
        for (s, (_, v)) in sums.iter_mut().zip(c.named()) {
            *s += v.load(Relaxed);
        }
        (sent, dropped) = (sent + c.sent(), dropped + c.dropped());
    }
    let mut totals = serde_json::Map::new();
    totals.insert("sent".into(), sent.into());
    totals.insert("dropped".into(), dropped.into());
    let names = crate::lab::device::DeviceCounters::default();
    for ((name, _), v) in names.named().into_iter().zip(sums) {
        totals.insert(name.into(), v.into());
    }
    json(
        200,
        &serde_json::json!({
            "devices": fleet.devices().len(),
            "totals": totals,
            "snmp_kernel_drops": fleet.snmp_kernel_drops(),
            "snmp_io": fleet.snmp_io(),
            "scheduler": fleet.lateness().to_json(),
        }),
    )
}

fn list_scenarios(fleet: &Fleet) -> Response {
    let data: Vec<serde_json::Value> = fleet
        .shared()
        .scenarios
        .list()
        .iter()
        .map(|s| s.to_json())
        .collect();
    json(200, &serde_json::json!({ "data": data }))
}

fn cancel_scenario(id: &str, fleet: &Fleet) -> Response {
    let Ok(id) = id.parse::<u64>() else {
        return error(
            400,
            &format!("scenario id {id:?} is not a number (the \"id\" GET /api/v1/scenarios lists)"),
        );
    };
    match scenario::cancel(&fleet.shared().scenarios, id) {
        Ok(sc) => json(200, &serde_json::json!({ "data": sc.to_json() })),
        Err(e) => error(e.status(), &e.to_string()),
    }
}

fn post_scenario(req: &Request, fleet: &Fleet) -> Response {
    let parsed = scenario::parse_request(&req.body, |name| fleet.device(name).is_some());
    let submitted = parsed
        .map_err(scenario::SubmitError::Invalid)
        .and_then(|r| scenario::submit(fleet.shared(), r));
    match submitted {
        Ok(sc) => json(201, &serde_json::json!({ "data": sc.to_json() })),
        Err(e) => error(e.status(), &e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::FleetConfig;

    #[test]
    fn routes_answer_json_and_errors_name_fields() {
        let fleet = Fleet::start(FleetConfig::default().with_devices(2).with_snmp_port(0)).unwrap();
        let r = route(&Request::new("GET", "/api/v1/devices"), &fleet).unwrap();
        assert_eq!(
            (r.status, r.get_header("content-type")),
            (200, Some("application/json"))
        );
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["data"].as_array().unwrap().len(), 2);
        assert_eq!(v["data"][1]["name"], "nl6-dev-0001");
        assert_eq!(
            v["data"][1]["snmp"]["port"],
            fleet.devices()[1].snmp_addr().unwrap().port()
        );
        assert_eq!(v["data"][0]["counters"]["malformed"], 0);

        let many = Fleet::start(FleetConfig::default().with_devices(12).with_snmp_port(0)).unwrap();
        let page = |query: &str| -> serde_json::Value {
            let r = route(
                &Request::new("GET", &format!("/api/v1/devices?{query}")),
                &many,
            )
            .unwrap();
            serde_json::from_slice(&r.body).unwrap()
        };
        // The name filter runs over the whole fleet, before the page is cut.
        let v = page("name=NL6-dev-001&offset=1&limit=1");
        assert_eq!(v["total"], 2, "{v}");
        assert_eq!(v["data"].as_array().unwrap().len(), 1, "{v}");
        assert_eq!(v["data"][0]["name"], "nl6-dev-0011", "{v}");
        assert_eq!(page("name=x")["total"], 0);
        assert_eq!(page("name=")["total"], 12);
        many.stop();

        let bad = Request::new("POST", "/api/v1/scenarios")
            .with_body(r#"{"name":"link-flap","device":"x","duration":"1s"}"#);
        let r = route(&bad, &fleet).unwrap();
        assert_eq!(r.status, 400);
        assert!(r.text().contains("field \\\"device\\\""), "{}", r.text());

        let r = route(&Request::new("DELETE", "/api/v1/devices"), &fleet).unwrap();
        assert_eq!((r.status, r.get_header("allow")), (405, Some("GET, HEAD")));
        assert!(route(&Request::new("GET", "/debug/pprof/"), &fleet).is_none());

        let ok = Request::new("POST", "/api/v1/scenarios")
            .with_body(r#"{"name":"link-flap","device":"nl6-dev-0001","duration":"300ms"}"#);
        let r = route(&ok, &fleet).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
        let r = route(&Request::new("GET", "/api/v1/scenarios"), &fleet).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["data"][0]["device"], "nl6-dev-0001");
        assert_eq!(v["data"][0]["state"], "running");
    }

    /// Each scenario holds a thread and the API is unauthenticated: starts far ahead are refused, at
    /// most MAX_ACTIVE are scheduled or running, and a refusal lists nothing.
    #[test]
    fn scenarios_are_bounded() {
        let fleet = Fleet::start(FleetConfig::default().with_devices(1).with_snmp_port(0)).unwrap();
        let post = |start_at: &str| {
            let body = format!(
                r#"{{"name":"link-flap","device":"nl6-dev-0000","duration":"1s","start_at":"{start_at}"}}"#
            );
            route(
                &Request::new("POST", "/api/v1/scenarios").with_body(body),
                &fleet,
            )
            .unwrap()
        };
        let r = post("2999-01-01T00:00:00Z");
        assert_eq!(r.status, 400, "{}", r.text());
        assert!(r.text().contains("start_at"), "{}", r.text());
        let soon = crate::timefmt::rfc3339_millis(
            std::time::SystemTime::now() + std::time::Duration::from_secs(3600),
        );
        for i in 0..scenario::MAX_ACTIVE {
            assert_eq!(post(&soon).status, 201, "scenario {i}");
        }
        let r = post(&soon);
        assert_eq!(r.status, 429, "{}", r.text());
        let listed = route(&Request::new("GET", "/api/v1/scenarios"), &fleet).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&listed.body).unwrap();
        assert_eq!(v["data"].as_array().unwrap().len(), scenario::MAX_ACTIVE);
        fleet.stop();
    }
}

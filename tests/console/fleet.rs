//! The console's fleet panels in headless Chromium: the binary does not start a fleet yet, so this test
//! serves the same API in-process (the server, the gate's REST and the fleet's routes mounted through
//! `Api::with_extension`) over a three-device fleet on loopback, and checks the devices and scenarios
//! tables the page draws from `/api/v1/devices` and `/api/v1/scenarios`, on a desktop and a phone-sized
//! window. Screenshots go to `target/console-screenshots/`.

use crate::console_support;

use console_support::{Browser, TempDir};
use nl6::api::Api;
use nl6::gate::control::Gate;
use nl6::gate::port::NoopPusher;
use nl6::gate::state::Startup;
use nl6::http::server::{Handler, Server, ServerConfig};
use nl6::http::Request;
use nl6::lab::{Fleet, FleetConfig};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

/// Stops the in-process server at the end of the test, even on failure.
struct ServerGuard(Option<Server>);

impl Drop for ServerGuard {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            s.shutdown();
        }
    }
}

/// Serves the console, the gate's REST and `fleet`'s routes on loopback: the guard and the base URL.
fn serve(fleet: &Arc<Fleet>) -> (ServerGuard, String) {
    let gate = Gate::new(
        Startup::new(None, None, None, Duration::from_secs(15)),
        Box::new(NoopPusher),
    );
    let routes = Arc::clone(fleet);
    let api = Arc::new(
        // As the binary composes it (cli/run.rs): the console mounted, the fleet as the extension.
        nl6::console::mount(Api::new(gate), &Arc::new(nl6::console::CpuSlot::new()))
            .with_extension(Box::new(move |req| nl6::lab::api::route(req, &routes))),
    );
    let handler: Arc<Handler> = Arc::new(move |req| api.handle(req));
    let server = ServerGuard(Some(
        Server::bind("127.0.0.1:0", ServerConfig::default(), handler).expect("bind"),
    ));
    let base = format!("http://{}", server.0.as_ref().unwrap().local_addr());
    (server, base)
}

#[test]
fn console_shows_the_fleets_devices_and_scenarios() {
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/console-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let fleet = Arc::new(
        Fleet::start(FleetConfig::default().with_devices(3).with_snmp_port(0)).expect("fleet"),
    );
    let (_server, base) = serve(&fleet);

    let tmp = TempDir::new("nl6-console-fleet");
    let mut b = Browser::launch(&tmp.path().join("profile"), WAIT);
    b.viewport(1280, 900, 1.0, false);
    b.navigate(&format!("{base}/"));
    b.wait_text("gate-state", WAIT, |t| t == "closed");
    b.wait_eval(WAIT, "!document.getElementById('devices-panel').hidden");

    // One row per device, with its SNMP address from the API.
    let rows = b.eval(
        "[...document.querySelectorAll('#devices-table tbody tr')].map(r => \
         [...r.cells].map(c => c.textContent))",
    );
    let rows = rows.as_array().expect("rows");
    assert_eq!(rows.len(), 3, "{rows:?}");
    for (row, device) in rows.iter().zip(fleet.devices()) {
        assert_eq!(row[0], device.name().as_str(), "{row:?}");
        let addr = device.snmp_addr().expect("snmp address");
        assert_eq!(row[1], addr.to_string(), "{row:?}");
    }
    assert_eq!(b.text("devices-count"), "3 devices");

    // No scenario yet; one posted through the API shows after "refresh".
    assert_eq!(
        b.eval("document.getElementById('scenarios-empty').hidden"),
        false
    );
    let device = fleet.devices()[1].name().to_string();
    let post = Request::new("POST", "/api/v1/scenarios").with_body(format!(
        "{{\"name\":\"link-flap\",\"device\":\"{device}\",\"duration\":\"30s\"}}"
    ));
    let r = nl6::lab::api::route(&post, &fleet).expect("fleet route");
    assert_eq!(r.status, 201, "{}", r.text());
    b.click("refresh-fleet");
    b.wait_eval(
        WAIT,
        "document.querySelectorAll('#scenarios-table tbody tr').length === 1",
    );
    let cells = b.eval(
        "[...document.querySelector('#scenarios-table tbody tr').cells].map(c => c.textContent)",
    );
    assert_eq!(cells[1], "link-flap", "{cells}");
    assert_eq!(cells[2], device.as_str(), "{cells}");
    assert_eq!(cells[3], "30s", "{cells}");

    // The filter narrows the device rows.
    b.type_into("device-filter", &device);
    b.eval("document.getElementById('device-filter').dispatchEvent(new Event('input'))");
    b.wait_eval(
        WAIT,
        "document.querySelectorAll('#devices-table tbody tr').length === 1",
    );
    b.type_into("device-filter", "");
    b.eval("document.getElementById('device-filter').dispatchEvent(new Event('input'))");
    b.scroll_to("devices-panel");
    b.screenshot(&shots.join("09-fleet.png"));

    // Phone-sized: the tables scroll inside their panels, the page itself does not scroll sideways.
    b.viewport(390, 844, 2.0, true);
    b.navigate(&format!("{base}/"));
    b.wait_eval(WAIT, "!document.getElementById('scenarios-panel').hidden");
    assert_eq!(
        b.eval("document.documentElement.scrollWidth <= window.innerWidth"),
        true,
        "the page scrolls sideways at 390 px"
    );
    b.scroll_to("devices-panel");
    b.screenshot(&shots.join("10-fleet-phone.png"));
    b.close();
}

/// A large fleet is shown a page at a time with its total, not as one table of every device.
#[test]
fn console_pages_a_large_fleet() {
    let fleet = Arc::new(
        Fleet::start(FleetConfig::default().with_devices(150).with_snmp_port(0)).expect("fleet"),
    );
    let (_server, base) = serve(&fleet);
    let tmp = TempDir::new("nl6-console-fleet-pages");
    let mut b = Browser::launch(&tmp.path().join("profile"), WAIT);
    b.viewport(1280, 900, 1.0, false);
    b.navigate(&format!("{base}/"));
    b.wait_eval(WAIT, "!document.getElementById('devices-panel').hidden");
    b.wait_text("devices-count", WAIT, |t| {
        t == "150 devices, 1–100 on this page"
    });
    let rows = "document.querySelectorAll('#devices-table tbody tr').length";
    assert_eq!(b.eval(rows), 100);
    // The name filter searches the whole fleet, not only the page shown (nl6-dev-0100… are on page 2).
    b.type_into("device-filter", "nl6-dev-01");
    b.eval("document.getElementById('device-filter').dispatchEvent(new Event('input'))");
    b.wait_text("devices-count", WAIT, |t| {
        t == "50 devices named nl6-dev-01…"
    });
    assert_eq!(b.eval(rows), 50);
    b.type_into("device-filter", "");
    b.eval("document.getElementById('device-filter').dispatchEvent(new Event('input'))");
    b.wait_text("devices-count", WAIT, |t| {
        t == "150 devices, 1–100 on this page"
    });
    b.eval("document.getElementById('devices-next').click()");
    b.wait_text("devices-count", WAIT, |t| {
        t == "150 devices, 101–150 on this page"
    });
    assert_eq!(b.eval(rows), 50);
    let first = "document.querySelector('#devices-table tbody tr td').textContent";
    assert_eq!(b.eval(first), "nl6-dev-0100");
    b.close();
}

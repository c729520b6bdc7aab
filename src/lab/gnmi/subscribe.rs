//! gNMI `Subscribe`: `ONCE` (a snapshot, `sync_response`, the end), `POLL` (a snapshot and
//! `sync_response` at the start and on every `Poll`), and `STREAM`, whose subscriptions each run as
//! their mode says:
//!
//! - `SAMPLE`: every leaf every `sample_interval` (0: [`DEFAULT_SAMPLE`]); with `suppress_redundant`,
//!   only leaves whose value changed, all of them again every `heartbeat_interval`;
//! - `ON_CHANGE`: a leaf when its value changes: status changes (a flap, a `Set`) within
//!   [`CHANGE_CHECK`], stamped with the device's time of the change; counters are compared once a
//!   `sample_interval` (0: [`DEFAULT_SAMPLE`]); every leaf again every `heartbeat_interval`;
//! - `TARGET_DEFINED`: counters as `SAMPLE`, every other leaf as `ON_CHANGE`.
//!
//! One task per RPC on the gNMI thread; responses go through a bounded channel, so a slow client slows
//! its own stream and nothing grows. The task ends when the client goes away or the fleet stops.
#![forbid(unsafe_code)]

use super::encode;
use super::limits::{self, Over};
use super::path::{self, Elem};
use super::proto::gnmi::subscribe_request::Request as Req;
use super::proto::gnmi::subscribe_response::Response as Resp;
use super::proto::gnmi::subscription_list::Mode;
use super::proto::gnmi::*;
use super::schema::{self, Val};
use super::select::{request_path, select};
use super::target::{check_target, Target};
use crate::lab::device::DeviceCounters;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

/// The response stream of one Subscribe RPC.
pub type Responses = ReceiverStream<Result<SubscribeResponse, Status>>;
/// The sample interval of a subscription that gives none.
pub const DEFAULT_SAMPLE: Duration = Duration::from_secs(1);
/// How often a stream with `ON_CHANGE` leaves looks at the device's change count.
pub const CHANGE_CHECK: Duration = Duration::from_millis(100);
/// The shortest sample or heartbeat interval accepted.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// Responses a stream holds for a slow client.
const BACKLOG: usize = 16;
/// The longest a stream sleeps without looking at the fleet's stop flag.
const STOP_CHECK: Duration = Duration::from_millis(250);

/// One subscription of a STREAM list.
struct Sub {
    /// The leaves it serves, as indices into the device's leaves (found once, at the start).
    picked: Vec<usize>,
    mode: SubscriptionMode,
    interval: Duration,
    suppress: bool,
    heartbeat: Option<Duration>,
    next_sample: Instant,
    next_beat: Option<Instant>,
    /// The value last sent of each picked leaf.
    last: Vec<Option<Val>>,
}

impl Sub {
    fn sampled(&self, path: &[Elem]) -> bool {
        match self.mode {
            SubscriptionMode::Sample => true,
            SubscriptionMode::OnChange => false,
            SubscriptionMode::TargetDefined => path.iter().any(|e| e.name == "counters"),
        }
    }
    fn watches_changes(&self) -> bool {
        self.mode != SubscriptionMode::Sample
    }
}

fn interval(nanos: u64, what: &str) -> Result<Option<Duration>, Status> {
    let d = Duration::from_nanos(nanos);
    match d {
        d if d.is_zero() => Ok(None),
        d if d < MIN_INTERVAL => Err(Status::invalid_argument(format!(
            "{what} {nanos} ns is below the {} ms this target samples at most",
            MIN_INTERVAL.as_millis()
        ))),
        d => Ok(Some(d)),
    }
}

/// Reads the first request (the subscription list), checks it, and starts the RPC's task.
pub async fn start(
    t: Arc<Target>,
    index: usize,
    mut reqs: Streaming<SubscribeRequest>,
) -> Result<Responses, Status> {
    let first = reqs.message().await?.and_then(|m| m.request);
    let Some(Req::Subscribe(list)) = first else {
        return Err(Status::invalid_argument(
            "the first SubscribeRequest must carry a SubscriptionList (`subscribe`)",
        ));
    };
    let d = &t.shared.devices()[index];
    let target = list
        .prefix
        .as_ref()
        .map_or("", |p| p.target.as_str())
        .to_string();
    check_target(d, &target)?;
    let enc = encode::requested(list.encoding)?;
    let mode = Mode::try_from(list.mode).map_err(|_| {
        Status::invalid_argument(format!("unknown subscription list mode {}", list.mode))
    })?;
    limits::count(
        list.subscription.len(),
        limits::MAX_SUBSCRIPTIONS,
        Over::Subscriptions,
    )?;
    if list.subscription.is_empty() {
        return Err(Status::invalid_argument(
            "the SubscriptionList holds no subscription",
        ));
    }
    let now = Instant::now();
    let all = schema::leaves(d, &t.clock, now);
    let mut subs = Vec::with_capacity(list.subscription.len());
    for s in &list.subscription {
        // One subscription a turn: other devices' RPCs run between them.
        tokio::task::yield_now().await;
        let want = request_path(list.prefix.as_ref(), s.path.as_ref())?;
        select(&all, &want, &d.name())?;
        let sub_mode = SubscriptionMode::try_from(s.mode).map_err(|_| {
            Status::invalid_argument(format!("unknown subscription mode {}", s.mode))
        })?;
        let every = interval(s.sample_interval, "sample_interval")?.unwrap_or(DEFAULT_SAMPLE);
        let heartbeat = interval(s.heartbeat_interval, "heartbeat_interval")?;
        let picked: Vec<usize> = (0..all.len())
            .filter(|&i| path::selects(&want, &all[i].path))
            .collect();
        subs.push(Sub {
            last: vec![None; picked.len()],
            picked,
            mode: sub_mode,
            interval: every,
            suppress: s.suppress_redundant,
            heartbeat,
            next_sample: now + every,
            next_beat: heartbeat.map(|h| now + h),
        });
    }
    let (tx, rx) = mpsc::channel(BACKLOG);
    let run = Run {
        paths: all.into_iter().map(|l| l.path).collect(),
        t,
        index,
        enc,
        target,
        tx,
        updates_only: list.updates_only,
    };
    tokio::spawn(async move {
        match mode {
            Mode::Once => run.once(&mut subs).await,
            Mode::Poll => run.poll(&mut subs, reqs).await,
            Mode::Stream => run.stream(&mut subs, reqs).await,
        }
    });
    Ok(ReceiverStream::new(rx))
}

/// One running Subscribe RPC.
struct Run {
    /// The device's leaf paths, in [`schema::values`]' order.
    paths: Vec<Vec<Elem>>,
    t: Arc<Target>,
    index: usize,
    enc: Encoding,
    target: String,
    tx: mpsc::Sender<Result<SubscribeResponse, Status>>,
    updates_only: bool,
}

/// Why a stream ended early: the client went away.
struct Gone;

impl Run {
    async fn send(&self, r: Resp) -> Result<(), Gone> {
        let d = &self.t.shared.devices()[self.index];
        if matches!(r, Resp::Update(_)) {
            DeviceCounters::inc(&d.counters.gnmi_updates);
        }
        let msg = SubscribeResponse {
            response: Some(r),
            extension: Vec::new(),
        };
        self.tx.send(Ok(msg)).await.map_err(|_| Gone)
    }

    /// One notification of the leaves at indices `picked`, with their values in `vals`.
    async fn notify(&self, picked: &[usize], vals: &[Val], timestamp: u64) -> Result<(), Gone> {
        if picked.is_empty() {
            return Ok(());
        }
        let leaves = picked
            .iter()
            .filter_map(|&i| Some((&self.paths.get(i)?[..], vals.get(i)?)));
        let n = encode::notification(leaves, self.enc, timestamp, &self.target);
        self.send(Resp::Update(n)).await
    }

    /// Every subscription's leaves now, then `sync_response` (the leaves skipped with `updates_only`).
    async fn snapshot(&self, subs: &mut [Sub]) -> Result<(), Gone> {
        let now = Instant::now();
        let d = &self.t.shared.devices()[self.index];
        let vals = schema::values(d, &self.t.clock, now);
        for s in subs.iter_mut() {
            for (last, &i) in s.last.iter_mut().zip(&s.picked) {
                *last = vals.get(i).cloned();
            }
            if !self.updates_only {
                self.notify(&s.picked, &vals, self.t.clock.nanos(now))
                    .await?;
            }
        }
        self.send(Resp::SyncResponse(true)).await
    }

    async fn once(&self, subs: &mut [Sub]) {
        let _ = self.snapshot(subs).await;
    }

    async fn poll(&self, subs: &mut [Sub], mut reqs: Streaming<SubscribeRequest>) {
        if self.snapshot(subs).await.is_err() {
            return;
        }
        loop {
            let next = tokio::select! {
                m = reqs.message() => m,
                _ = tokio::time::sleep(STOP_CHECK) => {
                    if self.t.shared.stopping() { return; }
                    continue;
                }
            };
            match next.map(|m| m.and_then(|m| m.request)) {
                Ok(Some(Req::Poll(_))) => {
                    if self.snapshot(subs).await.is_err() {
                        return;
                    }
                }
                Ok(Some(Req::Subscribe(_))) => {
                    let e = Status::invalid_argument(
                        "a POLL RPC takes one SubscriptionList; send Poll",
                    );
                    let _ = self.tx.send(Err(e)).await;
                    return;
                }
                Ok(None) | Err(_) => return,
            }
        }
    }

    async fn stream(&self, subs: &mut [Sub], mut reqs: Streaming<SubscribeRequest>) {
        if self.snapshot(subs).await.is_err() {
            return;
        }
        let d = self.t.shared.devices()[self.index].clone();
        let mut seen = d.changes();
        let mut reading = true;
        let watch = subs.iter().any(Sub::watches_changes);
        loop {
            let now = Instant::now();
            let mut wake = subs
                .iter()
                .flat_map(|s| [Some(s.next_sample), s.next_beat])
                .flatten()
                .min()
                .unwrap_or(now + STOP_CHECK)
                .min(now + STOP_CHECK);
            if watch {
                wake = wake.min(now + CHANGE_CHECK);
            }
            let sleep = tokio::time::sleep_until(wake.into());
            tokio::select! {
                m = reqs.message(), if reading => match m.map(|m| m.and_then(|m| m.request)) {
                    // The client closed its side: the stream goes on until it cancels.
                    Ok(None) => reading = false,
                    Ok(Some(_)) => {
                        let e = Status::invalid_argument("a STREAM RPC takes one SubscriptionList and no Poll");
                        let _ = self.tx.send(Err(e)).await;
                        return;
                    }
                    Err(_) => return,
                },
                _ = sleep => {}
            }
            if self.t.shared.stopping() || self.tx.is_closed() {
                return;
            }
            let changes = d.changes();
            let changed = changes != seen;
            seen = changes;
            if self.tick(subs, changed).await.is_err() {
                return;
            }
        }
    }

    /// Sends what each subscription owes now.
    async fn tick(&self, subs: &mut [Sub], changed: bool) -> Result<(), Gone> {
        let now = Instant::now();
        let due = |s: &Sub| now >= s.next_sample || s.next_beat.is_some_and(|b| now >= b);
        if !changed && !subs.iter().any(due) {
            return Ok(());
        }
        let d = &self.t.shared.devices()[self.index];
        let vals = schema::values(d, &self.t.clock, now);
        for s in subs.iter_mut() {
            let sample_due = now >= s.next_sample;
            let beat_due = s.next_beat.is_some_and(|b| now >= b);
            let mut out = Vec::new();
            let mut on_change = false;
            for k in 0..s.picked.len() {
                let i = s.picked[k];
                let (Some(val), Some(path)) = (vals.get(i), self.paths.get(i)) else {
                    continue;
                };
                let differs = s.last[k].as_ref() != Some(val);
                let sampled = s.sampled(path);
                let send = if beat_due {
                    true
                } else if sampled {
                    sample_due && (!s.suppress || differs)
                } else {
                    differs && (changed || sample_due)
                };
                if send {
                    on_change |= !sampled && differs && changed;
                    s.last[k] = Some(val.clone());
                    out.push(i);
                }
            }
            if sample_due {
                s.next_sample = next_after(s.next_sample, s.interval, now);
            }
            if let (true, Some(h), Some(b)) = (beat_due, s.heartbeat, s.next_beat) {
                s.next_beat = Some(next_after(b, h, now));
            }
            let ts = match on_change {
                true => schema::last_change_nanos(d, &self.t.clock),
                false => self.t.clock.nanos(now),
            };
            self.notify(&out, &vals, ts).await?;
        }
        Ok(())
    }
}

/// The next due time after `due` at `every`, skipping periods already missed (never replayed).
fn next_after(due: Instant, every: Duration, now: Instant) -> Instant {
    let next = due + every;
    if next > now {
        return next;
    }
    let behind = now.duration_since(due).as_nanos() / every.as_nanos().max(1);
    due + every * (behind as u32 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missed_periods_are_skipped_not_replayed() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        assert_eq!(next_after(t0, s, t0), t0 + s);
        assert_eq!(
            next_after(t0, s, t0 + Duration::from_millis(3500)),
            t0 + 4 * s
        );
    }
}

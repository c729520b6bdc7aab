//! What a push is told: [`PushConfig`] (how every push of a [`Pusher`](crate::Pusher) runs: the
//! application's name and version, upload timeout, queue bound, log sink) and [`Target`] (where one push
//! goes and how often). Plain values: nothing here touches the network or starts a thread.
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::Duration;

/// Where log lines go (one line per call, no trailing newline). Defaults to stderr.
pub type LogSink = Arc<dyn Fn(&str) + Send + Sync>;

/// What is told of each CPU window the push encodes (gzip'd pprof), e.g. to keep the last one for a page.
pub type CpuHook = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// What is told of each wall-clock window the push encodes (gzip'd pprof in fgprof's shape).
pub type WallHook = CpuHook;

/// The `hostname` label's source.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Hostname {
    /// The kernel's hostname (`/proc/sys/kernel/hostname`), read at each push start.
    Os,
    /// A fixed value (tests, or an operator's override).
    Fixed(String),
}

impl Hostname {
    pub(crate) fn resolve(&self) -> String {
        match self {
            Hostname::Fixed(h) => h.clone(),
            Hostname::Os => std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|s| s.trim().to_string())
                .ok()
                .filter(|s| !s.is_empty())
                .or_else(|| std::env::var("HOSTNAME").ok())
                .unwrap_or_else(|| "unknown".to_string()),
        }
    }
}

/// How pushes run. Fields are private; each `with_*` documents its default.
#[derive(Clone)]
pub struct PushConfig {
    pub(crate) application: String,
    pub(crate) upload_timeout: Duration,
    pub(crate) queue_capacity: usize,
    pub(crate) hostname: Hostname,
    pub(crate) version: String,
    pub(crate) spy_name: String,
    pub(crate) log: LogSink,
    pub(crate) cpu_hook: Option<CpuHook>,
    pub(crate) wall_hook: Option<WallHook>,
}

impl std::fmt::Debug for PushConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConfig")
            .field("application", &self.application)
            .field("upload_timeout", &self.upload_timeout)
            .field("queue_capacity", &self.queue_capacity)
            .field("hostname", &self.hostname)
            .field("version", &self.version)
            .field("spy_name", &self.spy_name)
            .finish_non_exhaustive()
    }
}

impl PushConfig {
    /// A config for the service called `application`: the series is
    /// `<application>{hostname=…,version=…}` (`service_name="<application>"` on the server) and the
    /// `User-Agent` is `<application>/<version>`. Characters the server's label parser cannot take
    /// (`,{}=`, whitespace) become `_`; an empty name becomes `unknown`.
    pub fn new(application: impl Into<String>) -> Self {
        PushConfig {
            application: application.into(),
            upload_timeout: Duration::from_secs(10),
            queue_capacity: 20,
            hostname: Hostname::Os,
            version: "unknown".to_string(),
            spy_name: crate::ingest_url::DEFAULT_SPY_NAME.to_string(),
            log: Arc::new(|line: &str| eprintln!("{line}")),
            cpu_hook: None,
            wall_hook: None,
        }
    }
    /// The whole-upload bound (resolve, connect, TLS, send, answer). Defaults to 10 s.
    pub fn with_upload_timeout(mut self, t: Duration) -> Self {
        self.upload_timeout = t;
        self
    }
    /// Upload jobs waiting at most (at least 1). Defaults to 20.
    pub fn with_queue_capacity(mut self, n: usize) -> Self {
        self.queue_capacity = n.max(1);
        self
    }
    /// The `hostname` label. Defaults to [`Hostname::Os`].
    pub fn with_hostname(mut self, h: Hostname) -> Self {
        self.hostname = h;
        self
    }
    /// The `version` label and the `User-Agent`'s version. Defaults to `unknown`; pass your own
    /// `env!("CARGO_PKG_VERSION")`.
    pub fn with_version(mut self, v: impl Into<String>) -> Self {
        self.version = v.into();
        self
    }
    /// The `spyName` of every upload, which the server stores as `pyroscope_spy` (which profiler made the
    /// profile). Defaults to `nl6-profile`, the engine; a program that wraps the engine may name itself.
    pub fn with_spy_name(mut self, name: impl Into<String>) -> Self {
        self.spy_name = name.into();
        self
    }
    /// Hands each CPU window encoded (gzip'd pprof) to `hook`. Defaults to none.
    pub fn with_cpu_hook(mut self, hook: CpuHook) -> Self {
        self.cpu_hook = Some(hook);
        self
    }
    /// Hands each wall-clock window encoded (gzip'd pprof, with `-profiling-wall`'s series on) to `hook`.
    /// Defaults to none.
    pub fn with_wall_hook(mut self, hook: WallHook) -> Self {
        self.wall_hook = Some(hook);
        self
    }
    /// Where log lines go. Defaults to stderr.
    pub fn with_log(mut self, log: LogSink) -> Self {
        self.log = log;
        self
    }
    /// The application name given to [`PushConfig::new`].
    pub fn application(&self) -> &str {
        &self.application
    }
    /// See [`PushConfig::with_upload_timeout`].
    pub fn upload_timeout(&self) -> Duration {
        self.upload_timeout
    }
    /// See [`PushConfig::with_queue_capacity`].
    pub fn queue_capacity(&self) -> usize {
        self.queue_capacity
    }
}

/// Where one push goes and how often.
#[derive(Clone)]
#[non_exhaustive]
pub struct Target {
    /// The server's address: an `http://` or `https://` URL, `/ingest` is joined to its path.
    pub address: String,
    /// `(user, password)` sent as `Authorization: Basic` (never taken from the URL's userinfo).
    pub basic_auth: Option<(String, String)>,
    /// `X-Scope-OrgID` (a multi-tenant server's tenant).
    pub tenant: Option<String>,
    /// Upload cadence: one CPU window, one heap profile and one thread profile per interval.
    pub interval: Duration,
    /// Also a wall-clock window per interval (fgprof's shape, the `fgprof` series); the push then holds
    /// the wall-clock sampler, as it holds the CPU one. Defaults to off, as Alloy's `profile.fgprof`.
    pub wall: bool,
}

impl Target {
    /// A push to `address` every `interval`, without credentials or tenant.
    pub fn new(address: impl Into<String>, interval: Duration) -> Self {
        Target {
            address: address.into(),
            basic_auth: None,
            tenant: None,
            interval,
            wall: false,
        }
    }
    /// Also uploads a wall-clock window every interval (see [`Target::wall`]).
    pub fn with_wall(mut self, on: bool) -> Self {
        self.wall = on;
        self
    }
    /// Sends `Authorization: Basic` with these credentials.
    pub fn with_basic_auth(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.basic_auth = Some((user.into(), password.into()));
        self
    }
    /// Sends `X-Scope-OrgID: <tenant>`.
    pub fn with_tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }
}

impl std::fmt::Debug for Target {
    // Never prints the credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("address", &self.address)
            .field("basic_auth", &self.basic_auth.as_ref().map(|_| "<set>"))
            .field("tenant", &self.tenant.as_ref().map(|_| "<set>"))
            .field("interval", &self.interval)
            .field("wall", &self.wall)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::PushConfig;

    #[test]
    fn the_spy_name_is_the_engines_unless_the_embedder_names_its_own() {
        assert_eq!(PushConfig::new("svc").spy_name, "nl6-profile");
        assert_eq!(
            PushConfig::new("svc").with_spy_name("my-agent").spy_name,
            "my-agent"
        );
    }
}

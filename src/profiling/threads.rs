//! STUB: all-thread stacks and threadcreate. Owner: engine-cpu helper.
use super::Stack;
use std::time::Duration;

/// One thread's stack at capture time.
#[derive(Debug, Clone)]
pub struct ThreadStack {
    pub tid: i32,
    pub name: String,
    /// Subsystem label index (0 = none).
    pub label: u16,
    pub stack: Stack,
}

/// Signals every thread of the process and collects its stack; threads that do not answer within
/// `timeout` are reported with an empty stack.
pub fn capture_all(timeout: Duration) -> Vec<ThreadStack> {
    let _ = timeout;
    todo!()
}

/// Stacks of the places that spawned threads through [`spawn_recorded`] (the `threadcreate` profile).
pub fn threadcreate_stacks() -> Vec<Stack> {
    todo!()
}

/// Spawns a named thread, recording the spawning stack for `threadcreate`.
pub fn spawn_recorded<F, T>(name: &str, f: F) -> std::io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    std::thread::Builder::new().name(name.to_string()).spawn(f)
}

//! What the engine says when a sampler cannot do all that was asked of it: the embedding program's log
//! sink ([`set_log_sink`]; nl6 prints each line to stderr) and the list of gaps in force ([`current`]:
//! threads the CPU sampler could not arm, a heap region smaller than asked or none), for status views.
//! The same texts go into the affected profiles as pprof comments.
//!
//! Never: runs in a signal handler or the allocator (the heap sampler's outcome is read here, outside
//! it); prints by itself (without a sink the lines are dropped, the comments and [`current`] remain).
#![forbid(unsafe_code)]

use std::sync::OnceLock;

/// Where the engine's log lines go (one line each, without a trailing newline).
pub type LogSink = fn(&str);

static SINK: OnceLock<LogSink> = OnceLock::new();

/// Sets the log sink once; false if one was set already (the first stays).
pub fn set_log_sink(sink: LogSink) -> bool {
    SINK.set(sink).is_ok()
}

/// Hands one line to the sink, if any.
pub(crate) fn log(line: &str) {
    if let Some(sink) = SINK.get() {
        sink(line);
    }
}

/// Every gap in force, as the texts the profiles carry: the running (or last) CPU session's unarmed
/// threads, and the heap sampler's region when it is smaller than asked or absent.
pub fn current() -> Vec<String> {
    let cpu = crate::cpu::coverage()
        .note()
        .map(|n| format!("cpu profile: {n}"));
    cpu.into_iter().chain(crate::heap::region_note()).collect()
}

//! Where the engine's log lines go when a sampler cannot do all that was asked of it (threads the CPU
//! sampler could not arm, a heap region smaller than asked or none): the embedding program's sink
//! ([`set_log_sink`]; nl6 prints each line to stderr). The same texts go into the affected profiles as
//! pprof comments, and [`crate::sampler_gaps`] lists those in force. A leaf: it knows no sampler.
//!
//! Never: runs in a signal handler or the allocator; prints by itself (without a sink the lines are
//! dropped; the comments and `sampler_gaps` remain). The one line the engine prints directly is
//! [`crate::sight`]'s, once, about the executable itself.
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

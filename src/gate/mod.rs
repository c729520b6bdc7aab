//! STUB: the profiling gate. Owner: serve helper. `port` is the push interface (shared).
pub mod port;

//! The profiling engine: nl6's own in-process, eBPF-free profiler.
//!
//! - [`cpu`]: the SIGPROF CPU sampler (per-thread CPU-time timers, frame-pointer unwinding from the
//!   interrupted context), one profile at a time.
//! - [`labels`]: the `subsystem` label each sample carries.
//! - [`heap`]: the sampling global allocator (Go's sampling formula), always on from process start.
//! - [`threads`]: stacks of every thread (the goroutine-profile analog) and the `threadcreate` record.
//! - [`encode`]: turning samples into gzip'd pprof protobuf (plus Go's text forms), with [`symbols`] naming
//!   addresses (from files `mapped` read-only) and [`builder`] owning string/function/location tables;
//!   [`proto`] holds the wire types.
//! - [`maps`]: the one `/proc/self/maps` parser.
//! - [`delta`]: godeltaprof-style delta views.
//!
//! Invariant: nothing under `profiling/` opens a socket or a listener (a test scans these files).
//! `unsafe` lives only in `signal`, `unwind`, `cpu`, `threads`, `heap` and `mapped`.

pub mod builder;
pub mod cpu;
pub mod delta;
pub mod encode;
pub mod heap;
pub mod labels;
pub(crate) mod mapped;
pub mod maps;
pub mod proto;
pub mod pull;
pub(crate) mod signal;
pub mod symbols;
pub mod threads;
pub(crate) mod unwind;

/// Installs the SIGPROF and stack-capture handlers now, so a stray signal of either before the first
/// profile is ignored instead of killing the process (both default actions terminate). Called by the
/// binary at startup; the samplers install them anyway when they start. Errors name the call and errno.
pub fn install_signal_handlers() -> Result<(), String> {
    cpu::install_handler()?;
    threads::install_handler()
}

/// A captured call stack: return addresses, **leaf first** (the interrupted instruction itself at index 0
/// for CPU samples). Addresses are absolute in this process.
pub type Stack = Vec<u64>;

/// SplitMix64's finaliser: spreads cheap entropy (a clock, a counter, an address) over all 64 bits. Seeds
/// the heap sampler's per-thread generator and the CPU timers' random first expiry.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    #[test]
    fn mix64_is_splitmix64() {
        // SplitMix64 seeded with 0 first outputs mix64(golden ratio) = 0xe220a8397b1dcdaf (Vigna's reference).
        assert_eq!(super::mix64(0x9e37_79b9_7f4a_7c15), 0xe220_a839_7b1d_cdaf);
        assert_eq!(super::mix64(0), 0);
    }
}

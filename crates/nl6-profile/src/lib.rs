//! # nl6-profile: Go-grade profiles for a Rust service, in process, without eBPF
//!
//! A Rust program that links this crate serves what `go tool pprof`, Grafana Alloy and Pyroscope read
//! from a Go program, from inside the process, on a static musl binary as well as on glibc:
//!
//! - **CPU** ([`cpu`]): one `timer_create` timer per thread on that thread's own CPU clock (not one
//!   process timer whose signal lands on whichever thread the kernel picks), and a walk from the
//!   interrupted context in which every caller is proven by a rule: the CFI row (`.eh_frame`,
//!   `.debug_frame`) of the frame's instruction, or the frame record of a function body that keeps a
//!   frame pointer (aarch64: frame records only). Where no rule holds, the stack ends with one stop
//!   frame naming why, never a guess. One profile at a time: [`cpu::start`] returns a session;
//!   `take_window` and `stop` give the samples.
//! - **Labels read at sample time** ([`labels`]): any keys and values, built once into a
//!   [`labels::LabelSet`] and entered with [`labels::with`] (a scope on the calling thread) or
//!   [`labels::LabelledFuture::with_labels`] (a future, across `.await`); the signal handler reads the
//!   set when the sample is taken, so a sample carries the labels of the work it interrupted.
//!   [`threads::spawn_labelled`] starts a thread labelled from its first instruction.
//! - **Heap profiles without jemalloc** ([`heap`]): [`heap::SamplingAllocator`] wraps the system
//!   allocator (or any `GlobalAlloc`) as the `#[global_allocator]` and samples allocations with Go's
//!   formula, on from process start (rate 512 KiB, [`heap::set_rate`]).
//! - **Every thread's stack** ([`threads`]): the goroutine-profile analog (each thread interrupted and
//!   unwound in place) and the `threadcreate` record. A thread pool's workers register from the pool's
//!   start hook ([`threads::on_thread_start`], e.g. tokio's `on_thread_start`): sampled from birth,
//!   with their whole stack from the first sample.
//! - **Wall-clock profiles** ([`wall`]): every thread sampled at 99 Hz, running or blocked, with its
//!   label and state, in fgprof's shape (`/debug/fgprof`); blocking loops must retry `EINTR` (see there).
//! - **Saying what it cannot see** ([`sight`]): an executable without frame pointers, symbol table or
//!   unwind rules is told once on stderr and in every profile's comments.
//! - **pprof out** ([`encode`], [`delta`], [`symbols`]): gzip'd protobuf in Go's shapes (and
//!   Go's `debug=1`/`debug=2` text), godeltaprof deltas, names from the symbol tables of the executable,
//!   shared objects and vDSO (DWARF lines when present).
//! - **No silent gaps** ([`notes`]): threads the CPU sampler could not arm and a heap region smaller than
//!   asked are named in the profile's comments, in a log line (through [`notes::set_log_sink`]) and in
//!   [`sampler_gaps`].
//! - **The pull surface** ([`pull`]): net/http/pprof's `/debug/pprof/` as a value-level handler — a path
//!   and query in, status, headers and body out; mount it in whatever serves HTTP.
//!
//! The crate opens no socket and depends on no HTTP, TLS or JSON crate.
//!
//! ## Ten lines
//! ```no_run
//! use nl6_profile::{heap::SamplingAllocator, labels::LabelSet, pull, threads};
//!
//! #[global_allocator]
//! static ALLOC: SamplingAllocator = SamplingAllocator::system();
//!
//! let surface = pull::PullSurface::new();
//! let busy = LabelSet::new([("role", "busy")]);
//! threads::spawn_labelled(busy, "busy", || loop { std::hint::black_box(1 + 1); })?;
//! // In your HTTP handler, for a request to /debug/pprof/<path>?<query>:
//! let answer = surface.handle(&pull::PullRequest::get("profile", "seconds=5"), &|| None);
//! assert_eq!(answer.status, 200); // answer.content_type, answer.headers, answer.body
//! # Ok::<(), std::io::Error>(())
//! ```
//! `examples/embed.rs` is the same with a `std::net::TcpListener` around it.
//!
//! The crate's README has one runnable example per feature (CPU, heap, every thread's stack, wall
//! clock, labels, labels across `.await`, the pull surface from async code, pool threads, signal
//! manners); they run as this crate's doc tests (`cargo test -p nl6-profile --doc`).
//!
//! ## Threads a pool spawns
//! Register them from the pool's start and stop hooks, so each is sampled from its first instruction
//! and its first sample holds its whole stack (tokio: `Builder::on_thread_start(threads::on_thread_start)`
//! and `on_thread_stop(threads::on_thread_stop)`):
//! ```
//! use nl6_profile::threads;
//!
//! let session = nl6_profile::cpu::start(100).expect("no other CPU profile runs");
//! let workers: Vec<_> = (0..2)
//!     .map(|_| {
//!         std::thread::spawn(|| {
//!             threads::on_thread_start(); // the pool's start hook
//!             let sum = (0..1_000_000u64).fold(0, |a, b| std::hint::black_box(a ^ b));
//!             threads::on_thread_stop(); // the pool's stop hook
//!             sum
//!         })
//!     })
//!     .collect();
//! for w in workers {
//!     w.join().unwrap();
//! }
//! let profile = session.stop();
//! println!("{} distinct stacks", profile.samples.len());
//! ```
//!
//! ## Preconditions
//! - **Linked into an executable, not a `cdylib`.** The signal handlers and the allocator read
//!   `const` thread-locals, which in an executable are `%fs`-relative loads; in a shared object they go
//!   through `__tls_get_addr`, which may allocate or lock and is not async-signal-safe.
//! - **Frame pointers**: build with `-C force-frame-pointers=yes` (the workspace's `.cargo/config.toml`
//!   does); without them stacks stop at the first frame that has none (and every profile says so:
//!   [`sight`]).
//! - **After `fork`, only `exec`** (or run nothing of this crate until the child has exec'd): the
//!   child has one thread, but the samplers' state (timers, the site table's mutex, the thread tables)
//!   describes the parent's. A program that must keep running in the child installs
//!   `pthread_atfork` handlers that stop profiling before the fork.
//! - The process's SIGPROF and the stack-capture signal (38 on glibc and musl alike, Debian's `RTMIN+4`;
//!   [`SignalOptions::capture_signal`] picks another) belong to the engine; call
//!   [`install_signal_handlers`] at startup so a stray one is ignored rather than fatal. A handler
//!   another owner installed first is refused with [`SignalError::Foreign`], not replaced, unless
//!   [`SignalOptions::take_foreign`] says to take it.
//! - Linux on x86_64 or aarch64, glibc or musl (the unwinder reads their signal contexts).
//!
//! ## Process-wide effects
//! Everything the engine does to the process beyond the calling thread, and when:
//!
//! | effect | when | for how long |
//! |---|---|---|
//! | SIGPROF handler (`SA_SIGINFO \| SA_RESTART \| SA_ONSTACK`) | first CPU profile or [`install_signal_handlers`] | the process's life (a late SIGPROF must not kill it) |
//! | stack-capture handler on signal 38 ([`SignalOptions::capture_signal`]) | first goroutine/thread dump or [`install_signal_handlers`] | the process's life |
//! | `EINTR` from calls signal(7) never restarts (`poll`, `nanosleep`, socket calls with a timeout) in any thread | while a CPU profile, a dump or a wall-clock profile signals threads (see [`wall`]: what an embedder's loops must do) | each signal |
//! | each thread's alternate signal stack replaced: `AT_MINSIGSTKSZ` + 16 KiB in pages (20 KiB on an AVX2 machine) and a guard page, mapped for the handlers | a thread spawned through [`threads::spawn_recorded`] (so `spawn_labelled`, `spawn_inheriting`), or calling [`threads::on_thread_start`] or [`threads::learn_own_stack`]; other threads keep theirs (std's 8 KiB) | until the thread exits (unmapped then) |
//! | one POSIX timer per thread (each holds one `RLIMIT_SIGPENDING` slot of the user) | a CPU profile | deleted when it stops |
//! | the collector thread `nl6-cpu-collect` (wakes every 100 ms, reads `/proc/self/task`) | a CPU profile | ends when it stops |
//! | a 2.1 MB static sample ring and 1.1 MB of thread-dump slots (128 frames each; zero pages until touched) | always (statics) | the process's life |
//! | 64 GiB of address space reserved (`PROT_NONE`, `MAP_NORESERVE`; less under `RLIMIT_AS`, down to 16 MiB), made writable as sampled blocks need it | the first heap sample (with [`heap::SamplingAllocator`] as the global allocator) | the process's life (never unmapped) |
//! | read-only maps of the executable, shared objects' files and their unwind tables | the first profile that names or unwinds | the process's life |
//! | one line on stderr when the executable lacks frame pointers, symbols or unwind rules ([`sight`]) | the first profile | once |
//!
//! Nothing else: no socket, no file written, no environment read, no `atexit` or fork hook, and no
//! signal handler restored or chained.
//!
//! ## Safety
//! The crate denies `unsafe` except in the modules that talk to the kernel or the allocator:
//! `signal`, `unwind`, `cpu`, `threads`, `heap` and `mapped` (each `unsafe` block carries a `// SAFETY:`
//! comment). Signal handlers never allocate, lock, panic or format (the contract is in `signal`).
#![deny(unsafe_code)]
#![warn(missing_docs)]
// Off Linux x86_64/aarch64 the samplers' machinery compiles but is never reached (entry points answer
// Unsupported first).
#![cfg_attr(
    not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )),
    allow(dead_code, unused_imports)
)]

pub(crate) mod builder;
#[allow(unsafe_code)]
pub mod cpu;
pub mod delta;
pub mod encode;
#[allow(unsafe_code)]
pub mod heap;
pub mod labels;
#[allow(unsafe_code)]
pub(crate) mod mapped;
pub(crate) mod maps;
pub mod notes;
pub mod proto;
#[cfg(test)]
mod proto_tests;
pub mod pull;
pub mod sight;
#[allow(unsafe_code)]
pub(crate) mod signal;
pub mod symbols;
#[allow(unsafe_code)]
pub mod threads;
pub use signal::{set_signal_options, signal_options, SignalError, SignalOptions};
#[allow(unsafe_code)]
pub(crate) mod unwind;
pub mod wall;

// The README's snippets run as this crate's doc tests (`cargo test --doc`), so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme_examples {}

/// Installs the SIGPROF and stack-capture handlers now, so a stray signal of either before the first
/// profile is ignored instead of killing the process (both default actions terminate). Called by the
/// binary at startup; the samplers install them anyway when they start. Refuses (naming the signal and
/// the handler's owner) when another owner's handler holds either signal, unless
/// [`SignalOptions::take_foreign`] allows taking it ([`set_signal_options`], before this call).
pub fn install_signal_handlers() -> Result<(), SignalError> {
    // The unwind rules are ready before the first stack is taken (a `threadcreate` record, a heap site).
    heap::unsampled(unwind::learn_code);
    cpu::install_handler()?;
    threads::install_handler()
}

/// Every sampler gap in force, as the texts the profiles' comments carry: the running (or last) CPU
/// session's unarmed threads, and the heap sampler's region when it is smaller than asked or absent.
/// Empty when the samplers see everything. For status views (nl6's `GET /api/v1/profiling`).
pub fn sampler_gaps() -> Vec<String> {
    let cpu = cpu::coverage().note().map(|n| format!("cpu profile: {n}"));
    cpu.into_iter().chain(heap::region_note()).collect()
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

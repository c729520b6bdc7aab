//! nl6: a lab tool that simulates network devices and profiles itself continuously, without eBPF.
//!
//! The lab ([`lab`]) runs SNMP agents, traps, syslog, NetFlow and scenarios on plain OS threads, each
//! labelled with the `subsystem` it works for. The profiling engine ([`nl6_profile`]) samples CPU with
//! per-thread CPU-time timers and frame-pointer unwinding, samples the heap with Go's formula, captures
//! every thread's stack, and writes pprof. A gate ([`gate`]), closed by default, decides whether profiles
//! are served on `/debug/pprof/` ([`api`]) and pushed to Pyroscope ([`push`]); [`http`] serves it all
//! with a poll thread and a fixed worker pool. `nl6 collect` ([`collect`]) and `nl6 report` ([`report`])
//! archive and compare profiles from a fleet; [`console`] is the web page; [`cli`] is the command line;
//! [`timefmt`] turns time into text; [`goflag`] holds the Go `flag` habits the command lines share;
//! [`fsutil`] writes files atomically; pprof's wire format is the engine's ([`nl6_profile::proto`]);
//! the URL splitter and the escaping of remote text are [`nl6_text`]'s (shared with the push crate);
//! [`ready`] is the one `poll(2)`.
//!
//! Threads with the gate closed: main (signals), the server's poll thread and 16 workers, the fleet's
//! loops. The gate open adds the CPU collector while a profile runs and `nl6-push` while pushing.
//! README.md and docs/ are the manual; ARCHITECTURE.md is the map.

pub mod api;
pub mod cli;
pub mod collect;
pub mod console;
pub mod dirfd;
pub mod fsutil;
pub mod gate;
pub mod goflag;
pub mod http;
pub mod jsonbody;
pub mod lab;
pub mod labels;
pub mod netsys;
pub mod probe;
pub mod push;
pub mod ready;
pub mod report;
#[cfg(test)]
mod testwall;
pub mod timefmt;

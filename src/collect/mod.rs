//! STUB: not built yet.

/// `nl6 collect …` (placeholder until the collector lands).
pub fn main(args: Vec<std::ffi::OsString>) -> i32 {
    let _ = args;
    eprintln!("nl6: collect: not built yet");
    2
}

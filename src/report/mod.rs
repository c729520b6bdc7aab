//! STUB: not built yet.

/// `nl6 report …` (placeholder until the reports land).
pub fn main(args: Vec<std::ffi::OsString>) -> i32 {
    let _ = args;
    eprintln!("nl6: report: not built yet");
    2
}

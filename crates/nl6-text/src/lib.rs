//! The text helpers nl6 and its push crate share, in a crate of their own so that neither has to reach
//! into the other for them: [`urlsplit`] (the one URL splitter) and [`logtext`] (remote text made safe
//! for a log line or a terminal). No dependencies, no I/O.
#![forbid(unsafe_code)]

pub mod logtext;
pub mod urlsplit;

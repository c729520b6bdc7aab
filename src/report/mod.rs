//! Reports from pprof profiles: the `go tool pprof -top` table ([`top_table`]), flame graph SVGs
//! ([`flamegraph_svg`]), and the difference of two profiles as a table ([`diff_table`], like
//! `go tool pprof -diff_base`) and as a differential flame graph ([`diff_flamegraph_svg`]).
//!
//! The same functions back `nl6 report` (see [`main`]), the collector's archive files and the web
//! console. They take decoded profiles and return text or bytes; only [`main`] touches files. A
//! profile nl6 did not write is read with [`limits::decode_untrusted`] (bounded gunzip, counted
//! before decoding, names and frames bounded), and the reports work on interned name ids, so their
//! memory follows the profile's distinct names, not its frames × name length. Value formatting follows google/pprof's `measurement` package and
//! the table follows its `report` package (function granularity, 0.5% node fraction, flat-then-name
//! order), so a table's rows read the same as `go tool pprof -top`'s for the same file.
#![forbid(unsafe_code)]

mod cli;
pub mod flame;
pub mod limits;
pub mod nodes;
#[cfg(test)]
pub(crate) mod testprofile;
pub mod top;
pub mod units;

pub use cli::{main, main_with, OpenError, Opener};
pub use flame::{diff_flamegraph_svg, flamegraph_svg, flamegraph_svg_for};
pub use limits::{decode_untrusted, ReadError};
pub use nodes::{default_sample_index, Node};
pub use top::{diff_rows, diff_table, top_table, DiffError, TooLargeToDraw, NO_SAMPLES};

use nl6_profile::proto::Profile;

/// The top table of `p` for the sample type `go tool pprof` picks by default.
pub fn default_top_table(p: &Profile) -> String {
    match default_sample_index(p) {
        Some(i) => top_table(p, i),
        None => format!("{NO_SAMPLES}: the profile has no sample types\n"),
    }
}

/// The diff table of `base` → `new` for `new`'s default sample type.
pub fn default_diff_table(base: &Profile, new: &Profile) -> Result<String, DiffError> {
    diff_table(
        base,
        new,
        default_sample_index(new).ok_or(DiffError::NoSampleType(0))?,
    )
}

/// The index of the sample type named by `spec`: a number, a type name (`alloc_space`), or a name
/// without its `inuse_` prefix, as pprof's `-sample_index` accepts.
pub fn sample_index_by_name(p: &Profile, spec: &str) -> Option<usize> {
    if let Ok(i) = spec.parse::<usize>() {
        return (i < p.sample_type.len()).then_some(i);
    }
    let short = spec.strip_prefix("inuse_").unwrap_or(spec);
    p.sample_type.iter().position(|t| {
        let name = nodes::string(p, t.r#type);
        name == spec || name == short
    })
}

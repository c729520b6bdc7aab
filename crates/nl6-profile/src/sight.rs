//! What the engine can see of the executable it profiles, and saying so when it cannot: whether the
//! executable's functions keep frame pointers (the share whose first bytes are `push rbp; mov rbp, rsp`,
//! as the unwinder's code map classified them), whether it has a symbol table, and whether it carries
//! unwind rules (`.eh_frame` or `.debug_frame`). A profile of an executable missing one of them says so
//! instead of silently holding short or unnamed stacks: one line on stderr the first time a profile
//! starts through the pull surface or any profile is built (`nl6-profile: …`; printed directly, not
//! through [`crate::notes`]' sink, so an embedder that set none still sees it once), and a pprof
//! `comment` in every profile (`go tool pprof -comments` shows it).
//!
//! Owns: the judgement and its wording ([`blind_spots`]). Never: runs in a signal handler; fails (an
//! executable that cannot be read is itself a blind spot, told the same way).
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// Below this share of functions setting up a frame pointer, the executable is taken as built without
/// them. A build with `-C force-frame-pointers=yes` is above 90 % (the rest: libc's and hand-written
/// assembly); one without is below 10 % (only functions that need a frame for other reasons).
const FP_SHARE_MIN_PERCENT: usize = 50;

/// What was found, and the sentences it gives.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sight {
    /// `(with a frame pointer, classified)` functions; `None` when none could be classified.
    frame_pointers: Option<(usize, usize)>,
    /// `(.symtab present, unwind rules present)`; `None` when the executable could not be read.
    carries: Option<(bool, bool)>,
}

impl Sight {
    fn blind_spots(&self) -> Vec<String> {
        let Some((symbols, unwind_rules)) = self.carries else {
            return vec![
                "the executable could not be read (/proc/self/exe): stacks are unchecked \
                         and functions unnamed"
                    .to_string(),
            ];
        };
        let mut out = Vec::new();
        match self.frame_pointers {
            Some((fp, all)) if fp * 100 < all * FP_SHARE_MIN_PERCENT => out.push(format!(
                "no frame pointers: {fp} of the executable's {all} functions ({} %) set one up, so \
                 stacks stop at the first frame without one; build with -C force-frame-pointers=yes",
                fp * 100 / all.max(1)
            )),
            _ => {}
        }
        if !symbols {
            out.push(
                "no symbol table (.symtab) in the executable: its functions are named by file \
                 offset and frames without a frame pointer are not recognised; keep the symbol \
                 table (strip debug info only, not --strip-all)"
                    .to_string(),
            );
        }
        if !unwind_rules {
            out.push(
                "no unwind rules (.eh_frame or .debug_frame) in the executable: code without a \
                 frame pointer cannot be unwound by its rules"
                    .to_string(),
            );
        }
        out
    }
}

fn sight() -> &'static Sight {
    static SIGHT: OnceLock<Sight> = OnceLock::new();
    SIGHT.get_or_init(|| {
        super::heap::unsampled(|| Sight {
            frame_pointers: super::unwind::frame_pointer_census(),
            carries: super::symbols::Symbolizer::global().and_then(|s| s.executable_carries()),
        })
    })
}

/// What profiles of this executable cannot see, one sentence each (empty when it has frame pointers, a
/// symbol table and unwind rules). Every profile carries them as comments.
pub fn blind_spots() -> &'static [String] {
    static SPOTS: OnceLock<Vec<String>> = OnceLock::new();
    SPOTS.get_or_init(|| super::heap::unsampled(|| sight().blind_spots()))
}

/// Writes the one stderr line (the first time only, and only when something is missing).
pub(crate) fn tell_once() {
    static TOLD: AtomicBool = AtomicBool::new(false);
    let spots = blind_spots();
    if spots.is_empty() || TOLD.swap(true, Ordering::Relaxed) {
        return;
    }
    eprintln!(
        "nl6-profile: profiles of this executable are partly blind: {}",
        spots.join("; ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_missing_part_gives_one_sentence() {
        let seen = |frame_pointers, carries| Sight {
            frame_pointers,
            carries,
        };
        assert!(seen(Some((950, 1000)), Some((true, true)))
            .blind_spots()
            .is_empty());
        let spots = seen(Some((30, 1000)), Some((true, true))).blind_spots();
        assert_eq!(spots.len(), 1);
        assert!(
            spots[0].starts_with("no frame pointers: 30 of the executable's 1000 functions (3 %)")
        );
        let spots = seen(None, Some((false, true))).blind_spots();
        assert_eq!(spots.len(), 1);
        assert!(spots[0].starts_with("no symbol table"), "{spots:?}");
        let spots = seen(Some((900, 1000)), Some((true, false))).blind_spots();
        assert!(spots[0].starts_with("no unwind rules"), "{spots:?}");
        let spots = seen(None, None).blind_spots();
        assert!(spots[0].contains("could not be read"), "{spots:?}");
    }

    #[test]
    fn this_test_binary_is_not_blind() {
        // Built with the workspace's flags: frame pointers, symbol table, .eh_frame.
        assert_eq!(blind_spots(), &[] as &[String], "{:?}", sight());
        let (fp, all) = sight().frame_pointers.expect("functions classified");
        eprintln!("FIGURE this test binary: {fp} of {all} functions set up a frame pointer");
        assert!(
            fp * 100 >= all * 90,
            "{fp} of {all} functions keep a frame pointer"
        );
    }
}

//! Stop frames: where a walk cannot prove the next caller it ends with one synthetic entry naming why,
//! instead of a guess. The entry is an address no user code can have (top 12 bits set) carrying the reason,
//! the object and the offset; the symbolizer names it (`[unwind: no rule for libc.so.6+0x1234]`) in every
//! profile and thread dump. The low byte is `0x80` and ignored when decoding, so `addr - 1` (how return
//! addresses are looked up) names the same stop.
//!
//! Never: allocates on the encoding side (handlers call [`stop_entry`]); [`stop_name`] runs outside handlers.

/// Why a walk stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Stop {
    /// No CFI covers the instruction, and its function keeps no frame pointer.
    NoRule = 1,
    /// CFI exists in a form the walk does not evaluate.
    Unsupported = 2,
    /// A return address outside every known code object.
    OutsideCode = 3,
    /// The caller's frame would lie outside the thread's stack (or not above the callee's).
    OffStack = 4,
    /// The frame pointer is not a frame of this stack.
    FramePointerLost = 5,
    /// The thread's stack bounds are unknown (a foreign thread's first sample): only the leaf is read.
    NoBounds = 6,
    /// More frames than a stack records.
    TooDeep = 7,
    /// A zero return address before any thread entry.
    ZeroReturn = 8,
}

const TAG: u64 = 0xfff;

/// The stop entry for `why` at `obj`+`off`.
#[inline]
pub(crate) fn stop_entry(why: Stop, obj: u8, off: u32) -> u64 {
    (TAG << 52) | ((why as u64) << 48) | ((obj as u64) << 40) | ((off as u64) << 8) | 0x80
}

/// The reason, object and offset of a stop entry (`addr` or `addr - 1`); `None` for a real address.
pub(crate) fn decode(addr: u64) -> Option<(Stop, u8, u32)> {
    if addr >> 52 != TAG {
        return None;
    }
    let why = match (addr >> 48) & 0xf {
        1 => Stop::NoRule,
        2 => Stop::Unsupported,
        3 => Stop::OutsideCode,
        4 => Stop::OffStack,
        5 => Stop::FramePointerLost,
        6 => Stop::NoBounds,
        7 => Stop::TooDeep,
        8 => Stop::ZeroReturn,
        _ => return None,
    };
    Some((why, (addr >> 40) as u8, (addr >> 8) as u32))
}

/// The frame name of a stop entry, e.g. `[unwind: no rule for libc.so.6+0x1234]`; `None` for a real
/// address.
pub(crate) fn stop_name(addr: u64) -> Option<String> {
    let (why, obj, off) = decode(addr)?;
    let at = || {
        let name = super::learn::object_name(obj as usize).unwrap_or_else(|| "?".into());
        format!("{name}+{off:#x}")
    };
    Some(match why {
        Stop::NoRule => format!("[unwind: no rule for {}]", at()),
        Stop::Unsupported => format!("[unwind: rule not supported at {}]", at()),
        Stop::OutsideCode => "[unwind: return address outside the code]".into(),
        Stop::OffStack => format!("[unwind: caller's frame off the stack at {}]", at()),
        Stop::FramePointerLost => format!("[unwind: frame pointer lost at {}]", at()),
        Stop::NoBounds => "[unwind: stack bounds not known yet]".into(),
        Stop::TooDeep => "[unwind: deeper than the recorded frames]".into(),
        Stop::ZeroReturn => format!("[unwind: zero return address at {}]", at()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_entries_round_trip_and_survive_the_return_address_adjustment() {
        let a = stop_entry(Stop::NoRule, 3, 0x1234_5678);
        assert_eq!(decode(a), Some((Stop::NoRule, 3, 0x1234_5678)));
        assert_eq!(decode(a - 1), decode(a));
        assert_eq!(decode(0x7fff_ffff_f000), None);
        assert_eq!(decode(0), None);
        let n = stop_name(stop_entry(Stop::TooDeep, 0, 0)).unwrap();
        assert!(n.starts_with("[unwind: deeper"), "{n}");
    }
}

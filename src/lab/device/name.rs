//! Device names derived from the index (`nl6-dev-0007`), never stored: formatting one is a few digit
//! writes on the stack, parsing one back gives the index at once, and a name prefix maps to index ranges
//! (one per digit count), so lookups, counts and pages cost no walk over the fleet.
#![forbid(unsafe_code)]

use std::fmt;
use std::ops::Range;

/// What every device name starts with.
pub const NAME_PREFIX: &str = "nl6-dev-";
/// Digits of the shortest index part (`0007`).
const MIN_DIGITS: u32 = 4;
/// Longest name: the prefix and the 20 digits of `u64::MAX`.
const MAX_LEN: usize = NAME_PREFIX.len() + 20;

/// A device's name, on the stack; derefs to `str`.
#[derive(Clone, Copy)]
pub struct DeviceName {
    buf: [u8; MAX_LEN],
    len: u8,
}

impl DeviceName {
    /// The name of device `index`: the prefix and the index in at least four digits.
    pub fn of(index: usize) -> DeviceName {
        let mut buf = [0u8; MAX_LEN];
        buf[..NAME_PREFIX.len()].copy_from_slice(NAME_PREFIX.as_bytes());
        let mut digits = [0u8; 20];
        let (mut n, mut k) = (index as u64, 0);
        while n > 0 || k < MIN_DIGITS as usize {
            digits[k] = b'0' + (n % 10) as u8;
            n /= 10;
            k += 1;
        }
        for (j, d) in digits[..k].iter().rev().enumerate() {
            buf[NAME_PREFIX.len() + j] = *d;
        }
        DeviceName {
            buf,
            len: (NAME_PREFIX.len() + k) as u8,
        }
    }
    pub fn as_str(&self) -> &str {
        // Only ASCII digits and the ASCII prefix are ever written.
        std::str::from_utf8(&self.buf[..self.len as usize]).unwrap_or_default()
    }
}

impl std::ops::Deref for DeviceName {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for DeviceName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for DeviceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for DeviceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq<str> for DeviceName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for DeviceName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for DeviceName {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl From<DeviceName> for String {
    fn from(n: DeviceName) -> String {
        n.as_str().to_string()
    }
}

impl serde::Serialize for DeviceName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The index of the device named exactly `name` (as [`DeviceName::of`] writes it), if any.
pub fn index_of(name: &str) -> Option<usize> {
    let digits = name.strip_prefix(NAME_PREFIX)?;
    if digits.len() < MIN_DIGITS as usize || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let index: usize = digits.parse().ok()?;
    (DeviceName::of(index) == name).then_some(index)
}

/// The index ranges, ascending, of the devices among `devices` whose name starts with `prefix` (ASCII
/// case ignored): a name of `w` digits starting with the digits `D` (k of them) is an index in
/// `[D·10^(w-k), (D+1)·10^(w-k))`, within the indices that take `w` digits.
pub fn prefix_ranges(prefix: &str, devices: usize) -> Vec<Range<usize>> {
    let p = prefix.to_ascii_lowercase();
    if NAME_PREFIX.starts_with(&p) {
        return std::iter::once(0..devices).collect();
    }
    let Some(digits) = p.strip_prefix(NAME_PREFIX) else {
        return Vec::new();
    };
    if digits.len() > 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Vec::new();
    }
    let (k, d) = (digits.len() as u32, digits.parse::<u128>().unwrap_or(0));
    let n = devices as u128;
    let mut out = Vec::new();
    for w in MIN_DIGITS.max(k)..=20 {
        let lo_w = if w == MIN_DIGITS {
            0
        } else {
            10u128.pow(w - 1)
        };
        if lo_w >= n {
            break;
        }
        let hi_w = 10u128.pow(w).min(n);
        let scale = 10u128.pow(w - k);
        let (lo, hi) = ((d * scale).max(lo_w), ((d + 1) * scale).min(hi_w));
        if lo < hi {
            out.push(lo as usize..hi as usize);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_to_their_index() {
        for i in [0, 7, 9999, 10_000, 123_456, 9_999_999, usize::MAX] {
            let n = DeviceName::of(i);
            assert_eq!(index_of(&n), Some(i), "{n}");
        }
        assert_eq!(DeviceName::of(7), "nl6-dev-0007");
        assert_eq!(DeviceName::of(12345).to_string(), "nl6-dev-12345");
        for bad in [
            "nl6-dev-07",
            "nl6-dev-00007",
            "nl6-dev-",
            "NL6-dev-0001",
            "nl6-dev-00a1",
        ] {
            assert_eq!(index_of(bad), None, "{bad}");
        }
    }

    /// The ranges against the plain filter over every name, for several fleet sizes and prefixes.
    #[test]
    fn prefix_ranges_match_the_names_they_stand_for() {
        for devices in [0, 1, 9, 10_000, 10_001, 23_456] {
            for prefix in [
                "",
                "n",
                "NL6-DEV-",
                "nl6-dev-0",
                "nl6-dev-1",
                "nl6-dev-12",
                "nl6-dev-0001",
                "nl6-dev-00010",
                "nl6-dev-2345",
                "nl6-dev-23456",
                "nl6-dev-x",
                "other",
                "nl6-dev-999999999999999999999",
            ] {
                let want: Vec<usize> = (0..devices)
                    .filter(|&i| {
                        let n = DeviceName::of(i);
                        n.len() >= prefix.len() && n[..prefix.len()].eq_ignore_ascii_case(prefix)
                    })
                    .collect();
                let got: Vec<usize> = prefix_ranges(prefix, devices)
                    .into_iter()
                    .flatten()
                    .collect();
                assert_eq!(got, want, "{devices} devices, prefix {prefix:?}");
            }
        }
    }
}

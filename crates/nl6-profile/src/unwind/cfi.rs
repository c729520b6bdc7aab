//! Turning an object's CFI into the rows of its rule table (outside any handler).
//!
//! Reads `.eh_frame` (what the toolchains emit for Rust, glibc, ld.so and the vDSO) and `.debug_frame`
//! (what musl's `libc.a` brings into the static binary) with gimli, evaluates each FDE's rows for the three
//! registers a walk follows (CFA from RSP or RBP, RBP, the return address) and yields `(address, Rule)`
//! rows sorted by address: a row holds until the next one; an FDE's end is a `NONE` row unless another FDE
//! starts there. Where both sections describe a function, `.eh_frame` wins. Functions named as thread
//! entries ([`ROOT_NAMES`]) are painted `ROOT` over their whole range, as is every row whose return address
//! the CFI leaves undefined (glibc's `clone3` child, `_start`).
//!
//! Never: touches a handler's state; it only returns rows ([`super::learn`] stores and publishes them).
use addr2line::gimli::{
    self, BaseAddresses, CfaRule, CieOrFde, RegisterRule, UnwindContext, UnwindSection, X86_64,
};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

use super::rules::{kind, rbp, Rule};

/// Functions that start a thread or the process: the stack ends in them. musl: `__clone` (every thread),
/// `libc_start_main_stage2` (the main thread: `__libc_start_main` reaches it by an indirect tail jump),
/// `_start`/`_start_c`/`__libc_start_main`; glibc: `clone3`/`clone` and `start_thread`
/// (threads), `_start`/`__libc_start_main` (the main thread; its CFI also ends there).
pub(crate) const ROOT_NAMES: &[&str] = &[
    "__clone",
    "clone",
    "__clone3",
    "clone3",
    "start_thread",
    "_start",
    "_start_c",
    "__libc_start_main",
    "libc_start_main_stage2",
    "__libc_start_call_main",
];

type R<'a> = gimli::EndianSlice<'a, gimli::LittleEndian>;

/// One FDE's rows at file addresses: `[start, end)` and its `(address, rule)` changes.
struct Span {
    start: u64,
    end: u64,
    rows: Vec<(u64, Rule)>,
}

/// The rule of one CFI row for the walk's registers.
fn rule_of(row: &gimli::UnwindTableRow<usize>) -> Rule {
    let unsupported = Rule {
        kind: kind::UNSUPPORTED,
        ..Rule::default()
    };
    match row.register(X86_64::RA) {
        RegisterRule::Undefined => {
            return Rule {
                kind: kind::ROOT,
                ..Rule::default()
            }
        }
        RegisterRule::Offset(-8) => {}
        _ => return unsupported,
    }
    let (k, off) = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } if *register == X86_64::RSP => {
            (kind::CFA_RSP, *offset)
        }
        CfaRule::RegisterAndOffset { register, offset } if *register == X86_64::RBP => {
            (kind::CFA_RBP, *offset)
        }
        _ => return unsupported,
    };
    let Ok(cfa_off) = i32::try_from(off) else {
        return unsupported;
    };
    let (r, rbp_off) = match row.register(X86_64::RBP) {
        RegisterRule::Undefined | RegisterRule::SameValue => (rbp::SAME, 0),
        RegisterRule::Offset(o) => match i16::try_from(o) {
            Ok(o) => (rbp::SAVED, o),
            Err(_) => (rbp::LOST, 0),
        },
        _ => (rbp::LOST, 0),
    };
    Rule {
        kind: k,
        rbp: r,
        rbp_off,
        cfa_off,
    }
}

/// Every FDE of `section` as spans (FDEs that fail to parse are skipped: their functions get no rule).
fn spans_of<'a, S>(section: &S, bases: &BaseAddresses, out: &mut Vec<Span>)
where
    S: UnwindSection<R<'a>>,
{
    let mut ctx = UnwindContext::<usize>::new();
    let mut entries = section.entries(bases);
    while let Ok(Some(entry)) = entries.next() {
        let CieOrFde::Fde(partial) = entry else {
            continue;
        };
        let Ok(fde) = partial.parse(|s, b, o| s.cie_from_offset(b, o)) else {
            continue;
        };
        let Ok(mut table) = fde.rows(section, bases, &mut ctx) else {
            continue;
        };
        let mut rows = Vec::new();
        while let Ok(Some(row)) = table.next_row() {
            rows.push((row.start_address(), rule_of(row)));
        }
        if !rows.is_empty() {
            out.push(Span {
                start: fde.initial_address(),
                end: fde.end_address(),
                rows,
            });
        }
    }
}

/// The FDE spans of an ELF image, `.eh_frame`'s first.
fn spans(obj: &object::File) -> Vec<Span> {
    let mut out = Vec::new();
    let addr = |name: &str| obj.section_by_name(name).map(|s| s.address());
    if let Some(sec) = obj.section_by_name(".eh_frame") {
        if let Ok(data) = sec.data() {
            let mut bases = BaseAddresses::default().set_eh_frame(sec.address());
            if let Some(a) = addr(".text") {
                bases = bases.set_text(a);
            }
            if let Some(a) = addr(".eh_frame_hdr") {
                bases = bases.set_eh_frame_hdr(a);
            }
            if let Some(a) = addr(".got") {
                bases = bases.set_got(a);
            }
            let eh = gimli::EhFrame::new(data, gimli::LittleEndian);
            spans_of(&eh, &bases, &mut out);
        }
    }
    if let Some(data) = obj
        .section_by_name(".debug_frame")
        .and_then(|s| s.data().ok())
    {
        let mut df = gimli::DebugFrame::new(data, gimli::LittleEndian);
        df.set_address_size(8);
        spans_of(&df, &BaseAddresses::default(), &mut out);
    }
    out.extend(plt_span(obj));
    out
}

/// The lazy-binding `.plt` of a dynamically linked object, which the linker may leave without CFI (calls
/// to `memset@plt` from Rust land there): checked to be the standard x86-64 layout (16-byte entries, each
/// `jmp [rip+d]; push n; jmp PLT0`), its rows are those the linker would emit — in PLT0 CFA = RSP + 16,
/// + 24 after its `push`; in an entry CFA = RSP + 8, + 16 after its `push`. Any other layout gets no rows.
fn plt_span(obj: &object::File) -> Option<Span> {
    let sec = obj.section_by_name(".plt")?;
    let (start, data) = (sec.address(), sec.data().ok()?);
    let standard = data.len() >= 32
        && data.len().is_multiple_of(16)
        && data[..2] == [0xff, 0x35]
        && data[6..8] == [0xff, 0x25]
        && data[16..]
            .chunks(16)
            .all(|e| e[..2] == [0xff, 0x25] && e[6] == 0x68 && e[11] == 0xe9);
    if !standard {
        return None;
    }
    let rsp = |off: i32| Rule {
        kind: kind::CFA_RSP,
        rbp: rbp::SAME,
        rbp_off: 0,
        cfa_off: off,
    };
    let mut rows = vec![(start, rsp(16)), (start + 6, rsp(24))];
    for e in (start + 16..start + data.len() as u64).step_by(16) {
        rows.extend([(e, rsp(8)), (e + 11, rsp(16))]);
    }
    Some(Span {
        start,
        end: start + data.len() as u64,
        rows,
    })
}

/// A symbol of code: a function, or an untyped label (crt1's `_start` is one).
fn is_code(s: &object::Symbol) -> bool {
    matches!(
        s.kind(),
        SymbolKind::Text | SymbolKind::Unknown | SymbolKind::Label
    ) && s.address() != 0
        && s.section_index().is_some()
}

/// File-address ranges of the functions named in [`ROOT_NAMES`].
/// A symbol without a size (musl's hand-written `__clone`) ends where the next function starts.
fn root_ranges(obj: &object::File) -> Vec<(u64, u64)> {
    let mut starts: Vec<u64> = obj
        .symbols()
        .chain(obj.dynamic_symbols())
        .filter(|s| is_code(s))
        .map(|s| s.address())
        .collect();
    starts.sort_unstable();
    starts.dedup();
    let next = |a: u64| starts.get(starts.partition_point(|&s| s <= a)).copied();
    let mut out: Vec<(u64, u64)> = obj
        .symbols()
        .chain(obj.dynamic_symbols())
        .filter(|s| is_code(s))
        .filter(|s| s.name().is_ok_and(|n| ROOT_NAMES.contains(&n)))
        .filter_map(|s| match s.size() {
            0 => next(s.address()).map(|e| (s.address(), e)),
            n => Some((s.address(), s.address() + n)),
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The rows of `obj`'s table at runtime addresses (file address + `bias`), sorted, each rule different
/// from the one before.
pub(crate) fn rows(obj: &object::File, bias: u64) -> Vec<(u64, Rule)> {
    let mut spans = spans(obj);
    // Stable: for equal starts `.eh_frame`'s span stays first and wins.
    spans.sort_by_key(|s| s.start);
    let roots = root_ranges(obj);
    let root = Rule {
        kind: kind::ROOT,
        ..Rule::default()
    };
    let mut out: Vec<(u64, Rule)> = Vec::new();
    let mut covered_to = 0u64;
    for (i, span) in spans.iter().enumerate() {
        if span.start < covered_to || span.end <= span.start {
            continue;
        }
        out.extend(span.rows.iter().filter(|(a, _)| *a < span.end));
        let next = spans.get(i + 1).map(|s| s.start);
        if next != Some(span.end) {
            out.push((span.end, Rule::default()));
        }
        covered_to = span.end;
    }
    out.sort_by_key(|r| r.0);
    // For equal addresses the last pushed wins (an FDE's row over the previous FDE's end).
    let mut merged: Vec<(u64, Rule)> = Vec::with_capacity(out.len());
    for (a, r) in out {
        match merged.last_mut() {
            Some(last) if last.0 == a => last.1 = r,
            _ => merged.push((a, r)),
        }
    }
    // Thread entries end the stack over their whole range, whatever their CFI says.
    for &(s, e) in &roots {
        let at = merged.partition_point(|r| r.0 <= e);
        let after = at.checked_sub(1).map_or(Rule::default(), |i| merged[i].1);
        let has_end = at > 0 && merged[at - 1].0 == e;
        merged.retain(|r| r.0 < s || r.0 >= e);
        merged.push((s, root));
        if !has_end {
            merged.push((e, after));
        }
        merged.sort_by_key(|r| r.0);
    }
    merged.dedup_by(|b, a| a.1 == b.1);
    merged
        .into_iter()
        .map(|(a, r)| (a.wrapping_add(bias), r))
        .collect()
}

// x86_64's register numbers and PLT stubs; aarch64 walks frame records.
#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// The test binary's own CFI (a dynamically linked glibc or static musl test executable): Rust
    /// functions keep a frame pointer, so most rows are the three of a standard prologue.
    #[test]
    fn the_running_test_binary_has_rows_for_its_functions() {
        let data = std::fs::read("/proc/self/exe").expect("read self");
        let obj = object::File::parse(&*data).expect("parse self");
        let rows = rows(&obj, 0);
        assert!(rows.len() > 1000, "only {} rows", rows.len());
        assert!(rows.windows(2).all(|w| w[0].0 < w[1].0), "sorted, distinct");
        assert!(rows.windows(2).all(|w| w[0].1 != w[1].1), "deduplicated");
        let f = the_running_test_binary_has_rows_for_its_functions as *const () as u64;
        // At a function's entry the return address is at [rsp]: CFA = RSP + 8 (file address = runtime
        // address minus the load bias, which the symbol table gives).
        let sym = obj
            .symbols()
            .find(|s| {
                s.name()
                    .is_ok_and(|n| n.contains("the_running_test_binary_has_rows_for_its_functions"))
            })
            .expect("own symbol");
        let bias = f - sym.address();
        let at = |a: u64| {
            let i = rows.partition_point(|r| r.0 <= a - bias);
            rows[i - 1].1
        };
        let entry = at(f);
        assert_eq!((entry.kind, entry.cfa_off), (kind::CFA_RSP, 8), "{entry:?}");
        let body = at(f + 16);
        assert_eq!(
            (body.kind, body.cfa_off, body.rbp, body.rbp_off),
            (kind::CFA_RBP, 16, rbp::SAVED, -16),
            "{body:?}"
        );
    }

    /// A glibc test executable calls `memset`/`_Unwind_Resume` through a lazy `.plt` the linker leaves
    /// without CFI: every byte of it gets a rule (an entry's CFA is RSP + 8, + 16 after its `push`).
    #[test]
    fn the_plt_has_rules_where_the_linker_left_none() {
        let data = std::fs::read("/proc/self/exe").expect("read self");
        let obj = object::File::parse(&*data).expect("parse self");
        if cfg!(target_env = "musl") {
            // A static musl test binary links no shared object: any `.plt` it has holds no lazy
            // binding stubs, so it gets no rows (and needs none: nothing calls through it lazily).
            return;
        }
        let plt = obj
            .section_by_name(".plt")
            .expect("a glibc test binary has a .plt");
        let rows = rows(&obj, 0);
        let at = |a: u64| rows[rows.partition_point(|r| r.0 <= a) - 1].1;
        let entry = plt.address() + 16;
        assert_eq!((at(entry).kind, at(entry).cfa_off), (kind::CFA_RSP, 8));
        assert_eq!(
            (at(entry + 10).kind, at(entry + 10).cfa_off),
            (kind::CFA_RSP, 8)
        );
        assert_eq!(
            (at(entry + 11).kind, at(entry + 11).cfa_off),
            (kind::CFA_RSP, 16)
        );
        let last = plt.address() + plt.size() - 1;
        assert_eq!((at(last).kind, at(last).cfa_off), (kind::CFA_RSP, 16));
    }
}

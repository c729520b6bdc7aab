//! The caller verifier: checks every edge of every stack of a profile against the machine code of the
//! live process that produced it, independently of the engine's unwinder.
//!
//! For each caller (every stack entry after the leaf, a return address `ra`), the bytes just before `ra`
//! (read from `/proc/PID/mem`) must encode a `call`:
//! - `e8 rel32` (direct) or `ff 15 disp32` (through a GOT slot, read from the live process): the target
//!   must lead to the callee, i.e. lie in the callee's function (the symbol table's), or be a stub one
//!   step away — its first instruction (after `endbr64`/`bnd`) a `jmp rel32`/`jmp rel8`/`jmp [rip+d]` into
//!   the callee's function — or a tail call one step away (from the target's function, or from the
//!   function its stub jumps to), or a chain of at most [`TAIL_HOPS`] such tail jumps
//!   (`__rust_dealloc` → `free` → `__libc_free`): the target's function holds a `jmp rel32` or
//!   `jmp [rip+d]` to the callee function's first byte; or a function on that chain holds an indirect
//!   tail jump, whose target the code does not name (accepted as indirect calls are): `jmp [reg+disp]`
//!   (a vtable slot), or `jmp reg` right after its epilogue (`Formatter::pad` tail-calling `write_str`)
//!   or right after that register was loaded from a slot (`mov reg, [reg2+disp]`: the frameless
//!   `<Formatter as fmt::Write>::write_str` of the static musl std jumps so into `String`'s);
//! - any other `ff /2` form (indirect): a call, whose target the code does not name (accepted).
//!
//! Anything else is a **fabricated** edge. A stack must end in a thread root (the last frame's function
//! is one of [`ROOTS`], looked up in the object's own symbol table or its debug file) or in an honest stop
//! frame (a location named `[unwind: …]`); otherwise it is **unended**.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use nl6_profile::proto::Profile;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

/// Tail jumps a chain may take between a call's target and the callee (`__rust_dealloc` → `free` →
/// `__libc_free` in the static musl build).
const TAIL_HOPS: usize = 3;

/// Functions a thread's (or the process's) stack starts in, in musl and glibc.
pub const ROOTS: &[&str] = &[
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

/// A function: `[start, end)` and its name.
#[derive(Debug, Clone)]
struct Func {
    start: u64,
    end: u64,
    name: String,
}

/// The live process: its memory and every executable object's functions at runtime addresses.
pub struct Process {
    mem: File,
    funcs: Vec<Func>,
    /// `[start, end)` of executable mappings.
    exec: Vec<(u64, u64)>,
}

fn symbols_of(obj: &object::File, bias: u64, out: &mut Vec<Func>) {
    for s in obj.symbols().chain(obj.dynamic_symbols()) {
        // Functions, and untyped labels in code (crt1's `_start`).
        let code = match s.section_index().and_then(|i| obj.section_by_index(i).ok()) {
            Some(sec) => sec.kind() == object::SectionKind::Text,
            None => false,
        };
        let label = matches!(s.kind(), SymbolKind::Unknown | SymbolKind::Label) && code;
        if !(s.kind() == SymbolKind::Text || label) || s.address() == 0 {
            continue;
        }
        let Ok(name) = s.name() else { continue };
        out.push(Func {
            start: s.address().wrapping_add(bias),
            end: s.address().wrapping_add(bias).wrapping_add(s.size()),
            name: name.to_string(),
        });
    }
}

/// The debug file of an object (Debian's `/usr/lib/debug/.build-id/xx/rest.debug`), if installed.
fn debug_file(obj: &object::File) -> Option<Vec<u8>> {
    let id = obj.build_id().ok()??;
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::read(format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &hex[..2],
        &hex[2..]
    ))
    .ok()
}

impl Process {
    /// Reads process `pid`'s map, memory and symbol tables.
    pub fn open(pid: u32) -> Process {
        let mem = File::open(format!("/proc/{pid}/mem")).expect("open /proc/PID/mem");
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("exe");
        let mut exec = Vec::new();
        let mut bases: BTreeMap<String, u64> = BTreeMap::new();
        let mut paths: Vec<String> = Vec::new();
        for line in maps.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (range, perms, offset) = (f[0], f[1], f[2]);
            let path = f.get(5..).map(|p| p.join(" ")).unwrap_or_default();
            let (lo, hi) = range.split_once('-').unwrap();
            let (lo, hi) = (
                u64::from_str_radix(lo, 16).unwrap(),
                u64::from_str_radix(hi, 16).unwrap(),
            );
            if offset.trim_start_matches('0').is_empty() && !bases.contains_key(&path) {
                bases.insert(path.clone(), lo);
            }
            if perms.contains('x') {
                exec.push((lo, hi));
                if !paths.contains(&path) {
                    paths.push(path);
                }
            }
        }
        let mut funcs = Vec::new();
        for path in &paths {
            let base = bases[path];
            let bytes = if path == "[vdso]" {
                let (lo, hi) = *exec.iter().find(|e| e.0 == base).unwrap();
                let mut b = vec![0u8; (hi - lo) as usize];
                mem.read_exact_at(&mut b, lo).expect("read vdso");
                b
            } else if path.starts_with('/') {
                let p = if std::path::Path::new(path) == exe {
                    format!("/proc/{pid}/exe")
                } else {
                    path.trim_end_matches(" (deleted)").to_string()
                };
                std::fs::read(p).expect("read object")
            } else {
                continue;
            };
            let obj = object::File::parse(&*bytes).expect("parse object");
            let first = obj.segments().map(|s| s.address()).min().unwrap() & !0xfff;
            let bias = base.wrapping_sub(first);
            symbols_of(&obj, bias, &mut funcs);
            if let Some(dbg) = debug_file(&obj) {
                if let Ok(d) = object::File::parse(&*dbg) {
                    symbols_of(&d, bias, &mut funcs);
                }
            }
            // Sections with code but no symbols (a PLT) become one pseudo-function each.
            for s in obj.sections() {
                let n = s.name().unwrap_or("");
                if n.starts_with(".plt") {
                    funcs.push(Func {
                        start: s.address() + bias,
                        end: s.address() + bias + s.size(),
                        name: n.to_string(),
                    });
                }
            }
        }
        funcs.sort_by_key(|f| (f.start, std::cmp::Reverse(f.end)));
        // Zero-sized symbols (hand-written assembly) end where the next function starts.
        for i in 0..funcs.len() {
            if funcs[i].end <= funcs[i].start {
                let next = funcs[i + 1..]
                    .iter()
                    .find(|g| g.start > funcs[i].start)
                    .map_or(funcs[i].start + 1, |g| g.start);
                funcs[i].end = next;
            }
        }
        Process { mem, funcs, exec }
    }

    fn read(&self, at: u64, n: usize) -> Option<Vec<u8>> {
        let mut b = vec![0u8; n];
        self.mem.read_exact_at(&mut b, at).ok().map(|_| b)
    }

    fn word(&self, at: u64) -> Option<u64> {
        self.read(at, 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    }

    /// The innermost (smallest) function containing `a`.
    fn func(&self, a: u64) -> Option<&Func> {
        let i = self.funcs.partition_point(|f| f.start <= a);
        self.funcs[..i]
            .iter()
            .rev()
            .take(64)
            .filter(|f| a < f.end)
            .min_by_key(|f| f.end - f.start)
    }

    fn in_code(&self, a: u64) -> bool {
        self.exec.iter().any(|&(lo, hi)| lo <= a && a < hi)
    }

    /// Where the jump at `t` goes, if `t` starts with a jump (after `endbr64` and a `bnd` prefix).
    fn jump_at(&self, mut t: u64) -> Option<u64> {
        let b = self.read(t, 16)?;
        let mut i = 0;
        if b[..4] == [0xf3, 0x0f, 0x1e, 0xfa] {
            i = 4;
        }
        if b[i] == 0xf2 {
            i += 1;
        }
        t += i as u64;
        let rel32 = |k: usize| i32::from_le_bytes(b[k..k + 4].try_into().unwrap()) as i64 as u64;
        match (b[i], b[i + 1]) {
            (0xe9, _) => Some(t.wrapping_add(5).wrapping_add(rel32(i + 1))),
            (0xeb, _) => Some(t.wrapping_add(2).wrapping_add(b[i + 1] as i8 as i64 as u64)),
            (0xff, 0x25) => self.word(t.wrapping_add(6).wrapping_add(rel32(i + 2))),
            _ => None,
        }
    }

    /// The function starts function `f` jumps to (`jmp rel32`, `jmp [rip+d]` through a GOT slot): its
    /// tail calls.
    fn tail_targets(&self, f: &Func) -> Vec<u64> {
        let Some(code) = self.read(f.start, (f.end - f.start).min(1 << 16) as usize) else {
            return Vec::new();
        };
        let rel = |o: usize| {
            code.get(o..o + 4)
                .map(|r| i32::from_le_bytes(r.try_into().unwrap()) as i64 as u64)
        };
        let mut out: Vec<u64> = (0..code.len())
            .filter_map(|k| {
                let at = f.start + k as u64;
                match code[k] {
                    0xe9 => rel(k + 1).map(|r| at.wrapping_add(5).wrapping_add(r)),
                    0xff if code.get(k + 1) == Some(&0x25) => {
                        rel(k + 2).and_then(|r| self.word(at.wrapping_add(6).wrapping_add(r)))
                    }
                    _ => None,
                }
            })
            .filter(|&t| t != f.start && self.func(t).is_some_and(|g| g.start == t))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The functions reached from `f` (itself included) by at most [`TAIL_HOPS`] tail jumps.
    fn tail_reach(&self, f: &Func) -> Vec<u64> {
        let mut frontier = vec![f.start];
        let mut seen = frontier.clone();
        for _ in 0..TAIL_HOPS {
            let mut next = Vec::new();
            for start in &frontier {
                let Some(g) = self.func(*start) else { continue };
                for t in self.tail_targets(g) {
                    if !seen.contains(&t) {
                        seen.push(t);
                        next.push(t);
                    }
                }
            }
            frontier = next;
        }
        seen
    }

    /// Whether a call to `target` leads to code at `pc` (see the module doc).
    fn leads_to(&self, target: u64, pc: u64) -> bool {
        let Some(callee) = self.func(pc) else {
            return false;
        };
        let within = |a: u64| self.func(a).is_some_and(|f| f.start == callee.start);
        if within(target) {
            return true;
        }
        let tail = |t: u64| {
            self.func(t).is_some_and(|f| {
                self.tail_reach(f).into_iter().any(|g| {
                    g == callee.start
                        || self
                            .func(g)
                            .is_some_and(|g| self.jumps_through_a_table_entry(g))
                })
            })
        };
        match self.jump_at(target) {
            Some(t2) => within(t2) || tail(t2) || tail(target),
            None => tail(target),
        }
    }

    /// Whether function `f` holds an indirect tail jump, whose target the code does not name (accepted
    /// as indirect calls are): a `jmp [reg + disp]` (`ff /4`, ModRM mod 01 or 10, no SIB: a vtable
    /// slot), or a `jmp reg` (`ff /4`, mod 11) right after the frame is torn down (`pop rbp`, `leave`, or
    /// any `pop` of a saved register) or within 12 bytes after a `mov` of a slot into that register
    /// (`48 8b`, ModRM mod 01 or 10, no SIB: `mov rcx, [rcx+0x18]` … `jmp rcx`) — a `jmp reg` elsewhere
    /// is a jump table inside the function (its register comes from `movsxd` and an `add`).
    fn jumps_through_a_table_entry(&self, f: &Func) -> bool {
        let Some(code) = self.read(f.start, (f.end - f.start).min(1 << 16) as usize) else {
            return false;
        };
        let after_epilogue = |k: usize| {
            let one = k.checked_sub(1).map(|i| code[i]);
            let two = k.checked_sub(2).map(|i| code[i]);
            matches!(one, Some(0x58..=0x5f) | Some(0xc9)) && two != Some(0x0f)
        };
        // A `mov` of a pointer-sized slot into register `r` (no REX.R: rax … rdi) in the 12 bytes
        // before `k`, and no `movsxd` there (a jump table's offset load).
        let slot_loaded = |k: usize, r: u8| {
            let window = k.saturating_sub(12)..k;
            let movsxd = window
                .clone()
                .any(|i| (0x48..=0x4f).contains(&code[i]) && code.get(i + 1) == Some(&0x63));
            !movsxd
                && window.into_iter().any(|i| {
                    let m = code.get(i + 2).copied().unwrap_or(0);
                    matches!(code[i], 0x48 | 0x49)
                        && code.get(i + 1) == Some(&0x8b)
                        && matches!(m >> 6, 1 | 2)
                        && m & 7 != 4
                        && (m >> 3) & 7 == r
                })
        };
        (0..code.len().saturating_sub(1)).any(|k| {
            let m = code[k + 1];
            let (md, reg, rm) = (m >> 6, (m >> 3) & 7, m & 7);
            let rex_b = k > 0 && (0x40..=0x4f).contains(&code[k - 1]);
            code[k] == 0xff
                && reg == 4
                && (((md == 1 || md == 2) && rm != 4)
                    || (md == 3 && (after_epilogue(k) || (!rex_b && slot_loaded(k, rm)))))
        })
    }

    /// The verdict on the edge "the code before `ra` called the function at `callee_pc`".
    pub fn edge(&self, ra: u64, callee_pc: u64) -> Result<(), String> {
        let name = |a: u64| self.func(a).map_or("?".into(), |f| f.name.clone());
        let Some(b) = self.read(ra.wrapping_sub(7), 7) else {
            return Err(format!("return address {ra:#x} is not mapped"));
        };
        let rel32 = |k: usize| i32::from_le_bytes(b[k..k + 4].try_into().unwrap()) as i64 as u64;
        let mut direct = Vec::new();
        if b[2] == 0xe8 {
            direct.push(ra.wrapping_add(rel32(3)));
        }
        if b[1] == 0xff && b[2] == 0x15 {
            if let Some(t) = self.word(ra.wrapping_add(rel32(3))) {
                direct.push(t);
            }
        }
        if direct.iter().any(|&t| self.leads_to(t, callee_pc)) {
            return Ok(());
        }
        let indirect = [2usize, 3, 4, 6, 7].iter().any(|&len| {
            let at = 7 - len;
            let (op, modrm) = (b[at], b.get(at + 1).copied().unwrap_or(0));
            let sib = b.get(at + 2).copied().unwrap_or(0);
            op == 0xff && (modrm >> 3) & 7 == 2 && modrm != 0x15 && ff_len(modrm, sib) == len
        });
        if indirect && self.in_code(ra) {
            return Ok(());
        }
        Err(match direct.first() {
            Some(&t) => format!(
                "{} ({ra:#x}) calls {} ({t:#x}), not {} ({callee_pc:#x})",
                name(ra.wrapping_sub(1)),
                name(t),
                name(callee_pc)
            ),
            None => format!(
                "no call before {ra:#x} in {} (callee {})",
                name(ra.wrapping_sub(1)),
                name(callee_pc)
            ),
        })
    }

    /// Whether `pc` lies in a thread root function.
    pub fn is_root(&self, pc: u64) -> bool {
        self.func(pc)
            .is_some_and(|f| ROOTS.contains(&f.name.as_str()))
            || self
                .funcs
                .iter()
                .any(|f| ROOTS.contains(&f.name.as_str()) && f.start <= pc && pc < f.end)
    }

    /// The name of the function at `pc` (for reports).
    pub fn name(&self, pc: u64) -> String {
        self.func(pc).map_or(format!("{pc:#x}"), |f| f.name.clone())
    }
}

/// Length of an `ff /2` instruction from its ModRM and SIB bytes.
fn ff_len(modrm: u8, sib: u8) -> usize {
    match (modrm >> 6, modrm & 7) {
        (3, _) => 2,
        (0, 5) => 6,
        (0, 4) if sib & 7 == 5 => 7,
        (0, 4) => 3,
        (0, _) => 2,
        (1, 4) => 4,
        (1, _) => 3,
        (_, 4) => 7,
        _ => 6,
    }
}

/// The verdicts over a profile's samples (weighted by their first value).
#[derive(Debug, Default)]
pub struct Verdict {
    pub samples: i64,
    /// Every edge proven, ending in a thread root.
    pub rooted: i64,
    /// Every edge proven, ending in a stop frame.
    pub stopped: i64,
    /// At least one edge the code contradicts.
    pub fabricated: i64,
    /// Proven edges, but ending in neither a root nor a stop frame.
    pub unended: i64,
    /// Examples of each failure (at most a few).
    pub failures: Vec<String>,
    /// Stop frames by name, with sample counts.
    pub stops: BTreeMap<String, i64>,
}

impl Verdict {
    pub fn rooted_share(&self) -> f64 {
        self.rooted as f64 / self.samples.max(1) as f64
    }
}

/// Checks every sample of `p` against process `proc_`; `exact_leaf`: the first entry is an interrupted
/// instruction (CPU profiles), not a return address.
pub fn verify(proc_: &Process, p: &Profile, exact_leaf: bool) -> Verdict {
    let text = |i: i64| p.string_table[i as usize].clone();
    let locs: BTreeMap<u64, (u64, String)> = p
        .location
        .iter()
        .map(|l| {
            let name = l
                .line
                .last()
                .and_then(|ln| p.function.iter().find(|f| f.id == ln.function_id))
                .map_or(String::new(), |f| text(f.name));
            (l.id, (l.address, name))
        })
        .collect();
    let mut v = Verdict::default();
    for s in &p.sample {
        let w = s.value.first().copied().unwrap_or(1).max(1);
        v.samples += w;
        let stack: Vec<&(u64, String)> = s.location_id.iter().map(|id| &locs[id]).collect();
        let mut fault = None;
        let mut ended_by_stop = None;
        for (i, &(addr, name)) in stack.iter().enumerate() {
            if name.starts_with("[unwind:") {
                if i + 1 != stack.len() {
                    fault = Some(format!("stop frame {name} not last"));
                }
                ended_by_stop = Some(name.clone());
                break;
            }
            if i == 0 {
                if !proc_.in_code(*addr) {
                    fault = Some(format!("leaf {addr:#x} outside the code"));
                }
                continue;
            }
            let prev = stack[i - 1].0;
            let callee = if i == 1 && exact_leaf { prev } else { prev - 1 };
            if let Err(e) = proc_.edge(*addr, callee) {
                fault = Some(e);
                break;
            }
        }
        let render = || {
            stack
                .iter()
                .map(|(a, n)| format!("  {a:#x} {n}"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        if let Some(f) = fault {
            v.fabricated += w;
            if v.failures.len() < 8 {
                v.failures.push(format!("fabricated: {f}\n{}", render()));
            }
        } else if let Some(stop) = ended_by_stop {
            v.stopped += w;
            *v.stops.entry(stop).or_default() += w;
        } else {
            let last = stack.last().map_or(0, |l| l.0);
            let probe = if stack.len() == 1 && exact_leaf {
                last
            } else {
                last.saturating_sub(1)
            };
            if proc_.is_root(probe) {
                v.rooted += w;
            } else {
                v.unended += w;
                if v.failures.len() < 8 {
                    v.failures
                        .push(format!("unended at {}:\n{}", proc_.name(probe), render()));
                }
            }
        }
    }
    v
}

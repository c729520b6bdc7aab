//! Self-check for builds without DWARF (the static musl release keeps only the symbol table): encodes a heap
//! profile of this very process and checks that its own allocating function is named in it, demangled.
//! Exits 1 with the reason otherwise.
//!
//! Run: `cargo run --release --target x86_64-unknown-linux-musl --example encode_selfcheck`.

use nl6_profile::encode::{self, HeapView};
use nl6_profile::heap::{self, SamplingAllocator};
use nl6_profile::proto;
use nl6_profile::symbols;

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

const WANT: &str = "encode_selfcheck::selfcheck_allocate";

/// Allocates 64 MiB in 1 MiB blocks: at Go's default rate nearly every block is sampled. A plain loop, so
/// the allocations happen in this frame (a `collect()` here would be a tail call and leave no frame).
#[inline(never)]
fn selfcheck_allocate() -> Vec<Vec<u8>> {
    let mut blocks = Vec::with_capacity(64);
    for _ in 0..64 {
        blocks.push(vec![0u8; 1 << 20]);
    }
    std::hint::black_box(&blocks);
    blocks
}

fn fail(why: &str) -> ! {
    eprintln!("encode_selfcheck: FAIL: {why}");
    std::process::exit(1);
}

fn main() {
    let held = selfcheck_allocate();
    let bytes = encode::heap(&heap::snapshot(), HeapView::Heap);
    let p = proto::decode(&bytes).unwrap_or_else(|e| fail(&e.to_string()));
    let names: Vec<&str> = p
        .function
        .iter()
        .map(|f| p.string_table[f.name as usize].as_str())
        .collect();
    if !names.contains(&WANT) {
        fail(&format!(
            "{WANT} not among the {} function names of the heap profile: {names:?}",
            names.len()
        ));
    }
    let m = p.mapping.first().unwrap_or_else(|| fail("no mapping"));
    let own = symbols::symbolize(selfcheck_allocate as *const () as u64 + 1);
    if own.as_deref() != Some(WANT) {
        fail(&format!("/symbol lookup of its own function gave {own:?}"));
    }
    println!(
        "encode_selfcheck: OK: {WANT} named in a {}-byte heap profile; {} functions; build id {}; \
         has_filenames {}; file {}",
        bytes.len(),
        names.len(),
        p.string_table[m.build_id as usize],
        m.has_filenames,
        p.string_table[m.filename as usize]
    );
    drop(held);
}

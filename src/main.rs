//! The `nl6` binary: installs the sampling allocator and hands over to [`nl6::cli::main`].
#![forbid(unsafe_code)]

#[global_allocator]
static ALLOC: nl6::profiling::heap::SamplingAllocator =
    nl6::profiling::heap::SamplingAllocator::system();

fn main() {
    // The samplers' signal handlers read stack bounds learnt outside them: the main thread's here.
    nl6::profiling::threads::learn_own_stack();
    std::process::exit(nl6::cli::main());
}

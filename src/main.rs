//! The `nl6` binary: installs the sampling allocator and hands over to [`nl6::cli::main`].
#![forbid(unsafe_code)]

#[global_allocator]
static ALLOC: nl6_profile::heap::SamplingAllocator = nl6_profile::heap::SamplingAllocator::system();

fn main() {
    // The samplers' signal handlers read stack bounds learnt outside them: the main thread's here.
    nl6_profile::threads::learn_own_stack();
    std::process::exit(nl6::cli::main());
}

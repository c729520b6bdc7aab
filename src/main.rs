#[global_allocator]
static ALLOC: nl6::profiling::heap::SamplingAllocator = nl6::profiling::heap::SamplingAllocator::system();

fn main() {}

//! STUB: frame-pointer unwinding. Owner: engine-cpu helper.

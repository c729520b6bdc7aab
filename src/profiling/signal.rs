//! STUB: signal handler installation. Owner: engine-cpu helper.

//! STUB: not built yet.

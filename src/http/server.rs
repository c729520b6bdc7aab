//! STUB: owner serve helper.

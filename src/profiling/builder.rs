//! STUB: owner engine-encode helper.

//! The gNMI and dial-out messages and services, generated at build time by `build.rs` from `proto/`.
#![allow(clippy::all, clippy::pedantic, missing_docs, non_camel_case_types)]

/// `gnmi.proto`: the gNMI service (server side) and its messages.
pub mod gnmi {
    tonic::include_proto!("gnmi");
}

/// `gnmi_ext.proto`: the extension envelope.
pub mod gnmi_ext {
    tonic::include_proto!("gnmi_ext");
}

/// `dialout.proto`: the dial-out service (client side), in its package `Nokia.SROS`.
pub mod nokia {
    pub mod sros {
        tonic::include_proto!("nokia.sros");
    }
}

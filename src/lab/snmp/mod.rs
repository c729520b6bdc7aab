//! SNMPv2c, a device's agent side: the BER codec ([`ber`]), a device's MIB view over one OID layout
//! sorted once ([`mib`]: the system group, IF-MIB's ifTable and ifXTable), the messages and the agent's
//! answer to one request ([`agent`]), the few serving threads ([`serve`]) and the binding of their
//! sockets, per port or `-device-net` ([`listen`]).
//!
//! The names managers and notifications use most are re-exported here (`snmp::Message`, `snmp::pdu`,
//! `snmp::respond`). Built on the device ([`super::device`]), the `-device-net` range
//! ([`super::device_net`]) and sending as a device ([`super::send`]); never on the fleet or its
//! configuration, which hand this module plain values.
#![forbid(unsafe_code)]

pub mod agent;
pub mod ber;
pub mod listen;
pub mod mib;
pub mod serve;

pub use agent::{
    answer, pdu, respond, response_limit, Message, Outcome, MAX_AMPLIFICATION, MAX_DATAGRAM,
    MAX_REPETITIONS, NOT_WRITABLE, TOO_BIG, VERSION_2C,
};

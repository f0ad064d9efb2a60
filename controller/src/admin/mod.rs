//! The admin API: the controller's Unix-socket server ([`server`]), one per repository, the
//! `runnerctl` client that talks to it ([`client`]) and how `runnerctl` finds a
//! repository's socket by directory or by name ([`address`]).

pub mod address;
pub mod client;
pub mod server;

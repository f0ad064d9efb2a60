//! The admin API: the controller's Unix-socket server ([`server`]) and the `runnerctl`
//! client that talks to it ([`client`]).

pub mod client;
pub mod server;

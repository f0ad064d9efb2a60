//! The agent core shared by the PM (in the controller) and the Coder (in the sandboxed
//! runner): the conversation types of the OpenAI-compatible chat protocol, the tool
//! abstraction and its ordered registry, the provider-agnostic tool loop, and the
//! read-only repository tools with their path safety.
//!
//! Nothing here talks to the network or holds a secret: the model is reached through the
//! [`tool_loop::ChatModel`] trait, which the controller implements with its gateway.

pub mod agent;
pub mod compaction;
pub mod conversation;
pub mod hub;
pub mod quiesce;
pub mod run;
pub mod sandbox;
pub mod tool;
pub mod tool_loop;
pub mod tools;
pub mod truncate;
pub mod worktree_io;

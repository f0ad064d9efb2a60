//! The agent core shared by the PM (in the controller) and the Coder (in the sandboxed
//! runner): the conversation types of the OpenAI-compatible chat protocol, the tool
//! abstraction and its ordered registry, the provider-agnostic tool loop, compaction, and
//! the read-only repository tools with their path safety.
//!
//! Nothing here talks to the network, holds a secret or needs the Linux sandbox: the model
//! is reached through the [`tool_loop::ChatModel`] trait, which the controller implements
//! with its gateway and the runner with its hub. So the controller links this crate and
//! not the runner's internals.

pub mod compaction;
pub mod conversation;
pub mod mcp;
pub mod schema;
/// A scripted model for tests (and, with the feature `test-support`, other crates' tests).
#[cfg(any(test, feature = "test-support"))]
pub mod scripted;
pub mod tool;
pub mod tool_loop;
pub mod tools;
pub mod truncate;

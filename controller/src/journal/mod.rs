//! What a thread leaves behind when its work is done: the pull request's description
//! ([`description`], its Journal section [`timeline`]), the thread's journal committed on its branch ([`thread_journal`]), and the
//! usage report posted when it closes ([`report`], from what [`usage`] reads); and the
//! channel's weekly cost summary ([`weekly`]). The PM's
//! parts of them — the summary, the decisions, the tips — come from one model call each
//! ([`notes`]).

pub mod description;
pub mod notes;
pub mod report;
pub mod thread_journal;
pub mod timeline;
pub mod usage;
pub mod weekly;

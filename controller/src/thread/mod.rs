//! A Slack thread's handling: one task per thread ([`dispatch`]), typed approvals
//! ([`approval`]), `@codebutler.<role>` routing ([`routing`]) and the thread's Coder budget
//! ([`budget`]).

pub mod approval;
pub mod budget;
pub mod dispatch;
pub mod routing;

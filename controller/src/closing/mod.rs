//! Threads that end: the PR watcher ([`watcher`]) that notices pull requests merged or
//! closed on GitHub, and the messages it stores in the thread ([`crate::domain::PrEvent`]:
//! their markers are the domain's, since the thread and the store read them too). The
//! same watcher carries the review loop of an open pull request: the comments and checks it
//! reads ([`feedback`], [`checks`]), the rounds it opens ([`review_watch`], announced by
//! a [`crate::domain::ReviewEvent`]), the PM sorting a batch ([`sorting`]) of what a round gives of its
//! comments ([`review_input`]: only from people who may steer, and bounded), what the thread
//! and the Coder are told ([`proposal`]) and the replies on GitHub ([`replies`]); the
//! thread's side is `thread::review_commands`. The reviewer model ([`reviewer`], its tools
//! over the pull request's head [`reviewer_tools`]) reviews each head the watcher sees
//! (`thread::reviewer_commands` on the thread's side); its line comments enter the same loop. What a close does is [`crate::thread`]'s
//! (`close_commands`), so a close from Slack and one from GitHub take the same path.

pub mod checks;
pub mod feedback;
pub mod proposal;
mod replies;
pub mod review_input;
pub mod review_watch;
pub mod reviewer;
pub mod reviewer_tools;
pub mod sorting;
pub mod watcher;

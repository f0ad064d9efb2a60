//! A thread's [`ThreadState`] from what the store keeps and whether its Coder is active:
//! pure, so every combination is tested as a table.

use crate::domain::{Stage, ThreadKey, ThreadState};
use crate::slack::interactive::plan_digest;
use crate::store::StoredThread;

/// The state of `thread` given its stored state and whether a run of it is active (the
/// supervisor's word). An active Coder wins: whatever was stored, messages go to it first.
pub fn thread_state(
    stored: StoredThread,
    thread: &ThreadKey,
    coder_active: bool,
) -> Result<ThreadState, serde_json::Error> {
    if coder_active {
        return Ok(ThreadState::CoderRunning);
    }
    Ok(match (stored.stage, stored.plan) {
        (Stage::Created | Stage::Conversing, _) | (Stage::PlanPending, None) => {
            ThreadState::Conversing
        }
        (Stage::PlanPending, Some(plan)) => {
            let digest = plan_digest(&plan.to_json()?);
            ThreadState::PlanPending { plan, digest }
        }
        (Stage::Closed(closure), _) => ThreadState::Closed(closure),
        (Stage::Approved | Stage::PrOpened, _) => match stored.latest_run {
            Some(last) if last.thread == *thread && last.state.is_final() => {
                ThreadState::RunEnded {
                    last: Box::new(last),
                    pr: stored
                        .pull_request
                        .filter(|_| stored.stage == Stage::PrOpened),
                }
            }
            _ => ThreadState::Preparing,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Closure, Plan, RunRecord, RunState};

    /// A plan as the code before the typed thread state stored it, and the digest its
    /// Approve button was given then (of the stored text).
    const OLD_PLAN: &str = r#"{"summary":"Fix expiry","steps":["Edit `src/a.rs:4`","Test \"it\""],"files":["src/a.rs"]}"#;

    fn thread(ts: &str) -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: ts.into(),
        }
    }

    fn run(thread_ts: &str, state: RunState) -> RunRecord {
        RunRecord {
            id: "r1".into(),
            thread: thread(thread_ts),
            state,
            plan: String::new(),
            model: "m".into(),
            worktree: "w".into(),
            branch: "b".into(),
            max_turns: 1,
            turns: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
            cost: 0.0,
            ending: None,
            exit_code: None,
            runner_pid: None,
            created_at: "t".into(),
            started_at: None,
            ended_at: None,
        }
    }

    #[test]
    fn states_from_what_is_stored() {
        let plan = Plan::from_json(OLD_PLAN).unwrap();
        let pending = ThreadState::PlanPending {
            plan: plan.clone(),
            digest: plan_digest(OLD_PLAN),
        };
        let ended = run("1.1", RunState::Finished);
        let cases = [
            (Stage::Created, None, None, false, ThreadState::Conversing),
            (
                Stage::PrOpened,
                Some(&plan),
                None,
                false,
                ThreadState::Preparing,
            ),
            (
                Stage::PrOpened,
                Some(&plan),
                Some(ended.clone()),
                false,
                ThreadState::RunEnded {
                    last: Box::new(ended.clone()),
                    pr: None,
                },
            ),
            (
                Stage::PrOpened,
                Some(&plan),
                Some(ended.clone()),
                true,
                ThreadState::CoderRunning,
            ),
            (
                Stage::Closed(Closure::Merged),
                Some(&plan),
                Some(ended.clone()),
                false,
                ThreadState::Closed(Closure::Merged),
            ),
            (
                Stage::Closed(Closure::Abandoned),
                None,
                None,
                false,
                ThreadState::Closed(Closure::Abandoned),
            ),
            (
                Stage::Conversing,
                None,
                None,
                false,
                ThreadState::Conversing,
            ),
            (
                Stage::Conversing,
                None,
                None,
                true,
                ThreadState::CoderRunning,
            ),
            (Stage::PlanPending, Some(&plan), None, false, pending),
            (
                Stage::PlanPending,
                None,
                None,
                false,
                ThreadState::Conversing,
            ),
            (
                Stage::Approved,
                Some(&plan),
                None,
                false,
                ThreadState::Preparing,
            ),
            (
                Stage::Approved,
                Some(&plan),
                Some(run("1.1", RunState::Running)),
                false,
                ThreadState::Preparing,
            ),
            (
                Stage::Approved,
                Some(&plan),
                Some(ended.clone()),
                false,
                ThreadState::RunEnded {
                    last: Box::new(ended.clone()),
                    pr: None,
                },
            ),
            (
                Stage::Approved,
                Some(&plan),
                Some(ended.clone()),
                true,
                ThreadState::CoderRunning,
            ),
            (
                Stage::Approved,
                Some(&plan),
                Some(ThreadKey {
                    channel: "C2".into(),
                    ..ended.thread.clone()
                })
                .map(|thread| RunRecord {
                    thread,
                    ..ended.clone()
                }),
                false,
                ThreadState::Preparing,
            ),
        ];
        for (stage, plan, latest_run, active, expected) in cases {
            let stored = StoredThread {
                stage,
                plan: plan.cloned(),
                latest_run,
                pull_request: None,
            };
            let label = format!("{stored:?} active={active}");
            assert_eq!(
                thread_state(stored, &thread("1.1"), active).unwrap(),
                expected,
                "{label}"
            );
        }
    }

    /// An ended run carries the thread's pull request while it is open, and only then.
    #[test]
    fn an_ended_run_carries_the_open_pull_request() {
        let pr = crate::domain::PullRequestRef {
            number: 7,
            url: "https://github.com/acme/app/pull/7".into(),
        };
        let ended = run("1.1", RunState::Finished);
        for (stage, expected) in [(Stage::PrOpened, Some(pr.clone())), (Stage::Approved, None)] {
            let stored = StoredThread {
                stage,
                plan: None,
                latest_run: Some(ended.clone()),
                pull_request: Some(pr.clone()),
            };
            assert_eq!(
                thread_state(stored, &thread("1.1"), false).unwrap(),
                ThreadState::RunEnded {
                    last: Box::new(ended.clone()),
                    pr: expected
                },
                "{stage:?}"
            );
        }
    }

    /// The Approve button of a plan stored by the old code still matches it.
    #[test]
    fn an_old_stored_plan_still_matches_its_button() {
        let stored = StoredThread {
            stage: Stage::PlanPending,
            plan: Some(Plan::from_json(OLD_PLAN).unwrap()),
            latest_run: None,
            pull_request: None,
        };
        let ThreadState::PlanPending { digest, .. } =
            thread_state(stored, &thread("1.1"), false).unwrap()
        else {
            panic!("not pending");
        };
        assert_eq!(digest, plan_digest(OLD_PLAN));
    }
}

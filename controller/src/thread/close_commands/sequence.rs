//! The order a close's steps run in, each exactly once: the steps the store does not record
//! as done for the thread run in order, each recorded as done (`thread_steps`) as soon as it
//! succeeded; the first that fails stops the close, and the next close of the thread goes on
//! from it. So no step runs twice, and a close a stop cut off goes on where it was. What a
//! step does is the caller's ([`super::steps`]); this is only the order and the record.

use crate::domain::ThreadKey;
use crate::slack::effects::Effects;
use crate::slack::outbox::Outbox;
use crate::store::{Change, Store};
use crate::thread::close_plan::Step;

/// How a close's steps went.
#[derive(Debug)]
pub(super) enum Ran<E> {
    /// Every step is done: the notes the steps that ran now left for the close's last word.
    AllDone(Vec<String>),
    /// `step` failed with `error`; the steps before it are recorded as done.
    Failed { step: Step, error: E },
    /// Reading or recording a step in the store failed (logged): nothing more was done.
    NotRecorded,
}

/// Runs those of `steps` not recorded as done for `thread`, in order, with `run` (which
/// gives a step's note for the last word, if it has one), recording each as done once it
/// succeeded; stops at the first that fails.
pub(super) async fn run_steps<E, Done>(
    store: &Store,
    outbox: &Outbox,
    thread: &ThreadKey,
    steps: &[Step],
    mut run: impl FnMut(Step) -> Done,
) -> Ran<E>
where
    Done: Future<Output = Result<Option<String>, E>>,
{
    let mut notes = Vec::new();
    for &step in steps {
        match store.step_done(thread, step.name()).await {
            Ok(true) => continue,
            Ok(false) => {}
            Err(e) => {
                tracing::error!(thread = %thread, "read close step {}: {e}", step.name());
                return Ran::NotRecorded;
            }
        }
        match run(step).await {
            Ok(note) => {
                notes.extend(note);
                let changes = [Change::StepDone {
                    thread,
                    step: step.name(),
                }];
                if let Err(e) = outbox.commit(&changes, &Effects::new(thread)).await {
                    tracing::error!(thread = %thread, "record close step {}: {e}", step.name());
                    return Ran::NotRecorded;
                }
            }
            Err(error) => return Ran::Failed { step, error },
        }
    }
    Ran::AllDone(notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use codebutler_test_support::slack::{BOT_TOKEN, FakeSlack};

    use Step::{Cleanup, DeleteRemoteBranch, Description, Journal, Merge};

    const STEPS: [Step; 5] = [Description, Journal, Merge, DeleteRemoteBranch, Cleanup];

    fn thread() -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        }
    }

    /// An outbox on `store` whose Slack is a fake (a close's steps say nothing there).
    fn outbox(store: &Store, slack: &FakeSlack) -> Outbox {
        let client =
            crate::slack::api::build_client(slack.api_url().trim_end_matches('/')).unwrap();
        let sender =
            crate::slack::api::Sender::new(client, &crate::secret::Secret::new(BOT_TOKEN), 0.0);
        Outbox::new(store.clone(), sender)
    }

    /// The steps the store records as done for the thread.
    async fn recorded(store: &Store) -> Vec<Step> {
        let mut done = Vec::new();
        for step in STEPS {
            if store.step_done(&thread(), step.name()).await.unwrap() {
                done.push(step);
            }
        }
        done
    }

    /// A close whose merge fails stops there with the steps before it recorded; saying
    /// "merge" again runs only the rest, and a third close finds nothing left to run.
    async fn each_step_runs_once_and_a_retry_goes_on_from_the_one_that_failed(store: &Store) {
        let slack = FakeSlack::start().await;
        let outbox = outbox(store, &slack);
        let mut ran = Vec::new();
        let first = run_steps(store, &outbox, &thread(), &STEPS, |step| {
            ran.push(step);
            let result = match step {
                Journal => Ok(Some("journal committed".to_owned())),
                Merge => Err("the checks are failing"),
                _ => Ok(None),
            };
            async move { result }
        })
        .await;
        assert!(
            matches!(
                first,
                Ran::Failed {
                    step: Merge,
                    error: "the checks are failing"
                }
            ),
            "{first:?}"
        );
        assert_eq!(ran, [Description, Journal, Merge]);
        assert_eq!(recorded(store).await, [Description, Journal]);

        ran.clear();
        let second = run_steps(store, &outbox, &thread(), &STEPS, |step| {
            ran.push(step);
            let note = (step == Cleanup).then(|| "worktree kept".to_owned());
            async move { Ok::<_, &str>(note) }
        })
        .await;
        assert!(
            matches!(&second, Ran::AllDone(notes) if notes == &["worktree kept"]),
            "{second:?}"
        );
        assert_eq!(ran, [Merge, DeleteRemoteBranch, Cleanup]);
        assert_eq!(recorded(store).await, STEPS);

        ran.clear();
        let third = run_steps(store, &outbox, &thread(), &STEPS, |step| {
            ran.push(step);
            async { Ok::<_, &str>(None) }
        })
        .await;
        assert!(matches!(&third, Ran::AllDone(notes) if notes.is_empty()));
        assert!(ran.is_empty(), "{ran:?}");
        assert!(slack.posts().is_empty());
    }

    /// Only the steps asked for run, in the order asked: an abandon's cleanup alone.
    async fn only_the_closes_own_steps_run(store: &Store) {
        let slack = FakeSlack::start().await;
        let outbox = outbox(store, &slack);
        let mut ran = Vec::new();
        let done = run_steps(store, &outbox, &thread(), &[Cleanup], |step| {
            ran.push(step);
            async { Ok::<_, &str>(None) }
        })
        .await;
        assert!(matches!(done, Ran::AllDone(_)));
        assert_eq!(ran, [Cleanup]);
        assert_eq!(recorded(store).await, [Cleanup]);
    }

    crate::store::testing::on_both_backends!(
        each_step_runs_once_and_a_retry_goes_on_from_the_one_that_failed,
        only_the_closes_own_steps_run,
    );
}

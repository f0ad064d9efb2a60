//! Talking to CodeButler outside a plain channel message, end to end: a direct message is
//! answered read-only by the PM (its read-only tools, told where work starts) and "yes" there
//! is refused naming the channel, with nothing started; a mention in another channel is
//! answered once in its thread though Slack sends it twice, and so are the replies in that
//! thread; `/codebutler pm <model>` switches the model a thread's PM answers with (what the
//! model provider is asked for on the thread's next turn), and refuses a model outside the
//! pool.

use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::{CHANNEL, Post, dm_channel};
use serde_json::json;

use crate::harness::{CODER_MODEL, Env, PM_MODEL, USER, WAIT};

/// Someone in the workspace who is not in `access.allowedUsers`.
const MALLORY: &str = "U0MALLORY";
/// A channel the bot is in that no repository is served in.
const OTHER: &str = "C0RANDOM";

/// The bot's posts in the thread `thread_ts` of `channel`.
fn posts_in(env: &Env, channel: &str, thread_ts: &str) -> Vec<Post> {
    env.slack
        .posts()
        .into_iter()
        .filter(|p| p.channel == channel && p.thread_ts.as_deref() == Some(thread_ts))
        .collect()
}

/// Waits until a post in the thread `thread_ts` of `channel` satisfies `pred`; returns it.
async fn wait_post_in(
    env: &Env,
    channel: &str,
    thread_ts: &str,
    pred: impl Fn(&str) -> bool,
) -> String {
    let found = || {
        posts_in(env, channel, thread_ts)
            .into_iter()
            .map(|p| p.text)
            .find(|t| pred(t))
    };
    let ok = env.slack.wait_until(WAIT, || found().is_some()).await;
    assert!(
        ok,
        "no such post in {:?}",
        posts_in(env, channel, thread_ts)
    );
    found().unwrap_or_default()
}

/// The names of the tools a model request offered.
fn tool_names(body: &serde_json::Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// The repository's `codebutler/` branches: a Coder run makes one.
fn work_branches(env: &Env) -> Vec<String> {
    let repo = git2::Repository::open(env.repo_path()).unwrap();
    let branches = repo.branches(Some(git2::BranchType::Local)).unwrap();
    branches
        .filter_map(|b| b.ok()?.0.name().ok()?.map(str::to_owned))
        .filter(|name| name.starts_with("codebutler/"))
        .collect()
}

/// Alice asks the PM in a direct message: the PM is asked with its read-only tools and told
/// that work starts in the repository's channel, and its answer lands in her DM's thread.
/// "yes" there is refused with one line naming the channel, and nothing starts: no Coder
/// model call, no work branch. Mallory, not allowed in the channel, is refused in his DM
/// without any model call.
#[tokio::test]
async fn a_direct_message_is_answered_read_only_and_work_is_refused_there() {
    let env = Env::with_config(json!({"access": {"allowedUsers": [USER]}})).await;
    env.model.script(
        "DM-DEPLOY",
        vec![Reply::text(
            "Run `make deploy`. To change it, ask in the channel.",
        )],
    );
    let _daemon = env.start().await;
    let dm = dm_channel(USER);
    let asked = env
        .slack
        .direct_message(
            USER,
            "DM-DEPLOY: how do we deploy, and can you add a dry run?",
            None,
        )
        .expect("Slack sends direct messages to an app with im:history");
    wait_post_in(&env, &dm, &asked.ts, |t| t.contains("Run `make deploy`.")).await;

    let requests = env.model.requests_for("DM-DEPLOY");
    assert_eq!(requests.len(), 1, "one PM turn");
    let tools = tool_names(&requests[0].body);
    assert!(tools.contains(&"ReadFile".to_owned()), "{tools:?}");
    assert!(!tools.contains(&"ProposePlan".to_owned()), "{tools:?}");
    let system = requests[0].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        system.contains("work starts in the repository's channel, <#C0CHAN>"),
        "{system}"
    );

    env.slack
        .direct_message(USER, "yes", Some(&asked.ts))
        .unwrap();
    let refusal = wait_post_in(&env, &dm, &asked.ts, |t| {
        t.contains("Work starts in <#C0CHAN>")
    })
    .await;
    assert!(refusal.contains("take this plan there"), "{refusal}");

    let mallory = env
        .slack
        .direct_message(MALLORY, "DM-MALLORY: deploy my branch", None)
        .unwrap();
    wait_post_in(&env, &dm_channel(MALLORY), &mallory.ts, |t| {
        t.contains("access.allowedUsers")
    })
    .await;

    assert_eq!(
        env.model.requests_for("DM-DEPLOY").len(),
        1,
        "no turn for \"yes\""
    );
    assert!(
        env.model
            .requests()
            .iter()
            .all(|r| r.body["model"] != CODER_MODEL
                && !crate::harness::user_messages(&r.body)
                    .iter()
                    .any(|m| m.contains("DM-MALLORY"))),
        "no Coder call, no model call for Mallory"
    );
    assert_eq!(work_branches(&env), Vec::<String>::new(), "no run started");
    assert!(
        env.slack.posts().iter().all(|p| p.channel != CHANNEL),
        "nothing said in the repository's channel"
    );
    env.assert_clean();
}

/// Alice mentions the bot in a channel no repository is served in: Slack sends the message
/// twice (`message` and `app_mention`), and it is answered once, in the mention's thread; her
/// reply in that thread, without a mention, is answered too, and a plain message elsewhere
/// in that channel is nobody's question. A mention in the repository's channel is a request
/// there, answered once.
#[tokio::test]
async fn a_mention_elsewhere_is_answered_once_in_its_thread() {
    let env = Env::new().await;
    env.model.script(
        "WHERE-SESSIONS",
        vec![
            Reply::text("Sessions live in src/auth/session.rs."),
            Reply::text("They last an hour."),
        ],
    );
    env.model.script(
        "CHANNEL-MENTION",
        vec![Reply::text("Answered in the channel.")],
    );
    let _daemon = env.start().await;

    let sent = env.slack.mention(
        OTHER,
        USER,
        "WHERE-SESSIONS: where are sessions kept?",
        None,
    );
    assert_eq!(
        sent.len(),
        2,
        "Slack sends a mention as message and app_mention"
    );
    let thread = sent[0].ts.clone();
    for event in &sent {
        assert!(env.slack.wait_acked(&event.envelope_id, WAIT).await);
    }
    wait_post_in(&env, OTHER, &thread, |t| t.contains("Sessions live in")).await;
    env.slack
        .user_message(OTHER, USER, "and how long do they last?", Some(&thread));
    wait_post_in(&env, OTHER, &thread, |t| t.contains("They last an hour.")).await;
    let plain = env.slack.user_message(OTHER, USER, "lunch at noon?", None);
    assert!(env.slack.wait_acked(&plain.envelope_id, WAIT).await);

    let in_channel = env
        .slack
        .mention(CHANNEL, USER, "CHANNEL-MENTION: is CI green?", None);
    let channel_thread = in_channel[0].ts.clone();
    env.wait_post(&channel_thread, |t| t.contains("Answered in the channel."))
        .await;
    for event in &in_channel {
        assert!(env.slack.wait_acked(&event.envelope_id, WAIT).await);
    }

    assert_eq!(
        env.model.requests_for("WHERE-SESSIONS").len(),
        2,
        "two turns"
    );
    assert_eq!(
        env.model.requests_for("CHANNEL-MENTION").len(),
        1,
        "one turn"
    );
    let answers = |channel: &str, thread: &str, text: &str| {
        posts_in(&env, channel, thread)
            .iter()
            .filter(|p| p.text.contains(text))
            .count()
    };
    assert_eq!(answers(OTHER, &thread, "Sessions live in"), 1);
    assert_eq!(
        answers(CHANNEL, &channel_thread, "Answered in the channel."),
        1
    );
    assert!(
        posts_in(&env, OTHER, &plain.ts).is_empty(),
        "a plain message elsewhere is not answered"
    );
    env.assert_clean();
}

/// The second model of the PM's pool the tests configure.
const LEAN_MODEL: &str = "test/lean-model";

/// An env whose PM pool holds `cheap` (the default) and `lean`.
async fn env_with_two_pm_models() -> Env {
    let env = Env::with_config(json!({
        "productManager": {"default": "cheap", "models": {
            "cheap": {"model": PM_MODEL}, "lean": {"model": LEAN_MODEL}
        }}
    }))
    .await;
    env.model.list(LEAN_MODEL);
    env
}

/// The models the provider was asked for by the conversations `matcher` scripts, in order.
fn models_asked(env: &Env, matcher: &str) -> Vec<String> {
    env.model
        .requests_for(matcher)
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Alice's thread talks with the default PM model. `/codebutler pm gigantic` is refused with
/// the pool's keys; `/codebutler pm lean`, typed in the channel, switches her latest open
/// thread: she alone is told, the thread is told who chose what, and the provider is asked
/// for the lean model on the thread's next turn.
#[tokio::test]
async fn the_pm_command_switches_the_model_of_the_persons_latest_thread() {
    let env = env_with_two_pm_models().await;
    env.model.script(
        "COLD-CACHE",
        vec![Reply::text("First answer."), Reply::text("Second answer.")],
    );
    let _daemon = env.start().await;
    let thread = env.say("COLD-CACHE: why is the build cache cold every morning?");
    env.wait_post(&thread, |t| t.contains("First answer."))
        .await;

    env.slack
        .slash_command(CHANNEL, USER, "pm gigantic")
        .unwrap();
    let refused = env.slack.wait_ephemeral_answers(USER, 1, WAIT).await;
    assert!(
        refused[0].contains("`gigantic` is not in the PM's pool"),
        "{}",
        refused[0]
    );
    assert!(refused[0].contains("`cheap`, `lean`"), "{}", refused[0]);

    env.slack.slash_command(CHANNEL, USER, "pm lean").unwrap();
    let answers = env.slack.wait_ephemeral_answers(USER, 2, WAIT).await;
    assert!(
        answers[1].contains("answers with `test/lean-model` from its next turn"),
        "{}",
        answers[1]
    );
    assert!(answers[1].contains("COLD-CACHE"), "{}", answers[1]);
    env.wait_post(&thread, |t| {
        t.contains("PM model is now `test/lean-model`, set by <@U0ALICE>")
    })
    .await;

    env.slack
        .user_message(CHANNEL, USER, "and the warm-up job?", Some(&thread));
    env.wait_post(&thread, |t| t.contains("Second answer."))
        .await;
    assert_eq!(models_asked(&env, "COLD-CACHE"), [PM_MODEL, LEAN_MODEL]);

    env.slack.slash_command(CHANNEL, USER, "pm").unwrap();
    let shown = env.slack.wait_ephemeral_answers(USER, 3, WAIT).await;
    assert!(
        shown[2].contains("answers with `test/lean-model` (chosen by <@U0ALICE>)"),
        "{}",
        shown[2]
    );
    assert!(
        shown[2].contains("`lean` (test/lean-model)"),
        "{}",
        shown[2]
    );
    env.assert_clean();
}

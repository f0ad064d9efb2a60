//! Talking to CodeButler outside a plain channel message, end to end: a direct message is
//! answered read-only by the PM (its read-only tools, told where work starts) and "yes" there
//! is refused naming the channel, with nothing started; a mention in another channel is
//! answered once in its thread though Slack sends it twice, and so are the replies in that
//! thread; `/codebutler pm <model>` switches the model a thread's PM answers with (what the
//! model provider is asked for on the thread's next turn), and refuses a model outside the
//! pool.
//!
//! With several repositories served: a mention in a channel no repository is served in asks
//! which repository once for its thread and then answers from the chosen one;
//! `/codebutler status` typed in a direct message answers about the repository that
//! conversation is about; and on one PostgreSQL store shared by two instances, a direct
//! message's repository question is asked once, its answer confirmed once and remembered,
//! though Slack hands each event to both instances.

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

/// The bot's posts in `channel` that contain `text`.
fn posts_saying(
    slack: &codebutler_test_support::slack::FakeSlack,
    channel: &str,
    text: &str,
) -> usize {
    slack
        .posts()
        .iter()
        .filter(|p| p.channel == channel && p.text.contains(text))
        .count()
}

/// The question a conversation's repository is asked with.
const WHICH_ONE: &str = "which one is this conversation about";

/// A service with two repositories: Alice mentions the bot in a channel neither is served
/// in. She is asked which repository once, in the mention's thread (Slack sends the mention
/// twice), without a model call; she answers "web" in the thread, and her next questions
/// there — a plain reply and another mention — are answered by web's PM (web's own prompt,
/// not api's), each once.
#[tokio::test]
async fn a_mention_elsewhere_with_several_repositories_asks_which_once_then_answers_from_it() {
    use crate::team::{Team, system_prompt, wait_post_in};
    let team = Team::new().await;
    let mut service = team.start().await;
    let sent = team
        .slack
        .mention(OTHER, USER, "where are sessions kept?", None);
    assert_eq!(sent.len(), 2, "a mention comes as message and app_mention");
    let thread = sent[0].ts.clone();
    let question = wait_post_in(&team, OTHER, &thread, WHICH_ONE).await;
    assert!(
        question.contains("*api* (<#C0API>), *web* (<#C0WEB>)"),
        "{question}"
    );
    for event in &sent {
        assert!(team.slack.wait_acked(&event.envelope_id, WAIT).await);
    }
    team.slack.user_message(OTHER, USER, "web", Some(&thread));
    wait_post_in(
        &team,
        OTHER,
        &thread,
        "This conversation is about *web* (<#C0WEB>)",
    )
    .await;

    team.model.script(
        "MENTION-WEB-Q",
        vec![
            Reply::text("Web keeps them in Redis."),
            Reply::text("For an hour."),
        ],
    );
    team.slack.user_message(
        OTHER,
        USER,
        "MENTION-WEB-Q: where are sessions kept?",
        Some(&thread),
    );
    wait_post_in(&team, OTHER, &thread, "Web keeps them in Redis.").await;
    let prompt = system_prompt(&team.model, "MENTION-WEB-Q");
    assert!(prompt.contains("PROMPT-WEB"), "{prompt}");
    assert!(!prompt.contains("PROMPT-API"), "{prompt}");

    let again = team
        .slack
        .mention(OTHER, USER, "and for how long?", Some(&thread));
    wait_post_in(&team, OTHER, &thread, "For an hour.").await;
    for event in &again {
        assert!(team.slack.wait_acked(&event.envelope_id, WAIT).await);
    }

    assert_eq!(posts_saying(&team.slack, OTHER, WHICH_ONE), 1, "asked once");
    assert_eq!(
        posts_saying(&team.slack, OTHER, "This conversation is about"),
        1
    );
    assert_eq!(
        posts_saying(&team.slack, OTHER, "For an hour."),
        1,
        "answered once"
    );
    assert_eq!(
        team.model.requests_for("MENTION-WEB-Q").len(),
        2,
        "two turns"
    );
    // The first mention and the answer are scripted nowhere: a PM turn for either shows.
    assert!(
        team.model.unscripted().is_empty(),
        "{:?}",
        team.model.unscripted()
    );
    Team::stop(&mut service).await;
    team.assert_slack_clean();
}

/// A service with two repositories, each with an open thread. `/codebutler status` typed in
/// Alice's direct message before her conversation's repository is chosen asks her to name
/// one there first, listing both; once she has chosen web, it shows web's open thread and
/// not api's, and `pm cheap` switches the PM model of her direct-message thread with web.
#[tokio::test]
async fn the_slash_command_in_a_direct_message_answers_about_its_chosen_repository() {
    use crate::team::{Team, wait_post_in};
    let team = Team::new().await;
    let mut service = team.start().await;
    team.ask(
        "C0API",
        "API-OPEN-THREAD: how is the api built?",
        "With cargo.",
    )
    .await;
    team.ask(
        "C0WEB",
        "WEB-OPEN-THREAD: how is the web built?",
        "With npm.",
    )
    .await;
    let dm = dm_channel(USER);

    team.slack.slash_command(&dm, USER, "status").unwrap();
    let answers = team.slack.wait_ephemeral_answers(USER, 1, WAIT).await;
    assert!(answers[0].contains("name it here first"), "{}", answers[0]);
    assert!(
        answers[0].contains("*api* (<#C0API>), *web* (<#C0WEB>)"),
        "{}",
        answers[0]
    );

    let first = team.slack.direct_message(USER, "hello", None).unwrap();
    wait_post_in(&team, &dm, &first.ts, WHICH_ONE).await;
    team.slack
        .direct_message(USER, "web", Some(&first.ts))
        .unwrap();
    wait_post_in(&team, &dm, &first.ts, "This conversation is about *web*").await;

    team.slack.slash_command(&dm, USER, "status").unwrap();
    let answers = team.slack.wait_ephemeral_answers(USER, 2, WAIT).await;
    assert!(answers[1].contains("WEB-OPEN-THREAD"), "{}", answers[1]);
    assert!(!answers[1].contains("API-OPEN-THREAD"), "{}", answers[1]);
    assert!(answers[1].contains("*Coder runs:*"), "{}", answers[1]);

    // `pm` there applies to her latest conversation with web, stored like a thread.
    team.model
        .script("DM-PM-Q", vec![Reply::text("With npm, still.")]);
    let asked = team
        .slack
        .direct_message(USER, "DM-PM-Q: what does web build with?", None)
        .unwrap();
    wait_post_in(&team, &dm, &asked.ts, "With npm, still.").await;
    team.slack.slash_command(&dm, USER, "pm cheap").unwrap();
    let answers = team.slack.wait_ephemeral_answers(USER, 3, WAIT).await;
    assert!(answers[2].contains("DM-PM-Q"), "{}", answers[2]);
    assert!(
        answers[2].contains(&format!("answers with `{PM_MODEL}` from its next turn")),
        "{}",
        answers[2]
    );
    wait_post_in(&team, &dm, &asked.ts, "PM model is now").await;
    Team::stop(&mut service).await;
    team.assert_slack_clean();
}

/// Two instances serving two repositories on one PostgreSQL store, as on two hosts. Each of
/// Alice's direct messages is handed to one instance and then, as Slack retries it, to each
/// of them again: her first message is asked which repository once, her answer "web" is confirmed
/// once, and her question after it is answered once, by web (stored in web's schema).
#[tokio::test]
async fn two_instances_on_postgresql_ask_a_direct_message_which_repository_once() {
    use crate::hosts::Host;
    use codebutler_test_support::postgres;
    use codebutler_test_support::slack::FakeSlack;
    let cluster = postgres::shared();
    let database = cluster.create_database("dm_hosts");
    let url = cluster.url(&database);
    let slack = FakeSlack::start().await;
    let model = codebutler_test_support::model::FakeModel::start().await;
    let outside = tempfile::tempdir().unwrap();
    codebutler_test_support::gh::install_fake_gh(outside.path());
    let gh = outside.path().join("gh");
    let hosts: Vec<Host> = (0..2)
        .map(|_| Host::new(&slack, &model, &gh, &url))
        .collect();
    let mut daemons: Vec<_> = hosts
        .iter()
        .enumerate()
        .map(|(n, h)| h.spawn(outside.path(), n))
        .collect();
    assert!(
        slack
            .wait_until(std::time::Duration::from_secs(60), || slack
                .open_connections()
                >= 2)
            .await,
        "two instances did not connect"
    );
    let dm = dm_channel(USER);
    // Each event goes to one instance; then Slack retries it twice, and the fake hands the
    // two retries to the two connections in turn (nothing else is sent between them unless
    // a retry makes a post), so each instance gets it again.
    let twice = |sent: &codebutler_test_support::slack::Sent| {
        let id = sent.envelope_id.clone();
        let slack = &slack;
        async move {
            assert!(slack.wait_acked(&id, WAIT).await, "not acknowledged");
            for acks in [2, 3] {
                slack.resend(&id);
                let acked = slack
                    .wait_until(WAIT, || {
                        slack.acks().iter().filter(|a| a.envelope_id == id).count() >= acks
                    })
                    .await;
                assert!(acked, "retry {} was not acknowledged", acks - 1);
            }
        }
    };
    let posts_in = |thread: &str| -> Vec<String> {
        slack
            .posts()
            .into_iter()
            .filter(|p| p.channel == dm && p.thread_ts.as_deref() == Some(thread))
            .map(|p| p.text)
            .collect()
    };
    let wait_in = |thread: String, text: &'static str| {
        let slack = &slack;
        let posts_in = &posts_in;
        async move {
            let ok = slack
                .wait_until(WAIT, || posts_in(&thread).iter().any(|p| p.contains(text)))
                .await;
            assert!(ok, "no {text:?} in {:?}", posts_in(&thread));
        }
    };

    let first = slack.direct_message(USER, "hello there", None).unwrap();
    wait_in(first.ts.clone(), WHICH_ONE).await;
    twice(&first).await;
    let answer = slack.direct_message(USER, "web", Some(&first.ts)).unwrap();
    wait_in(first.ts.clone(), "This conversation is about *web*").await;
    twice(&answer).await;

    model.script("DM-PG-Q", vec![Reply::text("Web, on PostgreSQL.")]);
    let asked = slack
        .direct_message(USER, "DM-PG-Q: what is this repository?", None)
        .unwrap();
    wait_in(asked.ts.clone(), "Web, on PostgreSQL.").await;
    twice(&asked).await;
    // A later message of the conversation: the choice is remembered, nothing is asked.
    model.script("DM-PG-LATER", vec![Reply::text("Still web.")]);
    let later = slack
        .direct_message(USER, "DM-PG-LATER: and its tests?", None)
        .unwrap();
    wait_in(later.ts.clone(), "Still web.").await;

    assert_eq!(posts_saying(&slack, &dm, WHICH_ONE), 1, "asked once");
    assert_eq!(
        posts_saying(&slack, &dm, "This conversation is about"),
        1,
        "confirmed once"
    );
    assert_eq!(
        posts_saying(&slack, &dm, "Web, on PostgreSQL."),
        1,
        "answered once"
    );
    assert_eq!(model.requests_for("DM-PG-Q").len(), 1, "one PM turn");
    for daemon in &mut daemons {
        daemon.signal("TERM");
        assert_eq!(
            daemon.wait_exit(WAIT).await.code(),
            Some(0),
            "{}",
            daemon.log()
        );
    }
    let stored = |schema: &str| {
        cluster
            .psql(
                &database,
                &format!(
                    "SELECT count(*) FROM codebutler_{schema}.messages WHERE channel_id = '{dm}'"
                ),
            )
            .trim()
            .to_owned()
    };
    assert_eq!(
        stored("web"),
        "2",
        "web holds the two questions after the choice"
    );
    assert_eq!(stored("api"), "0", "api holds none of the conversation");
    assert!(slack.violations().is_empty(), "{:?}", slack.violations());
}

/// Two instances on one PostgreSQL store. The instance that answered a thread stops (and
/// gives its leases up); the other gets `/codebutler pm cheap` for that thread, which no
/// instance holds: it takes the thread for the moment and records the choice, told in the
/// thread once (before, it said another instance held the thread, however often typed).
#[tokio::test]
async fn on_postgresql_the_pm_command_records_for_a_thread_no_instance_holds() {
    use crate::hosts::Host;
    use codebutler_test_support::postgres;
    use codebutler_test_support::slack::FakeSlack;
    const WEB: &str = "C0WEB";
    let cluster = postgres::shared();
    let database = cluster.create_database("pm_hosts");
    let url = cluster.url(&database);
    let slack = FakeSlack::start().await;
    let model = codebutler_test_support::model::FakeModel::start().await;
    let outside = tempfile::tempdir().unwrap();
    codebutler_test_support::gh::install_fake_gh(outside.path());
    let gh = outside.path().join("gh");
    let hosts: Vec<Host> = (0..2)
        .map(|_| Host::new(&slack, &model, &gh, &url))
        .collect();
    let mut first = hosts[0].spawn(outside.path(), 0);
    assert!(
        slack
            .wait_until(std::time::Duration::from_secs(60), || slack
                .open_connections()
                >= 1)
            .await,
        "the first instance did not connect"
    );
    model.script("PG-PM-Q", vec![Reply::text("First answer.")]);
    let thread = slack
        .user_message(WEB, USER, "PG-PM-Q: what is this repository?", None)
        .ts;
    let answered = slack
        .wait_until(WAIT, || posts_saying(&slack, WEB, "First answer.") == 1)
        .await;
    assert!(answered, "no answer: {:?}", slack.posts());
    first.signal("TERM");
    assert!(first.wait_exit(WAIT).await.success(), "{}", first.log());
    let _second = hosts[1].spawn(outside.path(), 1);

    // Typed until an instance records it (the second may still be connecting).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut answers = Vec::new();
    while !answers
        .last()
        .is_some_and(|a: &String| a.contains("answers with"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "never recorded: {answers:?}"
        );
        if slack.slash_command(WEB, USER, "pm cheap").is_some() {
            answers = slack
                .wait_ephemeral_answers(USER, answers.len() + 1, WAIT)
                .await;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    let told = slack
        .wait_until(WAIT, || posts_saying(&slack, WEB, "PM model is now") == 1)
        .await;
    assert!(told, "{:?}", slack.posts());
    let in_thread = slack
        .posts()
        .into_iter()
        .filter(|p| p.channel == WEB && p.text.contains("PM model is now"))
        .all(|p| p.thread_ts.as_deref() == Some(thread.as_str()));
    assert!(in_thread, "{:?}", slack.posts());
    assert!(slack.violations().is_empty(), "{:?}", slack.violations());
}

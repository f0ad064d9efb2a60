//! The Artist end to end: `@codebutler.artist` gets an image prompt with its price; "draw
//! it" has OpenAI's images API (the fake) draw it, an edit sending the image the person
//! shared; the image is uploaded into the thread; "use it at <path>" commits that very image
//! to a `codebutler/` branch on origin (a real bare repository), as CodeButler; a hostile
//! path is refused and commits nothing; a draw over the daily cap is refused with the cap's
//! figure and reaches no images API, and one over the person's own cap names theirs while
//! another person still draws; the image's price is in the usage report; a message for the
//! PM and the Artist gets an answer from each, from conversations of their own; a request for
//! a logo that names no one is handed by the PM to the Artist (once, across a kill); and the
//! Artist draws through OpenRouter's chat completions with the cost OpenRouter reported.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use codebutler_test_support::git;
use codebutler_test_support::images::{FakeImages, OPENAI_KEY, fake_png};
use codebutler_test_support::model::{Gate, Reply};
use codebutler_test_support::slack::{CHANNEL, SharedFile, Upload};
use serde_json::{Value, json};

use crate::harness::{Daemon, Env, USER, WAIT, content_text, say_and_wait_post};

const PROMPT: &str = "A flat orange fox head logo on white, thick outlines";
/// A second person in the channel.
const BOB: &str = "U0BOB";

/// The Artist's answer: its prompt, and `assets/fox.png`.
fn artist_answer() -> String {
    json!({"prompt": PROMPT, "path": "assets/fox.png", "size": "1024x1024", "note": "A fox, as asked."})
        .to_string()
}

/// Whether a recorded model request is the Artist's (its system prompt is `artist.md`'s).
fn is_artist(body: &Value) -> bool {
    content_text(&body["messages"][0]["content"]).contains("You are the Artist")
}

/// An env with the fake images API as OpenAI's, origin a bare repository, the Artist's
/// model answering [`artist_answer`] and the PM a fixed line; the daemon started with the
/// OpenAI key in its environment.
async fn artist_env(overrides: Value) -> (Env, FakeImages, PathBuf, Daemon) {
    let images = FakeImages::start().await;
    let mut config = json!({"openai": {"baseUrl": images.base_url()}});
    codebutler_test_support::merge(&mut config, overrides);
    let env = Env::with_config(config).await;
    let origin = env.outside.path().join("origin.git");
    git::push_to_new_origin(env.repo_path(), &origin);
    env.model.respond("", |body| {
        if is_artist(body) {
            Reply::text(artist_answer())
        } else {
            Reply::text("The PM's answer: a logo fits the README's header.")
        }
    });
    let daemon = env.start_with_env(&[("OPENAI_API_KEY", OPENAI_KEY)]).await;
    (env, images, origin, daemon)
}

/// Says `text` in `thread` and waits for the post that starts with `prefix`.
async fn say_to_artist(env: &Env, thread: &str, text: &str, prefix: &str) -> String {
    say_and_wait_post(env, thread, text, prefix).await
}

/// The uploads shared into `thread`.
fn uploads_in(env: &Env, thread: &str) -> Vec<Upload> {
    env.slack
        .uploads()
        .into_iter()
        .filter(|u| u.thread_ts.as_deref() == Some(thread))
        .collect()
}

/// Waits until `thread` has `n` uploads.
async fn wait_uploads(env: &Env, thread: &str, n: usize) -> Vec<Upload> {
    let ok = env
        .slack
        .wait_until(WAIT, || uploads_in(env, thread).len() >= n)
        .await;
    assert!(ok, "no upload in {:?}", env.post_texts(thread));
    uploads_in(env, thread)
}

/// The blob at `path` on `branch` of the bare repository `origin`, and its commit's author.
fn blob_on(origin: &Path, branch: &str, path: &str) -> Option<(Vec<u8>, String)> {
    let repo = git2::Repository::open_bare(origin).unwrap();
    let commit = repo
        .find_reference(&format!("refs/heads/{branch}"))
        .ok()?
        .peel_to_commit()
        .unwrap();
    let entry = commit.tree().unwrap().get_path(Path::new(path)).ok()?;
    let blob = repo.find_blob(entry.id()).unwrap();
    Some((
        blob.content().to_vec(),
        commit.author().name().unwrap_or_default().to_owned(),
    ))
}

/// The Artist's branch of a thread without a run.
fn artist_branch(thread: &str) -> String {
    format!("codebutler/artist-{}", thread.replace('.', ""))
}

#[tokio::test]
async fn the_artist_draws_on_approval_and_use_it_commits_that_image_to_origin() {
    let (env, images, origin, _daemon) = artist_env(json!({})).await;
    let thread = env.say("@codebutler.artist draw a logo for the README, a fox");
    let proposal = env.wait_post(&thread, |t| t.contains("draw it")).await;
    assert!(
        proposal.starts_with("*Artist:* A fox, as asked."),
        "{proposal}"
    );
    assert!(proposal.contains(PROMPT), "{proposal}");
    assert!(
        proposal.contains("`gpt-image-1` at 1024x1024, medium quality ($0.042 an image)"),
        "{proposal}"
    );
    assert!(proposal.contains("`assets/fox.png`"), "{proposal}");
    // The Artist's model read its prompt, its memory and the message; nothing is drawn yet.
    let asked: Vec<Value> = env
        .model
        .requests()
        .into_iter()
        .map(|r| r.body)
        .filter(is_artist)
        .collect();
    assert_eq!(asked.len(), 1);
    let system = content_text(&asked[0]["messages"][0]["content"]);
    assert!(system.contains("Visual style"), "{system}");
    assert!(
        content_text(&asked[0]["messages"][1]["content"]).contains("draw a logo for the README")
    );
    assert!(images.calls().is_empty());

    env.slack
        .user_message(CHANNEL, USER, "draw it", Some(&thread));
    let uploads = wait_uploads(&env, &thread, 1).await;
    let calls = images.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (
            calls[0].endpoint.as_str(),
            calls[0].model.as_str(),
            calls[0].prompt.as_str(),
            calls[0].size.as_str()
        ),
        ("generations", "gpt-image-1", PROMPT, "1024x1024")
    );
    let drawn = calls[0].answered.clone().unwrap();
    assert_eq!(drawn, fake_png(PROMPT, None));
    assert_eq!(
        uploads[0].bytes, drawn,
        "the thread shows the image the API drew"
    );
    env.wait_post(&thread, |t| t.contains("to put it elsewhere"))
        .await;

    let used = say_to_artist(
        &env,
        &thread,
        "use it at assets/brand/fox-logo.png",
        "*Artist:* Committed",
    )
    .await;
    let branch = artist_branch(&thread);
    assert!(used.contains(&format!("`{branch}`")), "{used}");
    let (blob, author) =
        blob_on(&origin, &branch, "assets/brand/fox-logo.png").unwrap_or_else(|| {
            panic!(
                "origin has no image on {branch}; {:?}",
                env.post_texts(&thread)
            )
        });
    assert_eq!(blob, drawn, "origin's blob is the image the API drew");
    assert_eq!(author, "CodeButler");
    // Used once: saying it again commits nothing more.
    let tip = git::git(&origin, &["rev-parse", &branch]);
    env.slack
        .user_message(CHANNEL, USER, "use it", Some(&thread));
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert_eq!(git::git(&origin, &["rev-parse", &branch]), tip);

    // The image's price is in the usage report at the close.
    env.slack.user_message(CHANNEL, USER, "done", Some(&thread));
    let report = env.wait_post(&thread, |t| t.starts_with("*PM:* 📊")).await;
    let artist = report
        .split("*Artist*")
        .nth(1)
        .unwrap_or_else(|| panic!("no Artist section in {report}"));
    assert!(artist.contains("Cost: $0.042"), "{report}");
    assert!(images.violations().is_empty(), "{:?}", images.violations());
    env.assert_clean();
}

#[tokio::test]
async fn an_edit_sends_the_image_the_person_shared() {
    let (env, images, _origin, _daemon) = artist_env(json!({})).await;
    let shared = fake_png("the old logo", None);
    let thread = env
        .slack
        .user_message_with_files(
            CHANNEL,
            USER,
            "@codebutler.artist make this logo orange",
            None,
            &[SharedFile::new("logo.png", "image/png", shared.clone())],
        )
        .ts;
    let proposal = env.wait_post(&thread, |t| t.contains("draw it")).await;
    assert!(
        proposal.contains("An edit of the image you shared"),
        "{proposal}"
    );
    env.slack
        .user_message(CHANNEL, USER, "draw it", Some(&thread));
    let uploads = wait_uploads(&env, &thread, 1).await;
    let calls = images.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].endpoint, "edits");
    assert_eq!(
        calls[0].image.as_deref(),
        Some(shared.as_slice()),
        "the base sent is the shared image"
    );
    assert_eq!(uploads[0].bytes, fake_png(PROMPT, Some(&shared)));
    assert!(images.violations().is_empty(), "{:?}", images.violations());
}

#[tokio::test]
async fn a_path_out_of_the_repository_or_into_git_is_refused_and_nothing_is_committed() {
    let (env, _images, origin, _daemon) = artist_env(json!({})).await;
    let thread = env.say("@codebutler.artist draw a logo, a fox");
    env.wait_post(&thread, |t| t.contains("draw it")).await;
    env.slack
        .user_message(CHANNEL, USER, "draw it", Some(&thread));
    wait_uploads(&env, &thread, 1).await;
    env.wait_post(&thread, |t| t.contains("to put it elsewhere"))
        .await;
    for hostile in ["../x.png", ".git/hooks/x", "/tmp/x.png"] {
        let refused = say_to_artist(
            &env,
            &thread,
            &format!("use it at {hostile}"),
            "*Artist:* I will not put the image there",
        )
        .await;
        assert!(refused.starts_with("*Artist:*"), "{refused}");
        // Each refusal is its own post.
        let count = env
            .post_texts(&thread)
            .iter()
            .filter(|t| t.contains("I will not put"))
            .count();
        assert!(count >= 1);
    }
    let ok = env
        .slack
        .wait_until(WAIT, || {
            env.post_texts(&thread)
                .iter()
                .filter(|t| t.contains("I will not put"))
                .count()
                == 3
        })
        .await;
    assert!(ok, "{:?}", env.post_texts(&thread));
    let branch = artist_branch(&thread);
    let refs = git::git(&origin, &["for-each-ref", "--format=%(refname)"]);
    assert!(!refs.contains("artist"), "{refs}");
    assert!(!env.repo_path().parent().unwrap().join("x.png").exists());
    assert!(!env.repo_path().join(".git/hooks/x").exists());
    let main = git2::Repository::open(env.repo_path()).unwrap();
    assert!(
        main.find_reference(&format!("refs/heads/{branch}"))
            .is_err()
    );
}

#[tokio::test]
async fn a_draw_over_the_daily_cap_is_refused_with_the_figure() {
    let (env, images, _origin, _daemon) =
        artist_env(json!({"access": {"maxCostPerDay": 0.04}})).await;
    let thread = env.say("@codebutler.artist draw a logo, a fox");
    env.wait_post(&thread, |t| t.contains("draw it")).await;
    env.slack
        .user_message(CHANNEL, USER, "draw it", Some(&thread));
    wait_uploads(&env, &thread, 1).await;
    env.wait_post(&thread, |t| t.contains("to put it elsewhere"))
        .await;
    // The first image cost $0.042: the cap of $0.04 is reached.
    let refusal = say_and_wait_post(&env, &thread, "again", "*Artist:* Not drawn").await;
    assert!(
        refusal.contains("this repository's daily cap (`access.maxCostPerDay`, $0.04) is reached"),
        "{refusal}"
    );
    assert!(
        refusal.contains("say _draw it_ again once the cap allows"),
        "{refusal}"
    );
    assert_eq!(
        images.calls().len(),
        1,
        "the refused draw reached no images API"
    );
    assert_eq!(uploads_in(&env, &thread).len(), 1);
}

#[tokio::test]
async fn the_pm_and_the_artist_both_answer_from_their_own_conversations() {
    let (env, _images, _origin, _daemon) = artist_env(json!({})).await;
    let thread = env.say("@codebutler.pm @codebutler.artist we need a logo, a fox");
    env.wait_post(&thread, |t| t.starts_with("*Artist:*")).await;
    let posts = env.post_texts(&thread);
    let pm = posts
        .iter()
        .position(|t| t.starts_with("*PM:* The PM's answer"))
        .expect("the PM answered");
    let artist = posts
        .iter()
        .position(|t| t.starts_with("*Artist:*"))
        .unwrap();
    assert!(pm < artist, "the PM answers first: {posts:?}");
    // A second message to the Artist: its conversation holds its own answer, not the PM's.
    env.slack.user_message(
        CHANNEL,
        USER,
        "@codebutler.artist smaller ears",
        Some(&thread),
    );
    let ok = env
        .slack
        .wait_until(WAIT, || {
            env.model
                .requests()
                .iter()
                .filter(|r| is_artist(&r.body))
                .count()
                == 2
        })
        .await;
    assert!(ok);
    let requests: Vec<Value> = env.model.requests().into_iter().map(|r| r.body).collect();
    let artist_calls: Vec<&Value> = requests.iter().filter(|b| is_artist(b)).collect();
    let pm_calls: Vec<&Value> = requests
        .iter()
        .filter(|b| content_text(&b["messages"][0]["content"]).contains("You are the PM"))
        .collect();
    assert!(!pm_calls.is_empty());
    let second = serde_json::to_string(artist_calls[1]).unwrap();
    assert!(
        second.contains("A flat orange fox head logo"),
        "the Artist's own answer is in its conversation"
    );
    assert!(
        !second.contains("The PM's answer"),
        "the PM's answer is not in the Artist's conversation"
    );
    for pm_call in pm_calls {
        let text = serde_json::to_string(pm_call).unwrap();
        assert!(
            !text.contains("A flat orange fox head logo"),
            "the Artist's answer is not in the PM's conversation"
        );
    }
    env.assert_clean();
}

/// In a thread whose Coder opened a pull request, "use it" commits the image on the pull
/// request's branch (pushed to origin, on top of the Coder's commit) and writes it into the
/// thread's worktree too, so the Coder's next commit keeps it.
#[tokio::test]
async fn use_it_in_a_thread_with_a_pull_request_commits_on_its_branch() {
    let images = FakeImages::start().await;
    let env = Env::with_runner(json!({
        "coder": {"maxTurns": 6, "timeout": 2},
        "openai": {"baseUrl": images.base_url()}
    }))
    .await;
    env.model
        .respond("an icon for the notes", |_| Reply::text(artist_answer()));
    let _daemon = env.start_with_env(&[("OPENAI_API_KEY", OPENAI_KEY)]).await;
    let (thread, origin) = crate::harness::thread_with_pr(&env, "ARTIST-PR", vec![]).await;
    let branch = "codebutler/work-on-artist-pr";
    let before = git::git(&origin, &["rev-parse", branch]);
    say_and_wait_post(
        &env,
        &thread,
        "@codebutler.artist an icon for the notes",
        "*Artist:* A fox",
    )
    .await;
    env.slack
        .user_message(CHANNEL, USER, "draw it", Some(&thread));
    wait_uploads(&env, &thread, 1).await;
    env.wait_post(&thread, |t| t.contains("to put it elsewhere"))
        .await;
    let used = say_to_artist(&env, &thread, "use it", "*Artist:* Committed").await;
    assert!(used.contains(&format!("`{branch}`")), "{used}");
    assert!(
        used.contains("The pull request, if one is open, has it"),
        "{used}"
    );
    let drawn = images.calls()[0].answered.clone().unwrap();
    let (blob, author) =
        blob_on(&origin, branch, "assets/fox.png").expect("the image on the PR's branch");
    assert_eq!(blob, drawn);
    assert_eq!(author, "CodeButler");
    // On top of the Coder's work, which is still there.
    assert_eq!(
        git::git(&origin, &["rev-parse", &format!("{branch}~1")]),
        before
    );
    assert!(blob_on(&origin, branch, "notes.txt").is_some());
    let worktree = crate::harness::worktree_of(&env, "work-on-artist-pr");
    assert_eq!(
        std::fs::read(worktree.join("assets/fox.png")).unwrap(),
        drawn
    );
    assert!(images.violations().is_empty(), "{:?}", images.violations());
}

/// The proposal's Draw it button draws it, once: a second press finds it drawn and draws
/// nothing more.
#[tokio::test]
async fn the_draw_it_button_draws_once() {
    let (env, images, _origin, _daemon) = artist_env(json!({})).await;
    let thread = env.say("@codebutler.artist draw a logo, a fox");
    env.wait_post(&thread, |t| t.contains("draw it")).await;
    let proposal = env
        .thread_posts(&thread)
        .into_iter()
        .find(|p| p.text.contains("draw it"))
        .unwrap();
    let draw_it = codebutler_controller::slack::interactive::DRAW_IT;
    env.slack
        .click(CHANNEL, USER, &proposal.ts, draw_it)
        .expect("the proposal shows Draw it");
    wait_uploads(&env, &thread, 1).await;
    env.wait_post(&thread, |t| t.contains("to put it elsewhere"))
        .await;
    env.slack.click(CHANNEL, USER, &proposal.ts, draw_it);
    // A typed message after the second press is answered after it: by then it was handled.
    say_and_wait_post(&env, &thread, "cancel", "*Artist:* Cancelled").await;
    assert_eq!(images.calls().len(), 1);
    assert_eq!(uploads_in(&env, &thread).len(), 1);
}

/// `access.maxCostPerUserPerDay` counts the images a person had drawn: once Alice's image
/// cost more than her cap, her next "again" is refused with her cap named, and reaches no
/// images API, while Bob, in the same thread, still has one drawn (charged to him).
#[tokio::test]
async fn a_person_over_their_daily_cap_through_images_is_refused_a_draw_and_another_is_not() {
    let (env, images, _origin, _daemon) =
        artist_env(json!({"access": {"maxCostPerUserPerDay": 0.05}})).await;
    let thread = env.say("@codebutler.artist draw a logo, a fox");
    env.wait_post(&thread, |t| t.contains("draw it")).await;
    env.slack
        .user_message(CHANNEL, USER, "draw it", Some(&thread));
    wait_uploads(&env, &thread, 1).await;
    env.wait_post(&thread, |t| t.contains("to put it elsewhere"))
        .await;
    // Alice's second image: $0.042 spent, under her $0.05 cap, so it is drawn.
    env.slack
        .user_message(CHANNEL, USER, "again", Some(&thread));
    wait_uploads(&env, &thread, 2).await;
    // $0.084 spent on the images Alice asked for: her third is refused.
    let refusal = say_and_wait_post(&env, &thread, "again", "*Artist:* Not drawn").await;
    assert!(
        refusal.contains(&format!(
            "<@{USER}>'s daily cap (`access.maxCostPerUserPerDay`, $0.05) is reached: $0.08 spent today"
        )),
        "{refusal}"
    );
    assert!(refusal.contains("It resets at 00:00 UTC"), "{refusal}");
    assert_eq!(
        images.calls().len(),
        2,
        "the refused draw reached no images API"
    );
    // Bob has spent nothing: his "again" is drawn.
    env.slack.user_message(CHANNEL, BOB, "again", Some(&thread));
    wait_uploads(&env, &thread, 3).await;
    assert_eq!(images.calls().len(), 3);
    assert!(images.violations().is_empty(), "{:?}", images.violations());
}

const OPENROUTER_IMAGE_MODEL: &str = "google/gemini-2.5-flash-image-preview";

/// `artist.provider: "openrouter"`: the image is drawn by an image model through OpenRouter's
/// chat completions (the fake provider), from the prompt the Artist proposed; the thread
/// shows that very PNG; the cost OpenRouter reported is what the usage report says, and
/// what the next proposal quotes. An edit sends the shared image as a `data:` URI.
#[tokio::test]
async fn the_artist_draws_through_openrouter_with_the_cost_it_reported() {
    let images = FakeImages::start().await;
    let env = Env::with_config(json!({
        "openai": {"baseUrl": images.base_url()},
        "artist": {"provider": "openrouter", "model": OPENROUTER_IMAGE_MODEL}
    }))
    .await;
    env.model.list_image_model(OPENROUTER_IMAGE_MODEL);
    env.model.price_image(OPENROUTER_IMAGE_MODEL, 0.25);
    env.model.respond("", |body| {
        if is_artist(body) {
            Reply::text(artist_answer())
        } else {
            Reply::text("The PM's answer.")
        }
    });
    let _daemon = env.start().await;
    let thread = env.say("@codebutler.artist draw a logo for the README, a fox");
    let proposal = env.wait_post(&thread, |t| t.contains("draw it")).await;
    assert!(
        proposal.contains(&format!(
            "`{OPENROUTER_IMAGE_MODEL}` at 1024x1024, medium quality (price not known before the first image is drawn)"
        )),
        "{proposal}"
    );
    env.slack
        .user_message(CHANNEL, USER, "draw it", Some(&thread));
    let uploads = wait_uploads(&env, &thread, 1).await;
    let calls = env.model.image_calls();
    assert_eq!(calls.len(), 1, "one image asked of OpenRouter");
    assert_eq!(
        (calls[0].model.as_str(), calls[0].prompt.as_str()),
        (OPENROUTER_IMAGE_MODEL, PROMPT)
    );
    assert_eq!(calls[0].image, None);
    assert_eq!(
        calls[0].answered.as_deref(),
        Some(&fake_png(PROMPT, None)[..])
    );
    assert_eq!(uploads[0].bytes, fake_png(PROMPT, None));
    assert!(images.calls().is_empty(), "OpenAI's images API is not used");
    let drawn = env
        .wait_post(&thread, |t| t.contains("to put it elsewhere"))
        .await;
    assert!(
        drawn.contains("about $0.250 an image: what the last one cost"),
        "{drawn}"
    );

    // An edit: the shared image goes to OpenRouter as the base.
    let shared = fake_png("the old logo", None);
    env.slack.user_message_with_files(
        CHANNEL,
        USER,
        "@codebutler.artist make this logo orange",
        Some(&thread),
        &[SharedFile::new("logo.png", "image/png", shared.clone())],
    );
    env.wait_post(&thread, |t| t.contains("An edit of the image you shared"))
        .await;
    env.slack
        .user_message(CHANNEL, USER, "draw it", Some(&thread));
    let uploads = wait_uploads(&env, &thread, 2).await;
    let calls = env.model.image_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].image.as_deref(), Some(shared.as_slice()));
    assert_eq!(uploads[1].bytes, fake_png(PROMPT, Some(&shared)));

    env.slack.user_message(CHANNEL, USER, "done", Some(&thread));
    let report = env.wait_post(&thread, |t| t.starts_with("*PM:* 📊")).await;
    let artist = report
        .split("*Artist*")
        .nth(1)
        .unwrap_or_else(|| panic!("no Artist section in {report}"));
    // Two images at $0.25 as OpenRouter reported, and the Artist's two prompt calls.
    assert!(artist.contains("Cost: $0.500"), "{report}");
    env.assert_clean();
}

/// Whether a recorded model request is the PM's.
fn is_pm(body: &Value) -> bool {
    content_text(&body["messages"][0]["content"]).contains("You are the PM")
}

/// The names of the tools a request offered.
fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// A message that asks for a logo without naming the Artist: the PM, offered `ask_artist`
/// because the Artist can draw, hands it over and says so in one line; the Artist answers
/// that same message with its proposal, Draw it and all. The daemon is killed after the
/// hand-off, while the Artist's model works: after the restart the PM is not asked again and
/// the thread gets one hand-off line and one proposal, which draws.
#[tokio::test]
async fn the_pm_hands_a_request_for_a_logo_to_the_artist_once_across_a_kill() {
    let images = FakeImages::start().await;
    let env = Env::with_config(json!({"openai": {"baseUrl": images.base_url()}})).await;
    let gate = Gate::new();
    let held = gate.clone();
    let artist_asked = Arc::new(AtomicUsize::new(0));
    let counter = artist_asked.clone();
    env.model.respond("", move |body| {
        if is_artist(body) {
            // The first answer is lost with the daemon.
            if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                Reply::held(&held, Reply::text(artist_answer()))
            } else {
                Reply::text(artist_answer())
            }
        } else if body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
        {
            Reply::text("Handing this to the Artist.")
        } else {
            Reply::tool_call(
                "ask_artist",
                json!({"request": "a fox logo for the README"}).to_string(),
            )
        }
    });
    let key = [("OPENAI_API_KEY", OPENAI_KEY)];
    let mut daemon = env.start_with_env(&key).await;
    let thread = env.say("make us a logo for the README, a fox");
    env.wait_post(&thread, |t| t == "*PM:* Handing this to the Artist.")
        .await;
    assert!(
        env.slack.wait_until(WAIT, || gate.arrived()).await,
        "the Artist was never asked: {:?}",
        env.post_texts(&thread)
    );
    daemon.kill9().await;

    let _daemon = env.start_with_env(&key).await;
    let proposal = env.wait_post(&thread, |t| t.contains("draw it")).await;
    assert!(
        proposal.starts_with("*Artist:* A fox, as asked."),
        "{proposal}"
    );
    assert!(proposal.contains(PROMPT), "{proposal}");
    assert!(proposal.contains("($0.042 an image)"), "{proposal}");
    let bodies: Vec<Value> = env.model.requests().into_iter().map(|r| r.body).collect();
    let pm: Vec<&Value> = bodies.iter().filter(|b| is_pm(b)).collect();
    assert_eq!(
        pm.len(),
        2,
        "the tool call and the line after it, not again after the restart"
    );
    assert!(tool_names(pm[0]).contains(&"ask_artist".to_owned()));
    let artist: Vec<&Value> = bodies.iter().filter(|b| is_artist(b)).collect();
    assert_eq!(artist.len(), 2, "one lost with the daemon, one answered");
    assert!(
        serde_json::to_string(artist[1])
            .unwrap()
            .contains("make us a logo for the README, a fox"),
        "the Artist reads the person's message"
    );

    // The proposal is a real one: Draw it draws its prompt.
    env.slack
        .user_message(CHANNEL, USER, "draw it", Some(&thread));
    let uploads = wait_uploads(&env, &thread, 1).await;
    assert_eq!(uploads[0].bytes, fake_png(PROMPT, None));
    env.wait_post(&thread, |t| t.contains("to put it elsewhere"))
        .await;
    let posts = env.post_texts(&thread);
    let count = |what: &str| posts.iter().filter(|t| t.contains(what)).count();
    assert_eq!(count("Handing this to the Artist."), 1, "{posts:?}");
    assert_eq!(count("Say _draw it_"), 1, "{posts:?}");
    assert_eq!(images.calls().len(), 1);
    gate.open();
    env.assert_clean();
}

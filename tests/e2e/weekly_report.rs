//! The weekly cost summary (`reports.weekly`), end to end: the store holds last week's model
//! calls (and one of this week's, which is not last week's), the daemon posts one summary in
//! the channel — per person, per model, the most expensive threads, from those rows — and a
//! restart posts nothing more. The daemon has no clock a test can move, so the calls are
//! dated in the week due now.

use chrono::{Days, Utc};
use codebutler_controller::journal::weekly::week_due;
use codebutler_test_support::slack::{self, Post};
use serde_json::json;

use crate::harness::{Env, WAIT, open_store};

/// The bot's top-level posts in the channel that are weekly reports.
fn reports(env: &Env) -> Vec<Post> {
    env.slack
        .posts()
        .into_iter()
        .filter(|p| p.channel == slack::CHANNEL && p.thread_ts.is_none())
        .filter(|p| p.text.contains("Weekly costs"))
        .collect()
}

#[tokio::test]
async fn last_weeks_spend_is_posted_in_the_channel_once() {
    let env = Env::with_config(json!({"reports": {"weekly": true}})).await;
    // The store, with its schema, as the daemon makes it.
    let store = env.repo_path().join(".codebutler/store.db");
    std::fs::create_dir_all(store.parent().unwrap()).unwrap();
    codebutler_controller::store::Store::open(&store)
        .await
        .unwrap()
        .close()
        .await;
    let monday = week_due(Utc::now());
    let tuesday = format!("{}T10:00:00.000000Z", monday + Days::new(1));
    let sunday = format!("{}T23:00:00.000000Z", monday + Days::new(6));
    let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let pool = open_store(&env).await;
    for (ts, user, text) in [
        (
            "1700000001.000100",
            "U0ALICE",
            "Speed up the login page\nit is slow",
        ),
        ("1700000002.000100", "U0BOB", "Add a *dark* mode"),
    ] {
        sqlx::query(
            "INSERT INTO threads (channel_id, thread_ts, state, created_at, updated_at) \
             VALUES ($1, $2, 'closed_merged', $3, $3)",
        )
        .bind(slack::CHANNEL)
        .bind(ts)
        .bind(&tuesday)
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO messages (channel_id, ts, thread_ts, user_id, text, received_at, state) \
             VALUES ($1, $2, $2, $3, $4, $5, 'processed')",
        )
        .bind(slack::CHANNEL)
        .bind(ts)
        .bind(user)
        .bind(text)
        .bind(&tuesday)
        .execute(&pool)
        .await
        .unwrap();
    }
    for (id, thread, model, cost, at) in [
        ("u1", "1700000001.000100", "m/big", 1.25, &tuesday),
        ("u2", "1700000001.000100", "m/big", 0.5, &sunday),
        ("u3", "1700000002.000100", "m/cheap", 0.25, &tuesday),
        // This week's: not last week's report.
        ("u4", "1700000002.000100", "m/cheap", 9.0, &now),
    ] {
        sqlx::query(
            "INSERT INTO usage (id, channel_id, thread_ts, role, model, prompt_tokens, \
             completion_tokens, cached_tokens, cost, created_at) \
             VALUES ($1, $2, $3, 'coder', $4, 100, 10, 0, $5, $6)",
        )
        .bind(id)
        .bind(slack::CHANNEL)
        .bind(thread)
        .bind(model)
        .bind(cost)
        .bind(at)
        .execute(&pool)
        .await
        .unwrap();
    }
    pool.close().await;

    let mut daemon = env.start().await;
    let posted = env
        .slack
        .wait_until(WAIT, || !reports(&env).is_empty())
        .await;
    assert!(posted, "no weekly report; log:\n{}", daemon.log());
    let report = reports(&env).remove(0).text;
    let sunday_date = monday + Days::new(6);
    for expected in [
        format!("Weekly costs, {monday} to {sunday_date} (UTC):* $2.00 in 3 model calls"),
        "`U0ALICE`: $1.75 (2 calls)".to_owned(),
        "`U0BOB`: $0.25 (1 call)".to_owned(),
        "`m/big`: $1.75 (2 calls)".to_owned(),
        "`m/cheap`: $0.25 (1 call)".to_owned(),
        "Speed up the login page".to_owned(),
    ] {
        assert!(
            report.contains(&expected),
            "{expected:?} missing from:\n{report}"
        );
    }
    assert!(!report.contains("it is slow"), "{report}");
    assert!(!report.contains("$9"), "{report}");

    // A stop waits for the report's first look, so after a restart and its stop the
    // second instance has looked too.
    daemon.signal("TERM");
    daemon.wait_exit(WAIT).await;
    let mut again = env.start().await;
    again.signal("TERM");
    again.wait_exit(WAIT).await;
    assert_eq!(reports(&env).len(), 1, "the week was reported again");
}

//! The store on a real PostgreSQL server (the test process's throw-away cluster from
//! `codebutler_test_support::postgres`): the migrations run there unchanged, and the real
//! daemon with `store.url` on it answers a question and carries a thread from plan to
//! approval to pull request, keeping every row in its repository's own schema.

use codebutler_controller::store::{MIGRATOR, repository_name, schema_name};
use codebutler_test_support::git;
use codebutler_test_support::model::Reply;
use codebutler_test_support::postgres;
use serde_json::{Value, json};
use sqlx::Row;
use sqlx::postgres::PgPoolOptions;

use crate::harness::{
    Env, assert_each_effect_posted_once, runner_env, say_and_wait_run, thread_with_plan, write,
};

#[tokio::test]
async fn migrations_run_on_postgresql() {
    let cluster = postgres::shared();
    let database = cluster.create_database("migrations");
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(&cluster.url(&database))
        .await
        .unwrap();
    MIGRATOR.run(&pool).await.unwrap();
    // Running them again is a no-op, as on every start.
    MIGRATOR.run(&pool).await.unwrap();

    // The statements the store relies on work here too.
    for _ in 0..2 {
        sqlx::query(
            "INSERT INTO messages (channel_id, ts, thread_ts, user_id, text, event_id, received_at) \
             VALUES ($1, $2, $2, 'U1', 'hi', 'Ev1', 'now') ON CONFLICT (channel_id, ts) DO NOTHING",
        )
        .bind("C1")
        .bind("1.1")
        .execute(&pool)
        .await
        .unwrap();
    }
    sqlx::query(
        "INSERT INTO usage (id, channel_id, thread_ts, role, model, prompt_tokens, completion_tokens, cached_tokens, cost, created_at) \
         VALUES ('u1', 'C1', '1.1', 'pm', 'm', 10, 5, 0, 0.25, 'now')",
    )
    .execute(&pool)
    .await
    .unwrap();
    let row = sqlx::query(
        "SELECT COUNT(*) AS n, (SELECT COALESCE(SUM(cost), 0.0) FROM usage) AS cost FROM messages WHERE state = 'pending'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(row.get::<i64, _>("n"), 1);
    assert_eq!(row.get::<f64, _>("cost"), 0.25);
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        tables,
        [
            "_sqlx_migrations",
            "artist_drawings",
            "check_failures",
            "coder_questions",
            "conversation_choices",
            "conversation_messages",
            "coordination_notices",
            "home_viewers",
            "instances",
            "memory_proposals",
            "merge_order",
            "message_files",
            "messages",
            "outbox",
            "pr_descriptions",
            "review_comments",
            "review_rounds",
            "reviewer_reviews",
            "run_checkpoints",
            "run_conversation",
            "run_events",
            "runs",
            "thread_budgets",
            "thread_leases",
            "thread_scope",
            "thread_steps",
            "threads",
            "usage"
        ]
    );
    pool.close().await;
}

/// Points the env's global config at `url` for the store.
fn use_store(env: &Env, url: &str) {
    let path = env.home.path().join("config.json");
    let mut global: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    global["store"] = json!({ "url": url });
    env.write_global(global);
}

#[tokio::test]
async fn the_daemon_on_postgresql_answers_plans_and_opens_a_pull_request_in_its_own_schema() {
    let cluster = postgres::shared();
    let database = cluster.create_database("daemon");
    let url = cluster.url(&database);
    let env = runner_env(json!({"maxTurns": 6, "timeout": 2})).await;
    use_store(&env, &url);
    git::push_to_new_origin(env.repo_path(), &env.outside.path().join("origin.git"));
    let question = "how do we deploy? PG-QUESTION";
    env.model
        .script(question, vec![Reply::text("Run `make deploy`.")]);
    env.model.script(
        "PG-TOKEN",
        vec![
            write("notes.txt", "one\n"),
            Reply::tool_call("GitCommit", r#"{"message": "Add the notes"}"#),
            Reply::tool_call("OpenPR", r#"{"title": "Add notes", "body": "Adds notes."}"#),
            Reply::text("The PR is open."),
        ],
    );
    let daemon = env.start().await;

    let asked = env.say(question);
    let posts = env.wait_thread_posts(&asked, 1).await;
    assert_eq!(posts[0].text, "*PM:* Run `make deploy`.");

    let thread = thread_with_plan(&env, "start the notes", "PG-TOKEN").await;
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark",
        "{}",
        daemon.log()
    );
    assert!(
        env.slack
            .wait_until(crate::harness::WAIT, || env
                .post_texts(&thread)
                .iter()
                .any(|t| t.contains("https://github.com/acme/app/pull/7")))
            .await,
        "{:?}",
        env.post_texts(&thread)
    );
    assert_each_effect_posted_once(&env);

    // Everything is in the repository's schema, nothing in `public` or a SQLite file.
    let schema = schema_name(&repository_name(
        &codebutler_controller::layout::Layout::new(env.repo_path()),
    ))
    .unwrap();
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap();
    let row = sqlx::query(&format!(
        "SELECT state, pr_number, pr_url FROM \"{schema}\".threads WHERE thread_ts = $1"
    ))
    .bind(&thread)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (
            row.get::<String, _>("state"),
            row.get::<Option<i64>, _>("pr_number"),
        ),
        ("pr_opened".to_owned(), Some(7))
    );
    let answered: i64 = sqlx::query_scalar(&format!(
        "SELECT COUNT(*) FROM \"{schema}\".messages WHERE state = 'processed' AND thread_ts IN ($1, $2)"
    ))
    .bind(&asked)
    .bind(&thread)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(answered, 3, "the question, the request and the approval");
    let runs: Vec<(String, String)> = sqlx::query_as(&format!(
        "SELECT state, branch FROM \"{schema}\".runs WHERE thread_ts = $1"
    ))
    .bind(&thread)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].0, "finished");
    let usage: i64 = sqlx::query_scalar(&format!(
        "SELECT COUNT(*) FROM \"{schema}\".usage WHERE role = 'coder' AND thread_ts = $1"
    ))
    .bind(&thread)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(usage, 4, "one coder call per scripted reply");
    let public: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(public, 0, "nothing outside the repository's schema");
    pool.close().await;
    assert!(
        !env.repo_path().join(".codebutler/store.db").exists(),
        "no SQLite store beside the server"
    );
}

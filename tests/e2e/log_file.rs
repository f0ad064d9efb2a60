//! The service's log file, end to end through the real daemon: besides stderr, its lines go
//! to `$CODEBUTLER_HOME/logs/codebutler-<repository>.log`, rotated past `logging.maxFileMB`
//! with `logging.keepFiles` older files kept, each mode 0600, never holding a token; a link
//! planted where a rotated file goes is replaced, never followed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use codebutler_test_support::model::Reply;
use codebutler_test_support::slack;
use serde_json::json;

use crate::harness::{Env, OUTSIDE_SECRET, WAIT};

/// The log file of the env's repository, as the service names it.
pub fn log_path(env: &Env) -> PathBuf {
    let repo = env.repo_path().file_name().unwrap().to_string_lossy();
    env.home.path().join("logs").join(format!(
        "codebutler-{}.log",
        codebutler_controller::config::sanitized_name(&repo)
    ))
}

/// `path` with `.n` after it.
pub fn rotated(path: &Path, n: u32) -> PathBuf {
    PathBuf::from(format!("{}.{n}", path.display()))
}

/// Asks the PM `n`th question in a new thread and waits for its answer.
pub async fn ask(env: &Env, n: u32) {
    let question = format!("what does the Makefile do? LOGFILE-{n}");
    env.model.script(
        &question,
        vec![Reply::text(format!("It deploys. ANSWER-{n}"))],
    );
    let thread = env.say(&question);
    let answered = env
        .slack
        .wait_until(WAIT, || {
            env.post_texts(&thread)
                .iter()
                .any(|t| t.contains(&format!("ANSWER-{n}")))
        })
        .await;
    assert!(answered, "no answer in {thread}");
}

#[tokio::test]
async fn the_service_logs_to_a_file_that_rotates_by_size_keeping_the_newest() {
    // Files of about 1 KB, two old ones kept.
    let env = Env::with_config(json!({"logging": {"maxFileMB": 0.001, "keepFiles": 2}})).await;
    let log = log_path(&env);
    // A link where the oldest kept file goes, pointing outside: the first rotation drops
    // it.
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    let target = env.outside.path().join("secret.txt");
    std::os::unix::fs::symlink(&target, rotated(&log, 2)).unwrap();
    let _daemon = env.start().await;
    let regular = |p: PathBuf| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
    let mut n = 0;
    while !(regular(rotated(&log, 1)) && regular(rotated(&log, 2))) && n < 40 {
        ask(&env, n).await;
        n += 1;
    }
    // More than the kept files hold, so the oldest lines are dropped as new ones come.
    for _ in 0..8 {
        ask(&env, n).await;
        n += 1;
    }
    assert!(
        regular(rotated(&log, 2)),
        "no second rotation after {n} questions"
    );
    assert!(
        !rotated(&log, 3).exists()
            && std::fs::read_dir(log.parent().unwrap()).unwrap().count() == 3,
        "more files kept than keepFiles"
    );
    let files = [log.clone(), rotated(&log, 1), rotated(&log, 2)];
    let mut all = String::new();
    for file in &files {
        let meta =
            std::fs::symlink_metadata(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(meta.is_file(), "{}", file.display());
        assert_eq!(
            meta.permissions().mode() & 0o777,
            0o600,
            "{}",
            file.display()
        );
        let text = std::fs::read_to_string(file).unwrap();
        // Rotated before a line would pass the size; each line is whole.
        if file != &log {
            assert!(
                meta.len() <= 1048 || text.lines().count() == 1,
                "{}",
                file.display()
            );
            assert!(text.ends_with('\n'), "{}", file.display());
        }
        all.push_str(&text);
    }
    // The newest lines are in the current file, the older ones in .1 then .2, in the
    // plain tagged format of stderr.
    let last = n - 1;
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains(&format!("LOGFILE-{last}\""))
            || std::fs::read_to_string(rotated(&log, 1))
                .unwrap()
                .contains(&format!("LOGFILE-{last}\"")),
        "the last question is not in the newest files"
    );
    assert!(all.contains(" RSP  pm: \"It deploys."), "{all}");
    assert!(
        !all.contains("LOGFILE-0\""),
        "the oldest lines were kept: {all}"
    );
    for secret in [
        slack::BOT_TOKEN,
        slack::APP_TOKEN,
        "sk-or-test-key",
        OUTSIDE_SECRET,
    ] {
        assert!(!all.contains(secret), "a secret in the log file");
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), OUTSIDE_SECRET);
    env.assert_clean();
}

//! What a worktree's preparation made stays out of the Coder's pull request: real
//! preparations (`pip install -e .` leaving `*.egg-info/`, `npm install` rewriting the lock
//! file) in the real sandbox, the Coder's scripted GitCommit and OpenPR, and the outcome
//! read from the bare `origin` the branch was pushed to and from what the model was told.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use codebutler_test_support::git;
use codebutler_test_support::model::Reply;
use serde_json::{Value, json};

use crate::harness::{Env, thread_with_plan, tool_results, worktree_of, write};

/// How long a run whose preparation downloads packages may take on a busy machine.
const PREPARED_RUN: Duration = Duration::from_secs(300);

fn bash(command: &str) -> Reply {
    Reply::tool_call("Bash", json!({ "command": command }).to_string())
}

fn commit(message: &str, include: &[&str]) -> Reply {
    Reply::tool_call(
        "GitCommit",
        json!({ "message": message, "include": include }).to_string(),
    )
}

fn open_pr(title: &str) -> Reply {
    Reply::tool_call(
        "OpenPR",
        json!({ "title": title, "body": "The change." }).to_string(),
    )
}

/// An env whose Coder runs in the real sandbox with `extra` merged into the repository's
/// config, the repository holding `files` as well, pushed to a bare `origin` (in
/// `env.outside`) whose default branch the worktrees start from.
async fn env_with_project(extra: Value, files: &[(&str, &str)]) -> Env {
    let mut config = json!({"coder": {"maxTurns": 10, "timeout": 5}});
    codebutler_test_support::merge(&mut config, extra);
    let env = Env::with_runner(config).await;
    git::commit_files(env.repo_path(), files, "The project");
    git::push_to_new_origin(env.repo_path(), &origin(&env));
    env
}

fn origin(env: &Env) -> std::path::PathBuf {
    env.outside.path().join("origin.git")
}

/// The approval of `thread`'s plan, and the reaction its run ends with.
async fn approve_and_wait(env: &Env, thread: &str) -> String {
    let approval = env.reply(thread, "go");
    let mut ending = String::new();
    let ended =
        env.slack
            .wait_until(PREPARED_RUN, || {
                if let Some(r) = env.slack.reactions().into_iter().find(|r| {
                    r.ts == approval.ts && (r.name == "white_check_mark" || r.name == "x")
                }) {
                    ending = r.name;
                }
                !ending.is_empty()
            })
            .await;
    assert!(ended, "the run never ended: {:?}", env.thread_texts(thread));
    ending
}

/// Every file path of the commit `rev` (a branch or `<branch>~1`) in the bare `origin`.
fn origin_paths(origin: &Path, rev: &str) -> BTreeSet<String> {
    let listed = git::git(origin, &["ls-tree", "-r", "--name-only", rev]);
    listed.lines().map(str::to_owned).collect()
}

/// The content of `path` in the commit `rev` of the bare `origin`.
fn origin_file(origin: &Path, rev: &str, path: &str) -> String {
    git::git(origin, &["show", &format!("{rev}:{path}")])
}

/// The GitCommit results the model was sent (each tool result that reports a commit).
fn commit_results(env: &Env, token: &str) -> Vec<String> {
    let requests = env.model.requests_for(token);
    let last = requests.last().expect("the Coder made model calls");
    tool_results(&last.body)
        .split("\n---\n")
        .filter(|r| r.starts_with("committed ") || r.starts_with("nothing to commit"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_python_preparations_egg_info_and_the_checks_pycache_stay_out_of_the_pull_request() {
    let env = env_with_project(
        json!({"sandbox": {"memoryMB": 2048}}),
        &[
            (
                "pyproject.toml",
                "[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n\n\
                 [project]\nname = \"widgets\"\nversion = \"0.1.0\"\n\n\
                 [tool.setuptools]\npackages = [\"widgets\"]\n",
            ),
            ("widgets/__init__.py", "VERSION = \"0.1.0\"\n"),
        ],
    )
    .await;
    env.model.script(
        "PY-BYPRODUCTS",
        vec![
            write("widgets/shapes.py", "def area(w, h):\n    return w * h\n"),
            // The Coder's own check leaves bytecode behind, beside the sources (the sandbox
            // sends Python's caches to the worktree's cache directory; a tool that clears
            // the prefix, as this check does, writes `__pycache__` in the tree).
            bash(
                "env -u PYTHONPYCACHEPREFIX python -c 'import widgets.shapes as s; print(s.area(2, 3))'",
            ),
            commit("Add shapes", &[]),
            open_pr("Add shapes"),
            Reply::text("Done."),
        ],
    );
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "please add shapes", "PY-BYPRODUCTS").await;
    assert_eq!(
        approve_and_wait(&env, &thread).await,
        "white_check_mark",
        "{:?}",
        env.thread_texts(&thread)
    );

    // The preparation really ran `pip install -e .`, and the check really ran Python.
    let worktree = worktree_of(&env, "work-on-py-byproducts");
    assert!(worktree.join("widgets.egg-info/PKG-INFO").is_file());
    assert!(worktree.join("widgets/__pycache__").is_dir());

    // Origin's branch holds the Coder's file and none of the by-products.
    let branch = "codebutler/work-on-py-byproducts";
    let paths = origin_paths(&origin(&env), branch);
    assert!(paths.contains("widgets/shapes.py"), "{paths:?}");
    assert!(paths.contains("pyproject.toml"), "{paths:?}");
    let leaked: Vec<&String> = paths
        .iter()
        .filter(|p| p.contains(".egg-info") || p.contains("__pycache__") || p.contains(".venv"))
        .collect();
    assert!(leaked.is_empty(), "by-products reached origin: {leaked:?}");

    // The model was told what the commit took and what it left out.
    let results = commit_results(&env, "PY-BYPRODUCTS");
    assert_eq!(results.len(), 1, "{results:?}");
    let result = &results[0];
    assert!(result.contains(": 1 file (widgets/shapes.py)"), "{result}");
    let left_out = result
        .lines()
        .find(|l| l.starts_with("left out: "))
        .unwrap_or_else(|| panic!("no left-out line: {result}"));
    assert!(
        left_out.contains("widgets.egg-info") && left_out.contains("widgets/__pycache__"),
        "{left_out}"
    );
    assert!(left_out.contains("(build by-products)"), "{left_out}");
    assert!(left_out.contains("GitCommit's include"), "{left_out}");
    env.assert_clean();
}

#[tokio::test]
async fn an_npm_install_that_rewrote_the_lock_file_stays_out_until_the_coder_includes_it() {
    const STALE_LOCK: &str = "{\n  \"name\": \"acme\",\n  \"version\": \"1.0.0\",\n  \"lockfileVersion\": 3,\n  \"requires\": true,\n  \"packages\": {\n    \"\": {\n      \"name\": \"acme\",\n      \"version\": \"1.0.0\"\n    }\n  }\n}\n";
    let env = env_with_project(
        // npm needs more address space than the harness's 768 MB.
        json!({"sandbox": {"memoryMB": 4096}, "build": {"initCommand": "npm install"}}),
        &[
            (
                "package.json",
                "{\"name\":\"acme\",\"version\":\"1.0.0\",\"private\":true,\"dependencies\":{\"is-number\":\"^7.0.0\"}}\n",
            ),
            // A dependency was added without updating the lock: `npm install` rewrites it.
            ("package-lock.json", STALE_LOCK),
            ("src/index.js", "module.exports = {};\n"),
        ],
    )
    .await;
    env.model.script(
        "NPM-LOCK",
        vec![
            write("src/feature.js", "module.exports = (n) => n + 1;\n"),
            commit("Add the feature", &[]),
            // Then the lock file, on purpose.
            commit("Update the lock file", &["package-lock.json"]),
            open_pr("Add the feature"),
            Reply::text("Done."),
        ],
    );
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "please add the feature", "NPM-LOCK").await;
    assert_eq!(
        approve_and_wait(&env, &thread).await,
        "white_check_mark",
        "{:?}",
        env.thread_texts(&thread)
    );

    // The preparation really rewrote the lock file and installed the package.
    let worktree = worktree_of(&env, "work-on-npm-lock");
    let rewritten = std::fs::read_to_string(worktree.join("package-lock.json")).unwrap();
    assert!(rewritten.contains("node_modules/is-number"), "{rewritten}");
    assert!(
        worktree
            .join("node_modules/is-number/package.json")
            .is_file()
    );

    // The first commit on origin has the Coder's file and the lock file as committed before;
    // the second, asked for by name, has the lock file the preparation wrote.
    let origin = origin(&env);
    let branch = "codebutler/work-on-npm-lock";
    let first = format!("{branch}~1");
    let paths = origin_paths(&origin, &first);
    assert!(paths.contains("src/feature.js"), "{paths:?}");
    assert!(
        !paths.iter().any(|p| p.starts_with("node_modules/")),
        "{paths:?}"
    );
    assert_eq!(
        origin_file(&origin, &first, "package-lock.json"),
        STALE_LOCK.trim_end()
    );
    assert_eq!(
        origin_file(&origin, branch, "package-lock.json"),
        rewritten.trim_end()
    );
    assert!(
        !origin_paths(&origin, branch)
            .iter()
            .any(|p| p.starts_with("node_modules/"))
    );

    // The model was told what each commit took and what the first one left out.
    let results = commit_results(&env, "NPM-LOCK");
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[0].contains(": 1 file (src/feature.js)\nleft out: package-lock.json (as the worktree's preparation left them); node_modules (build by-products); to commit one on purpose, name it in GitCommit's include"),
        "{}",
        results[0]
    );
    assert!(
        results[1]
            .contains(": 1 file (package-lock.json)\nleft out: node_modules (build by-products)"),
        "{}",
        results[1]
    );
    env.assert_clean();
}

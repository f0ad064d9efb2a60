//! The git fixture: fixed identity and dates, what each commit helper stages.

use std::path::Path;

use git2::Oid;

use crate::git::{
    EMAIL, EPOCH, NAME, commit_all, commit_files, commit_paths, git, init, write_files,
};

#[test]
fn the_same_files_and_messages_give_the_same_commits() {
    let ids: Vec<(Oid, Oid)> = (0..2)
        .map(|_| {
            let dir = tempfile::tempdir().unwrap();
            let repo = init(dir.path());
            write_files(dir.path(), &[("a.txt", "a\n"), ("sub/b.txt", "b\n")]);
            let first = commit_all(&repo, "First");
            let second = commit_files(dir.path(), &[("c.txt", "c\n")], "Second");
            (first, second)
        })
        .collect();
    assert_eq!(ids[0], ids[1]);
}

#[test]
fn commits_stack_on_the_branch_with_the_fixed_identity_a_minute_apart() {
    let dir = tempfile::tempdir().unwrap();
    let repo = init(dir.path());
    write_files(dir.path(), &[("a.txt", "a\n")]);
    let first = commit_all(&repo, "First");
    let second = commit_files(dir.path(), &[("sub/b.txt", "b\n")], "Second");
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    assert_eq!(head.id(), second);
    assert_eq!(head.parent_ids().collect::<Vec<_>>(), [first]);
    assert_eq!(head.author().name().ok(), Some(NAME));
    assert_eq!(head.committer().email().ok(), Some(EMAIL));
    assert_eq!(head.time().seconds(), EPOCH + 60);
    assert!(
        head.tree()
            .unwrap()
            .get_path(Path::new("sub/b.txt"))
            .is_ok()
    );
    assert!(head.tree().unwrap().get_path(Path::new("a.txt")).is_ok());
    // Nothing left to stage: the work tree is what was committed.
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
    assert_eq!(
        git(dir.path(), &["log", "--format=%an %s"]),
        "Alice Second\nAlice First"
    );
}

#[test]
fn commit_paths_leaves_other_files_out_and_a_failing_git_is_an_assertion() {
    let dir = tempfile::tempdir().unwrap();
    let repo = init(dir.path());
    write_files(dir.path(), &[("in/a.txt", "a\n"), ("out.txt", "o\n")]);
    commit_paths(&repo, &["in"], "Only in/");
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "?? out.txt");
    let failed = std::panic::catch_unwind(|| git(dir.path(), &["no-such-command"]));
    assert!(failed.is_err());
}

#[test]
fn merge_layers_objects_key_by_key_and_replaces_the_rest() {
    let mut base = serde_json::json!({"a": {"x": 1, "y": [1, 2]}, "b": "keep", "c": {"z": 1}});
    crate::merge(
        &mut base,
        serde_json::json!({"a": {"y": [3], "w": true}, "c": 5, "d": null}),
    );
    assert_eq!(
        base,
        serde_json::json!({"a": {"x": 1, "y": [3], "w": true}, "b": "keep", "c": 5, "d": null})
    );
}

#[test]
fn a_new_origin_holds_the_current_branch_as_its_head() {
    let dir = tempfile::tempdir().unwrap();
    let repo = init(&dir.path().join("work"));
    write_files(repo.workdir().unwrap(), &[("a.txt", "a\n")]);
    let id = commit_all(&repo, "First");
    let (bare, branch) =
        crate::git::push_to_new_origin(repo.workdir().unwrap(), &dir.path().join("origin.git"));
    assert!(bare.is_bare());
    assert_eq!(bare.refname_to_id(&branch).unwrap(), id);
    assert_eq!(bare.head().unwrap().target(), Some(id));
    assert_eq!(
        repo.find_remote("origin").unwrap().url().ok(),
        dir.path().join("origin.git").to_str()
    );
}

#[test]
fn commit_all_records_deletions_too() {
    let dir = tempfile::tempdir().unwrap();
    let repo = init(dir.path());
    write_files(dir.path(), &[("keep.txt", "k\n"), ("gone/old.txt", "o\n")]);
    commit_all(&repo, "First");
    std::fs::remove_dir_all(dir.path().join("gone")).unwrap();
    commit_all(&repo, "Remove gone/");
    let tree = repo.head().unwrap().peel_to_tree().unwrap();
    assert!(tree.get_path(Path::new("gone/old.txt")).is_err());
    assert!(tree.get_path(Path::new("keep.txt")).is_ok());
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
}

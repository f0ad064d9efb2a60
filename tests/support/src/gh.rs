//! A fake `gh` command: put `dir` first on the daemon's `PATH`.

use std::path::{Path, PathBuf};

const SCRIPT: &str = r#"#!/bin/sh
# Fake `gh` written by codebutler-test-support. Logs every invocation to gh.log next to itself.
log="$(dirname "$0")/gh.log"
printf '%s\n' "$*" >> "$log"

if [ "$1" = "--version" ]; then
  echo "gh version 2.99.0-fake (codebutler-test-support)"
  exit 0
fi

if { [ "$1" = "pr" ] || [ "$1" = "issue" ]; } && [ "$2" = "view" ]; then
  kind="$1"
  shift 2
  number=""
  json=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --json) json=1; shift ;;
      --json=*) json=1 ;;
      -q|--jq|-t|--template|-R|--repo) shift ;;
      -*) ;;
      *) if [ -z "$number" ]; then number="$1"; fi ;;
    esac
    [ $# -gt 0 ] && shift
  done
  case "$number" in
    ''|*[!0-9]*)
      echo "fake gh: expected a number after '$kind view', got '$number'" >&2
      exit 1 ;;
  esac
  if [ "$json" = 1 ]; then
    printf '{"number":%s,"title":"Fake PR %s","state":"OPEN","url":"https://github.com/acme/app/pull/%s","statusCheckRollup":[],"comments":[]}\n' "$number" "$number" "$number"
    exit 0
  fi
fi

if [ "$1" = "pr" ] && [ "$2" = "create" ]; then
  # The body comes on stdin (`--body-file -`); keep it for the test.
  cat > "$(dirname "$0")/pr-body.md"
  echo "Creating pull request for the branch"
  echo
  echo "https://github.com/acme/app/pull/7"
  exit 0
fi

echo "fake gh: unsupported invocation: gh $*" >&2
exit 1
"#;

/// Writes an executable `gh` script into `dir` and returns its path.
///
/// Every invocation appends its arguments (space-joined, one line) to `dir/gh.log`.
/// `gh pr view <n> --json …` and `gh issue view <n> --json …` print
/// `{"number":n,"title":"Fake PR n","state":"OPEN","url":"https://github.com/acme/app/pull/n","statusCheckRollup":[],"comments":[]}`;
/// `gh pr create …` saves its stdin (the body, given with `--body-file -`) to `dir/pr-body.md`
/// and prints `https://github.com/acme/app/pull/7` as its last line;
/// `gh --version` prints a version line; anything else exits 1 with a message on stderr.
pub fn install_fake_gh(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).expect("fake gh: create dir");
    let path = dir.join("gh");
    // Write to a temp name and rename, so a concurrent exec never sees a half-written file.
    let tmp = dir.join(".gh.tmp");
    std::fs::write(&tmp, SCRIPT).expect("fake gh: write script");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).expect("fake gh: chmod");
    std::fs::rename(&tmp, &path).expect("fake gh: rename");
    path
}

/// The invocations logged by the fake `gh` in `dir`, one per element (empty if none yet).
pub fn gh_log(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("gh.log"))
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The body the last `gh pr create` read on stdin, if any.
pub fn gh_pr_body(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join("pr-body.md")).ok()
}

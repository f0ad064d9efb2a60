//! A fake `gh` command: put `dir` first on the daemon's `PATH`.

use std::path::{Path, PathBuf};

const SCRIPT: &str = r#"#!/bin/sh
# Fake `gh` written by codebutler-test-support. Logs every invocation to gh.log next to itself.
here="$(dirname "$0")"
log="$here/gh.log"
printf '%s\n' "$*" >> "$log"

# The pull request's state, as the test set it (FakePr::set): state, mergeable, checks
# (none|passing|failing|pending), merged_at, closed_at.
state=OPEN; mergeable=MERGEABLE; checks=none; merged_at=null; closed_at=null
if [ -f "$here/pr.env" ]; then . "$here/pr.env"; fi

save_state() {
  tmp="$here/.pr.env.tmp"
  printf 'state=%s\nmergeable=%s\nchecks=%s\nmerged_at=%s\nclosed_at=%s\n' \
    "$state" "$mergeable" "$checks" "$merged_at" "$closed_at" > "$tmp"
  mv "$tmp" "$here/pr.env"
}

rollup() {
  case "$checks" in
    passing) printf '[{"__typename":"CheckRun","name":"test","status":"COMPLETED","conclusion":"SUCCESS"}]' ;;
    failing) printf '[{"__typename":"CheckRun","name":"build","status":"COMPLETED","conclusion":"SUCCESS"},{"__typename":"CheckRun","name":"test","status":"COMPLETED","conclusion":"FAILURE"}]' ;;
    pending) printf '[{"__typename":"CheckRun","name":"test","status":"IN_PROGRESS","conclusion":""}]' ;;
    *) printf '[]' ;;
  esac
}

quoted() { if [ "$1" = null ]; then printf 'null'; else printf '"%s"' "$1"; fi; }

number_or_die() {
  case "$1" in
    ''|*[!0-9]*)
      echo "fake gh: expected a number after '$2', got '$1'" >&2
      exit 1 ;;
  esac
}

if [ "$1" = "--version" ]; then
  echo "gh version 2.99.0-fake (codebutler-test-support)"
  exit 0
fi

if { [ "$1" = "pr" ] || [ "$1" = "issue" ]; } && [ "$2" = "view" ]; then
  kind="$1"
  shift 2
  number=""
  json=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --json) shift; json="$1" ;;
      --json=*) json="${1#--json=}" ;;
      -q|--jq|-t|--template|-R|--repo) shift ;;
      -*) echo "fake gh: unsupported flag $1 (unknown flag: $1)" >&2; exit 1 ;;
      *) if [ -z "$number" ]; then number="$1"; fi ;;
    esac
    [ $# -gt 0 ] && shift
  done
  number_or_die "$number" "$kind view"
  if [ -z "$json" ]; then
    echo "fake gh: unsupported invocation: view without --json" >&2
    exit 1
  fi
  for field in $(printf '%s' "$json" | tr ',' ' '); do
    case "$field" in
      number|title|state|url|author|statusCheckRollup|comments|mergeable|mergedAt|closedAt|body|headRefName) ;;
      *) echo "Unknown JSON field: \"$field\"" >&2; exit 1 ;;
    esac
  done
  printf '{"number":%s,"title":"Fake PR %s","state":"%s","mergeable":"%s","mergedAt":%s,"closedAt":%s,"url":"https://github.com/acme/app/pull/%s","statusCheckRollup":%s,"comments":[]}\n' \
    "$number" "$number" "$state" "$mergeable" "$(quoted "$merged_at")" "$(quoted "$closed_at")" "$number" "$(rollup)"
  exit 0
fi

if [ "$1" = "pr" ] && [ "$2" = "edit" ]; then
  number="$3"
  number_or_die "$number" "pr edit"
  if [ "$4" != "--body-file" ] || [ "$5" != "-" ] || [ $# -ne 5 ]; then
    echo "fake gh: unsupported invocation: gh $* (only 'pr edit <n> --body-file -')" >&2
    exit 1
  fi
  if [ "$state" != OPEN ] && [ "$state" != MERGED ] && [ "$state" != CLOSED ]; then
    echo "GraphQL: Could not resolve to a PullRequest with the number of $number." >&2
    exit 1
  fi
  cat > "$here/pr-edit-body.md"
  echo "https://github.com/acme/app/pull/$number"
  exit 0
fi

if [ "$1" = "pr" ] && [ "$2" = "merge" ]; then
  shift 2
  number=""
  strategy=""
  admin=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --squash|-s) strategy="squash" ;;
      --merge|-m) strategy="merge" ;;
      --rebase|-r) strategy="rebase" ;;
      --admin) admin=1 ;;
      -*) echo "fake gh: unsupported flag $1 (unknown flag: $1)" >&2; exit 1 ;;
      *) if [ -z "$number" ]; then number="$1"; fi ;;
    esac
    shift
  done
  number_or_die "$number" "pr merge"
  if [ -z "$strategy" ]; then
    echo "--merge, --rebase, or --squash required when not running interactively" >&2
    exit 1
  fi
  printf '%s\n' "$strategy" >> "$here/merges.log"
  if [ -f "$here/merge.block" ]; then
    : > "$here/merge.waiting"
    while [ -f "$here/merge.block" ]; do sleep 0.05; done
    # GitHub decides when the merge reaches it: the state as it is now.
    if [ -f "$here/pr.env" ]; then . "$here/pr.env"; fi
  fi
  case "$state" in
    MERGED) echo "X Pull request #$number was already merged" >&2; exit 1 ;;
    CLOSED) echo "X Pull request #$number is closed" >&2; exit 1 ;;
  esac
  if [ "$mergeable" = CONFLICTING ]; then
    echo "X Pull request #$number is not mergeable: the merge commit cannot be cleanly created." >&2
    exit 1
  fi
  if [ "$admin" = 0 ] && { [ "$checks" = failing ] || [ "$checks" = pending ]; }; then
    echo "X Pull request #$number is not mergeable: the base branch policy prohibits the merge." >&2
    echo "To have the pull request merged after all the requirements have been met, add the \`--auto\` flag." >&2
    echo "To use administrator privileges to immediately merge the pull request, add the \`--admin\` flag." >&2
    exit 1
  fi
  state=MERGED
  merged_at="2026-11-24T12:00:00Z"
  closed_at="$merged_at"
  save_state
  case "$strategy" in
    squash) echo "✓ Squashed and merged pull request #$number" ;;
    merge) echo "✓ Merged pull request #$number" ;;
    rebase) echo "✓ Rebased and merged pull request #$number" ;;
  esac
  exit 0
fi

if [ "$1" = "pr" ] && [ "$2" = "create" ]; then
  head=""
  prev=""
  for arg in "$@"; do
    [ "$prev" = "--head" ] && head="$arg"
    prev="$arg"
  done
  # Like GitHub: one open pull request per head branch.
  if [ -n "$head" ] && grep -qxF "$head" "$here/pr-heads" 2>/dev/null; then
    echo "a pull request for branch \"$head\" into branch \"main\" already exists:" >&2
    echo "https://github.com/acme/app/pull/7" >&2
    exit 1
  fi
  [ -n "$head" ] && echo "$head" >> "$here/pr-heads"
  # The body comes on stdin (`--body-file -`); keep it for the test.
  cat > "$here/pr-body.md"
  # #7, unless the test asked for numbers in order (7, 8, 9… one per head branch, as
  # GitHub gives each pull request its own).
  created=7
  if [ -f "$here/pr-numbers" ]; then
    created=$((6 + $(wc -l < "$here/pr-heads")))
  fi
  echo "Creating pull request for the branch"
  echo
  echo "https://github.com/acme/app/pull/$created"
  exit 0
fi

echo "fake gh: unsupported invocation: gh $*" >&2
exit 1
"#;

/// Writes an executable `gh` script into `dir` and returns its path.
///
/// Every invocation appends its arguments (space-joined, one line) to `dir/gh.log`. The
/// pull request's state is the one [`FakePr::set`] wrote (by default open, mergeable, no
/// checks), shared by every number:
/// - `gh pr view <n> --json …` and `gh issue view <n> --json …` print
///   `{"number":n,"title":"Fake PR n","state":"OPEN","mergeable":"MERGEABLE","mergedAt":null,
///   "closedAt":null,"url":"https://github.com/acme/app/pull/n","statusCheckRollup":[],"comments":[]}`
///   with the state's values; an unknown JSON field or flag fails like `gh`;
/// - `gh pr edit <n> --body-file -` saves its stdin to `dir/pr-edit-body.md`;
/// - `gh pr merge <n> --squash|--merge|--rebase [--admin]` appends the strategy to
///   `dir/merges.log`, waits while `dir/merge.block` exists (having created
///   `dir/merge.waiting`), then fails like `gh` when the PR is merged, closed, conflicting,
///   or (without `--admin`) has failing or pending checks, and otherwise marks it merged;
/// - `gh pr create …` saves its stdin (the body, given with `--body-file -`) to
///   `dir/pr-body.md` and prints `https://github.com/acme/app/pull/7` as its last line
///   (after [`number_prs_in_order`], #7, #8, #9… one per head branch); a
///   second `--head` of the same branch fails like GitHub's one open PR per branch
///   ("a pull request for branch … already exists:" and its address, on stderr);
/// - `gh --version` prints a version line; anything else exits 1 with a message on stderr.
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

/// The fake's pull request state, as `gh pr view` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakePr {
    /// `OPEN`, `MERGED` or `CLOSED`.
    pub state: &'static str,
    /// `MERGEABLE`, `CONFLICTING` or `UNKNOWN`.
    pub mergeable: &'static str,
    /// `none`, `passing`, `failing` (a `test` check failed) or `pending` (`test` running).
    pub checks: &'static str,
}

impl Default for FakePr {
    fn default() -> Self {
        Self {
            state: "OPEN",
            mergeable: "MERGEABLE",
            checks: "none",
        }
    }
}

impl FakePr {
    /// Makes the fake `gh` in `dir` answer with this state from now on (a merged or closed
    /// PR gets a fixed `mergedAt`/`closedAt`).
    pub fn set(&self, dir: &Path) {
        let at = "2026-11-24T12:00:00Z";
        let merged_at = if self.state == "MERGED" { at } else { "null" };
        let closed_at = if self.state == "OPEN" { "null" } else { at };
        let text = format!(
            "state={}\nmergeable={}\nchecks={}\nmerged_at={merged_at}\nclosed_at={closed_at}\n",
            self.state, self.mergeable, self.checks,
        );
        let tmp = dir.join(".pr.env.set");
        std::fs::write(&tmp, text).expect("fake gh: write pr.env");
        std::fs::rename(&tmp, dir.join("pr.env")).expect("fake gh: rename pr.env");
    }

    /// The state the fake `gh` in `dir` holds now.
    pub fn state(dir: &Path) -> String {
        std::fs::read_to_string(dir.join("pr.env"))
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|l| l.strip_prefix("state=").map(str::to_owned))
            })
            .unwrap_or_else(|| "OPEN".into())
    }
}

/// The strategies `gh pr merge` was called with, in order.
pub fn gh_merges(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("merges.log"))
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The body the last `gh pr edit --body-file -` read on stdin, if any.
pub fn gh_edited_body(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join("pr-edit-body.md")).ok()
}

/// Makes the fake's next `gh pr merge` wait (until [`release_merge`]).
pub fn block_merge(dir: &Path) {
    std::fs::write(dir.join("merge.block"), "").expect("fake gh: write merge.block");
}

/// Whether a `gh pr merge` is waiting on [`block_merge`].
pub fn merge_waiting(dir: &Path) -> bool {
    dir.join("merge.waiting").exists()
}

/// Lets a waiting `gh pr merge` go on.
pub fn release_merge(dir: &Path) {
    std::fs::remove_file(dir.join("merge.block")).expect("fake gh: remove merge.block");
}

/// Makes the fake `gh` in `dir` number the pull requests it creates in order, one per head
/// branch (#7, #8, #9…), as GitHub does, for tests with several pull requests open at once.
pub fn number_prs_in_order(dir: &Path) {
    std::fs::write(dir.join("pr-numbers"), "").expect("fake gh: write pr-numbers");
}

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
    failing) printf '[{"__typename":"CheckRun","name":"build","status":"COMPLETED","conclusion":"SUCCESS","detailsUrl":"https://github.com/acme/app/actions/runs/4241/job/1","workflowName":"CI"},{"__typename":"CheckRun","name":"test","status":"COMPLETED","conclusion":"FAILURE","detailsUrl":"https://github.com/acme/app/actions/runs/4242/job/2","workflowName":"CI"}]' ;;
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

# --- review loop (codebutler-test-support: reviews, line comments, replies, run logs) ---
# The login gh acts as (`gh api user`).
login() { cat "$here/login" 2>/dev/null || printf 'codebutler-bot'; }

# A JSON array of the objects in a file holding one per line (empty or missing: []).
json_list() {
  if [ -s "$1" ]; then
    printf '['; awk 'BEGIN{ORS=""} NR>1{print ","} {print}' "$1"; printf ']'
  else
    printf '[]'
  fi
}

# Standard input as one JSON string.
json_string() {
  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/\\t/g' -e 's/\r/\\r/g' |
    awk 'BEGIN{ORS=""; print "\""} NR>1{print "\\n"} {print} END{print "\""}'
}

# The pull request's head commit: the tip of the branch the last `gh pr create` named, in the
# repository gh runs in (where the controller copies its branches), as GitHub would see it
# after the push.
head_oid() {
  if [ -f "$here/head-oid" ]; then cat "$here/head-oid"; return; fi
  branch="$(tail -n 1 "$here/pr-heads" 2>/dev/null)"
  oid=""
  [ -n "$branch" ] && oid="$(git rev-parse --verify -q "refs/heads/$branch" 2>/dev/null)"
  printf '%s' "${oid:-0000000000000000000000000000000000000000}"
}

# After GitHub took a comment: with `answer.lost` (once), the answer never reaches the
# caller, as when the connection drops.
lost_answer() {
  if [ -f "$here/answer.lost" ]; then
    rm -f "$here/answer.lost"
    echo "HTTP 502: Bad Gateway (the comment was created)" >&2
    exit 1
  fi
}

# A sequence number for new comments' ids.
next_id() {
  n=$(( $(cat "$here/next-id" 2>/dev/null || echo 900000) + 1 ))
  echo "$n" > "$here/next-id"
  printf '%s' "$n"
}

if [ "$1" = "api" ]; then
  shift
  method=GET; input=""; paginate=0; endpoint=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --method|-X) shift; method="$1" ;;
      --input) shift; input="$1" ;;
      --paginate) paginate=1 ;;
      -*) echo "fake gh: unsupported flag $1 (unknown flag: $1)" >&2; exit 1 ;;
      *) if [ -z "$endpoint" ]; then endpoint="$1"; else echo "accepts 1 arg(s), received 2" >&2; exit 1; fi ;;
    esac
    shift
  done
  case "$method $endpoint" in
    "GET user")
      printf '{"login":"%s","id":4242,"node_id":"U_fake","type":"User","site_admin":false}\n' "$(login)"
      exit 0 ;;
    "GET repos/{owner}/{repo}/pulls/"*/comments)
      printf '%s\n' "$(json_list "$here/line-comments.jsonl")"
      exit 0 ;;
    "POST repos/{owner}/{repo}/pulls/"*/comments/*/replies)
      if [ "$input" != "-" ]; then echo "fake gh: replies need --input -" >&2; exit 1; fi
      rest="${endpoint#repos/\{owner\}/\{repo\}/pulls/}"
      number="${rest%%/*}"
      parent="${rest#*/comments/}"; parent="${parent%/replies}"
      number_or_die "$number" "pulls"; number_or_die "$parent" "comments"
      parent_line="$(grep "\"id\":$parent," "$here/line-comments.jsonl" 2>/dev/null | head -n 1)"
      if [ -z "$parent_line" ]; then
        echo "gh: Not Found (HTTP 404)" >&2
        exit 1
      fi
      case "$parent_line" in
        *'"in_reply_to_id":'[0-9]*)
          echo "gh: Validation Failed: in_reply_to_id is not a top-level comment (HTTP 422)" >&2
          exit 1 ;;
      esac
      path="$(printf '%s' "$parent_line" | sed 's/.*"path":"\([^"]*\)".*/\1/')"
      body="$(cat)"
      printf '%s\t%s\n' "$parent" "$body" >> "$here/replies.log"
      id="$(next_id)"
      printf '{"id":%s,"in_reply_to_id":%s,"user":{"login":"%s","type":"User"},"path":"%s","line":null,"original_line":null,"html_url":"https://github.com/acme/app/pull/%s#discussion_r%s",%s\n' \
        "$id" "$parent" "$(login)" "$path" "$number" "$id" "${body#\{}" >> "$here/line-comments.jsonl"
      lost_answer
      printf '{"id":%s,"in_reply_to_id":%s}\n' "$id" "$parent"
      exit 0 ;;
  esac
  echo "gh: Not Found (HTTP 404)" >&2
  exit 1
fi

if [ "$1" = "pr" ] && [ "$2" = "comment" ]; then
  number="$3"
  number_or_die "$number" "pr comment"
  if [ "$4" != "--body-file" ] || [ "$5" != "-" ] || [ $# -ne 5 ]; then
    echo "fake gh: unsupported invocation: gh $* (only 'pr comment <n> --body-file -')" >&2
    exit 1
  fi
  body="$(cat)"
  printf '%s\n\036\n' "$body" >> "$here/pr-comments.log"
  id="$(next_id)"
  printf '{"id":"IC_fake%s","author":{"login":"%s"},"authorAssociation":"NONE","body":%s,"createdAt":"2026-11-25T12:00:00Z","includesCreatedEdit":false,"isMinimized":false,"minimizedReason":"","reactionGroups":[],"url":"https://github.com/acme/app/pull/%s#issuecomment-%s","viewerDidAuthor":true}\n' \
    "$id" "$(login)" "$(printf '%s' "$body" | json_string)" "$number" "$id" >> "$here/comments.jsonl"
  lost_answer
  echo "https://github.com/acme/app/pull/$number#issuecomment-$id"
  exit 0
fi

if [ "$1" = "run" ] && [ "$2" = "view" ]; then
  run_id="$3"
  number_or_die "$run_id" "run view"
  if [ "$4" != "--log-failed" ] || [ $# -ne 4 ]; then
    echo "fake gh: unsupported invocation: gh $* (only 'run view <id> --log-failed')" >&2
    exit 1
  fi
  if [ -f "$here/run-$run_id.log" ]; then
    cat "$here/run-$run_id.log"
  else
    echo "could not find any workflow run with ID $run_id" >&2
    exit 1
  fi
  exit 0
fi
# --- end of the review loop ---

if [ "$1" = "--version" ]; then
  echo "gh version 2.99.0-fake (codebutler-test-support)"
  exit 0
fi

# `gh auth status`, as gh 2.23 prints it: logged in, until the test logs gh out (log_out_gh).
if [ "$1" = "auth" ] && [ "$2" = "status" ] && [ $# -eq 2 ]; then
  if [ -f "$here/logged-out" ]; then
    echo "You are not logged into any GitHub hosts. Run gh auth login to authenticate." >&2
    exit 1
  fi
  printf 'github.com\n  ✓ Logged in to github.com as %s (GH_TOKEN)\n  ✓ Token: *******************\n' "$(login)" >&2
  exit 0
fi

# --- Referenced pull requests and issues (gh_items.rs) -------------------------------------
# `gh repo view --json nameWithOwner`: the repository's name (`repo-name`, default acme/app).
if [ "$1" = "repo" ] && [ "$2" = "view" ]; then
  if [ "$3" != "--json" ] || [ "$4" != "nameWithOwner" ] || [ $# -ne 4 ]; then
    echo "fake gh: unsupported invocation: gh $* (only 'repo view --json nameWithOwner')" >&2
    exit 1
  fi
  name="acme/app"
  [ -f "$here/repo-name" ] && name="$(cat "$here/repo-name")"
  printf '{"nameWithOwner":"%s"}\n' "$name"
  exit 0
fi
# Once a test wrote items (FakeItem::install), `gh pr view|diff` and `gh issue view` answer
# from `items/<pr|issue>/<n>/`: one file per JSON field, `diff` for `pr diff`, `fail` for
# an error to print. A number without an item fails as GitHub answers it.
if [ -d "$here/items" ] && { [ "$1" = "pr" ] || [ "$1" = "issue" ]; } && { [ "$2" = "view" ] || [ "$2" = "diff" ]; }; then
  kind="$1"; verb="$2"
  shift 2
  number=""; json=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --json) shift; json="$1" ;;
      --json=*) json="${1#--json=}" ;;
      -*) echo "unknown flag: $1" >&2; exit 1 ;;
      *) if [ -z "$number" ]; then number="$1"; fi ;;
    esac
    [ $# -gt 0 ] && shift
  done
  number_or_die "$number" "$kind $verb"
  item="$here/items/$kind/$number"
  if [ -f "$item/fail" ]; then cat "$item/fail" >&2; exit 1; fi
  if [ ! -d "$item" ]; then
    if [ "$kind" = pr ]; then
      echo "GraphQL: Could not resolve to a PullRequest with the number of $number. (repository.pullRequest)" >&2
    else
      echo "GraphQL: Could not resolve to an issue or pull request with the number of $number. (repository.issue)" >&2
    fi
    exit 1
  fi
  if [ "$verb" = diff ]; then
    if [ -n "$json" ] || [ "$kind" != pr ]; then echo "fake gh: unsupported invocation: $kind diff" >&2; exit 1; fi
    cat "$item/diff"
    exit 0
  fi
  if [ -z "$json" ]; then echo "fake gh: unsupported invocation: view without --json" >&2; exit 1; fi
  printf '{'
  sep=""
  for field in $(printf '%s' "$json" | tr ',' ' '); do
    if [ ! -f "$item/$field" ]; then
      echo "Unknown JSON field: \"$field\"" >&2
      exit 1
    fi
    printf '%s"%s":' "$sep" "$field"
    cat "$item/$field"
    sep=","
  done
  printf '}\n'
  exit 0
fi
# --- end of referenced pull requests and issues ---------------------------------------------

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
      headRefOid|reviewDecision|reviews) ;;
      *) echo "Unknown JSON field: \"$field\"" >&2; exit 1 ;;
    esac
  done
  printf '{"number":%s,"title":"Fake PR %s","state":"%s","mergeable":"%s","mergedAt":%s,"closedAt":%s,"url":"https://github.com/acme/app/pull/%s","statusCheckRollup":%s,"comments":%s,"reviews":%s,"reviewDecision":"%s","headRefOid":"%s"}\n' \
    "$number" "$number" "$state" "$mergeable" "$(quoted "$merged_at")" "$(quoted "$closed_at")" "$number" "$(rollup)" \
    "$(json_list "$here/comments.jsonl")" "$(json_list "$here/reviews.jsonl")" "$(cat "$here/review-decision" 2>/dev/null)" "$(head_oid)"
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
/// - `gh --version` prints a version line; `gh auth status` says it is logged in (until
///   [`log_out_gh`]); anything else exits 1 with a message on stderr.
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

/// Logs the fake `gh` in `dir` out: `gh auth status` then fails as gh's does when it is
/// logged in to no host.
pub fn log_out_gh(dir: &Path) {
    std::fs::write(dir.join("logged-out"), "").expect("fake gh: log out");
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

/// The review loop's side of the fake `gh` (its own block of the script above):
/// - `gh api user` prints `{"login": …}` with [`set_login`]'s login (`codebutler-bot`);
/// - `gh api [--paginate] repos/{owner}/{repo}/pulls/<n>/comments` prints the line comments
///   [`add_line_comment`] added, in the REST API's shape, and the replies posted;
/// - `gh api --method POST repos/{owner}/{repo}/pulls/<n>/comments/<id>/replies --input -`
///   records the reply ([`gh_replies`]) and lists it among the line comments as the login's,
///   or fails with GitHub's 404 for an unknown comment and its 422 for a reply to a reply;
/// - `gh pr comment <n> --body-file -` records the comment ([`gh_pr_comments`]) and lists it
///   among the conversation comments;
/// - `gh pr view` prints the reviews and conversation comments added ([`add_review`],
///   [`add_conversation_comment`]), [`set_review_decision`]'s decision and as `headRefOid`
///   the tip of the branch of the last `gh pr create` in the repository gh runs in;
/// - `gh run view <id> --log-failed` prints [`set_run_log`]'s log, or fails like `gh` for a
///   run it does not know; the `failing` checks' `test` run is 4242;
/// - after [`lose_next_answer`] the next reply or comment is made but its answer is lost
///   (HTTP 502).
pub fn set_login(dir: &Path, login: &str) {
    std::fs::write(dir.join("login"), login).expect("fake gh: write login");
}

/// Appends one JSON object as a line of `dir/<file>` (written whole, then renamed).
fn append_line(dir: &Path, file: &str, value: &serde_json::Value) {
    let path = dir.join(file);
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    text.push_str(&value.to_string());
    text.push('\n');
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).expect("fake gh: write comments");
    std::fs::rename(&tmp, path).expect("fake gh: rename comments");
}

/// A line comment on `path:line` by `author`, as the REST API lists it.
pub fn add_line_comment(dir: &Path, id: u64, author: &str, path: &str, line: u64, body: &str) {
    let bot = author.ends_with("[bot]");
    append_line(
        dir,
        "line-comments.jsonl",
        &serde_json::json!({
            "url": format!("https://api.github.com/repos/acme/app/pulls/comments/{id}"),
            "pull_request_review_id": 55,
            "id": id,
            "node_id": format!("PRRC_{id}"),
            "diff_hunk": "@@ -1,2 +1,3 @@",
            "path": path,
            "position": line,
            "original_position": line,
            "commit_id": "0000000000000000000000000000000000000000",
            "original_commit_id": "0000000000000000000000000000000000000000",
            "user": {"login": author, "id": 1, "type": if bot { "Bot" } else { "User" }},
            "body": body,
            "created_at": "2026-11-25T10:00:00Z",
            "updated_at": "2026-11-25T10:00:00Z",
            "html_url": format!("https://github.com/acme/app/pull/7#discussion_r{id}"),
            "author_association": "MEMBER",
            "start_line": null,
            "original_start_line": null,
            "start_side": null,
            "line": line,
            "original_line": line,
            "side": "RIGHT",
            "subject_type": "line"
        }),
    );
}

/// A line comment answering the line comment `in_reply_to` (in its thread), as the REST
/// API lists it.
pub fn add_line_comment_reply(dir: &Path, id: u64, in_reply_to: u64, author: &str, body: &str) {
    append_line(
        dir,
        "line-comments.jsonl",
        &serde_json::json!({
            "id": id,
            "in_reply_to_id": in_reply_to,
            "user": {"login": author, "id": 2, "type": "User"},
            "body": body,
            "path": "notes.txt",
            "line": 1,
            "original_line": 1,
            "html_url": format!("https://github.com/acme/app/pull/7#discussion_r{id}"),
            "created_at": "2026-11-25T10:05:00Z"
        }),
    );
}

/// A comment on the pull request's conversation, as `gh pr view --json comments` prints it.
pub fn add_conversation_comment(dir: &Path, id: &str, author: &str, body: &str) {
    append_line(
        dir,
        "comments.jsonl",
        &serde_json::json!({
            "id": id,
            "author": {"login": author},
            "authorAssociation": "MEMBER",
            "body": body,
            "createdAt": "2026-11-25T10:00:00Z",
            "includesCreatedEdit": false,
            "isMinimized": false,
            "minimizedReason": "",
            "reactionGroups": [],
            "url": format!("https://github.com/acme/app/pull/7#issuecomment-{id}"),
            "viewerDidAuthor": false
        }),
    );
}

/// A review (`APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`) with its body, as
/// `gh pr view --json reviews` prints it.
pub fn add_review(dir: &Path, id: &str, author: &str, state: &str, body: &str) {
    append_line(
        dir,
        "reviews.jsonl",
        &serde_json::json!({
            "id": id,
            "author": {"login": author},
            "authorAssociation": "MEMBER",
            "body": body,
            "submittedAt": "2026-11-25T10:00:00Z",
            "includesCreatedEdit": false,
            "reactionGroups": [],
            "state": state,
            "commit": {"oid": "0000000000000000000000000000000000000000"}
        }),
    );
}

/// The pull request's `reviewDecision` from now on.
pub fn set_review_decision(dir: &Path, decision: &str) {
    std::fs::write(dir.join("review-decision"), decision).expect("fake gh: write decision");
}

/// What `gh run view <run_id> --log-failed` prints.
pub fn set_run_log(dir: &Path, run_id: u64, log: &str) {
    std::fs::write(dir.join(format!("run-{run_id}.log")), log).expect("fake gh: write run log");
}

/// Makes the next reply or `gh pr comment` fail after GitHub took it (the comment exists,
/// the caller sees HTTP 502), as when the connection drops.
pub fn lose_next_answer(dir: &Path) {
    std::fs::write(dir.join("answer.lost"), "").expect("fake gh: write answer.lost");
}

/// The replies posted to line comments, in order: (the comment's id, the reply's body).
pub fn gh_replies(dir: &Path) -> Vec<(u64, String)> {
    std::fs::read_to_string(dir.join("replies.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let (id, input) = line.split_once('\t')?;
            let body: serde_json::Value = serde_json::from_str(input).ok()?;
            Some((id.parse().ok()?, body["body"].as_str()?.to_owned()))
        })
        .collect()
}

/// The bodies `gh pr comment` posted, in order.
pub fn gh_pr_comments(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("pr-comments.log"))
        .unwrap_or_default()
        .split("\n\u{1e}\n")
        .filter(|b| !b.is_empty())
        .map(str::to_owned)
        .collect()
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

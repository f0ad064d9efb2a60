//! A fake `gh` command: put `dir` first on the daemon's `PATH`.

use std::path::{Path, PathBuf};

const SCRIPT: &str = r#"#!/bin/sh
# Fake `gh` written by codebutler-test-support. Logs every invocation to gh.log next to itself,
# but a person's (FAKE_GH_PERSON set: merge_on_github, open_pr_on_github), which is not the
# product's doing.
here="$(dirname "$0")"
log="$here/gh.log"
[ -n "$FAKE_GH_PERSON" ] && log=/dev/null
printf '%s\n' "$*" >> "$log"

# What GitHub decides on its own, as the test set it (FakePr::set): the pull requests' state
# (OPEN, or CLOSED by a person), their checks (none|passing|failing|pending), merged_at,
# closed_at. Everything else comes from origin: a pull request's head is origin's branch,
# `mergeable` is computed from origin's branches, a merge lands on origin's base branch.
state=OPEN; checks=none; merged_at=null; closed_at=null
if [ -f "$here/pr.env" ]; then . "$here/pr.env"; fi

save_state() {
  tmp="$here/.pr.env.tmp"
  printf 'state=%s\nchecks=%s\nmerged_at=%s\nclosed_at=%s\n' \
    "$state" "$checks" "$merged_at" "$closed_at" > "$tmp"
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

# --- origin: the repository GitHub holds ---------------------------------------------------
# Found the way gh finds its repository: the `origin` remote of the repository gh runs in.
# Only origin is read for a pull request's state, never the local repository's branches.
find_origin() {
  origin="$(git remote get-url origin 2>/dev/null)"
  if [ -z "$origin" ]; then
    echo "no git remotes found" >&2
    exit 1
  fi
  origin="${origin#file://}"
  if ! git -C "$origin" rev-parse --git-dir >/dev/null 2>&1; then
    echo "fake gh: origin $origin is not a repository this fake can read" >&2
    exit 1
  fi
}
og() { git -C "$origin" -c core.hooksPath=/dev/null "$@"; }
# The base branch of every pull request: origin's default branch.
base_branch() { og symbolic-ref --short HEAD; }
# A branch's commit on origin, or nothing.
origin_tip() { og rev-parse -q --verify "refs/heads/$1^{commit}" 2>/dev/null; }
# Pull request n's head branch (`prs/<n>/head`), or nothing for a number never created.
pr_head() { cat "$here/prs/$1/head" 2>/dev/null; }
# Pull request n's head commit: origin's tip of its branch; once the branch is gone (merged
# and deleted), the last one GitHub saw.
pr_head_oid() {
  oid="$(origin_tip "$(pr_head "$1")")"
  if [ -n "$oid" ]; then printf '%s' "$oid" > "$here/prs/$1/last-head"; else oid="$(cat "$here/prs/$1/last-head" 2>/dev/null)"; fi
  printf '%s' "${oid:-0000000000000000000000000000000000000000}"
}
# MERGEABLE or CONFLICTING, from a merge of the head into the base on origin; UNKNOWN when
# the pull request is not open or its branch is gone.
mergeable_of() {
  head_tip="$(origin_tip "$(pr_head "$1")")"
  if [ "$state" != OPEN ] || [ -z "$head_tip" ]; then printf UNKNOWN; return; fi
  og merge-tree --write-tree "refs/heads/$(base_branch)" "$head_tip" >/dev/null 2>&1
  case $? in
    0) printf MERGEABLE ;;
    1) printf CONFLICTING ;;
    *) printf UNKNOWN ;;
  esac
}
not_found() {
  echo "GraphQL: Could not resolve to a PullRequest with the number of $1. (repository.pullRequest)" >&2
  exit 1
}
# Pull request n's state: MERGED once merged (`prs/<n>/merged` holds when), else what the
# test set (OPEN, or CLOSED by a person).
pr_state() {
  if [ -f "$here/prs/$1/merged" ]; then
    state=MERGED; merged_at="$(cat "$here/prs/$1/merged")"; closed_at="$merged_at"
  fi
}
# The identity GitHub commits a merge as.
as_github() {
  GIT_AUTHOR_NAME=GitHub GIT_AUTHOR_EMAIL=noreply@github.com \
  GIT_COMMITTER_NAME=GitHub GIT_COMMITTER_EMAIL=noreply@github.com "$@"
}
# Lands pull request $number's head on origin's base branch with $strategy, as GitHub does,
# or fails as GitHub does when it cannot.
land() {
  head="$(pr_head "$number")"
  base="$(base_branch)"
  head_tip="$(origin_tip "$head")"
  base_tip="$(origin_tip "$base")"
  if [ -z "$head_tip" ]; then
    echo "X Pull request #$number is not mergeable: the head branch $head is not on GitHub." >&2
    exit 1
  fi
  conflict() {
    echo "X Pull request #$number is not mergeable: the merge commit cannot be cleanly created." >&2
    exit 1
  }
  tree="$(og merge-tree --write-tree "$base_tip" "$head_tip" 2>/dev/null | head -n 1)"
  og merge-tree --write-tree "$base_tip" "$head_tip" >/dev/null 2>&1 || conflict
  title="$(cat "$here/prs/$number/title" 2>/dev/null)"
  case "$strategy" in
    squash)
      new="$(printf '%s (#%s)\n' "$title" "$number" | as_github og commit-tree "$tree" -p "$base_tip")" ;;
    merge)
      new="$(printf 'Merge pull request #%s from acme/%s\n\n%s\n' "$number" "$head" "$title" |
        as_github og commit-tree "$tree" -p "$base_tip" -p "$head_tip")" ;;
    rebase)
      if [ -n "$(og rev-list --min-parents=2 "$base_tip..$head_tip")" ]; then
        echo "X Pull request #$number is not mergeable: this branch can't be rebased." >&2
        exit 1
      fi
      new="$base_tip"
      for commit in $(og rev-list --reverse "$base_tip..$head_tip"); do
        tree="$(og merge-tree --write-tree --merge-base="$commit^" "$new" "$commit" 2>/dev/null | head -n 1)"
        og merge-tree --write-tree --merge-base="$commit^" "$new" "$commit" >/dev/null 2>&1 || conflict
        new="$(og log -1 --format=%B "$commit" |
          GIT_AUTHOR_NAME="$(og log -1 --format=%an "$commit")" \
          GIT_AUTHOR_EMAIL="$(og log -1 --format=%ae "$commit")" \
          GIT_AUTHOR_DATE="$(og log -1 --format=%aD "$commit")" \
          GIT_COMMITTER_NAME=GitHub GIT_COMMITTER_EMAIL=noreply@github.com \
          og commit-tree "$tree" -p "$new")"
      done ;;
  esac
  og update-ref "refs/heads/$base" "$new" "$base_tip" || conflict
  printf '%s' "$head_tip" > "$here/prs/$number/last-head"
}
# --- end of origin ---------------------------------------------------------------------------

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
  method=GET; input=""; paginate=0; endpoint=""; query=""; vars=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --method|-X) shift; method="$1" ;;
      --input) shift; input="$1" ;;
      --paginate) paginate=1 ;;
      # Fields make gh POST (GraphQL's `query` among them); `{owner}` and `{repo}` are
      # filled in by gh, so the fake only checks they were asked for.
      -f|--raw-field|-F|--field)
        shift; method=POST
        case "$1" in
          query=*) query="${1#query=}" ;;
          *=*) vars="$vars ${1%%=*}:${1#*=}" ;;
          *) echo "fake gh: field \"$1\" is not in key=value format" >&2; exit 1 ;;
        esac ;;
      -*) echo "fake gh: unsupported flag $1 (unknown flag: $1)" >&2; exit 1 ;;
      *) if [ -z "$endpoint" ]; then endpoint="$1"; else echo "accepts 1 arg(s), received 2" >&2; exit 1; fi ;;
    esac
    shift
  done
  case "$method $endpoint" in
    "GET repos/{owner}/{repo}/collaborators/"*/permission)
      # A login's permission, as the test set it (set_permission); GitHub answers 404 for
      # someone who is not a collaborator. `permission` holds the legacy base role
      # (maintain reads as write, triage as read); `role_name` the role itself.
      who="${endpoint#repos/\{owner\}/\{repo\}/collaborators/}"; who="${who%/permission}"
      case "$who" in
        ''|*/*|*[!A-Za-z0-9-]*) echo "fake gh: bad login '$who' in $endpoint" >&2; exit 1 ;;
      esac
      key="$(printf '%s' "$who" | tr 'A-Z' 'a-z')"
      if [ ! -f "$here/permissions/$key" ]; then
        printf '{"message":"Not Found","documentation_url":"https://docs.github.com/rest/collaborators/collaborators#get-repository-permissions-for-a-user","status":"404"}\n'
        echo "gh: Not Found (HTTP 404)" >&2
        exit 1
      fi
      role="$(cat "$here/permissions/$key")"
      case "$role" in
        maintain) permission=write ;;
        triage) permission=read ;;
        *) permission="$role" ;;
      esac
      printf '{"permission":"%s","role_name":"%s","user":{"login":"%s","id":7,"type":"User"}}\n' "$permission" "$role" "$who"
      exit 0 ;;
    "GET user")
      printf '{"login":"%s","id":4242,"node_id":"U_fake","type":"User","site_admin":false}\n' "$(login)"
      exit 0 ;;
    "POST graphql")
      # The review threads query (REVIEW_THREADS_QUERY): the threads the line comments
      # opened (add_line_comment), each resolved or not as a person left it
      # (resolve_review_thread). Any other query is one this fake does not answer.
      case "$query" in
        *reviewThreads*isResolved*) ;;
        *) echo "fake gh: unsupported GraphQL query: $query" >&2; exit 1 ;;
      esac
      case "$vars" in
        *" owner:{owner}"*" name:{repo}"*" number:"[0-9]*) ;;
        *) echo "fake gh: GraphQL variables not as gh fills them in: $vars" >&2; exit 1 ;;
      esac
      number="${vars##* number:}"
      number_or_die "$number" "number"
      [ -n "$(pr_head "$number")" ] || not_found "$number"
      printf '{"data":{"repository":{"pullRequest":{"reviewThreads":{"nodes":%s}}}}}\n' "$(json_list "$here/review-threads.jsonl")"
      exit 0 ;;
    "POST repos/{owner}/{repo}/pulls/"*/reviews)
      # A review, as GitHub takes it (every body received is kept in reviews-posted.jsonl):
      # the pull request's author may neither approve it nor request changes on it (422); a
      # comment on a line its diff does not show — origin's base...commit, three lines of
      # context, the new side — is refused with 422 and nothing is created. Otherwise the
      # review is listed among the reviews, its comments among the line comments (each
      # opening a review thread), all as the login's.
      if [ "$input" != "-" ]; then echo "fake gh: reviews need --input -" >&2; exit 1; fi
      rest="${endpoint#repos/\{owner\}/\{repo\}/pulls/}"
      number="${rest%%/*}"
      number_or_die "$number" "pulls"
      find_origin
      [ -n "$(pr_head "$number")" ] || { echo "gh: Not Found (HTTP 404)" >&2; exit 1; }
      review="$(cat)"
      printf '%s' "$review" | jq -c . >> "$here/reviews-posted.jsonl" || {
        echo "gh: Problems parsing JSON (HTTP 400)" >&2; exit 1; }
      unprocessable() {
        printf '{"message":"Unprocessable Entity","errors":["%s"],"status":"422"}\n' "$1"
        echo "gh: Unprocessable Entity (HTTP 422)" >&2
        exit 1
      }
      case "$(printf '%s' "$review" | jq -r '.event // "PENDING"')" in
        COMMENT) ;;
        APPROVE) unprocessable "Review Can not approve your own pull request" ;;
        REQUEST_CHANGES) unprocessable "Review Can not request changes on your own pull request" ;;
        *) echo "fake gh: unsupported review event" >&2; exit 1 ;;
      esac
      commit="$(printf '%s' "$review" | jq -r '.commit_id // empty')"
      [ -n "$commit" ] || commit="$(pr_head_oid "$number")"
      og cat-file -e "$commit^{commit}" 2>/dev/null || unprocessable "No commit found for SHA: $commit"
      base_tip="$(origin_tip "$(base_branch)")"
      # Whether the diff shows line $2 of file $1 on its new side.
      shown() {
        og diff -U3 --no-color "$base_tip...$commit" -- "$1" | awk -v want="$2" '
          /^@@ / { sub(/^@@ -[0-9,]+ \+/, ""); n = split($1, r, ",");
                   start = r[1] + 0; len = (n > 1) ? r[2] + 0 : 1;
                   if (want + 0 >= start && want + 0 < start + len) found = 1 }
          END { exit found ? 0 : 1 }'
      }
      count="$(printf '%s' "$review" | jq '.comments // [] | length')"
      i=0
      while [ "$i" -lt "$count" ]; do
        path="$(printf '%s' "$review" | jq -r ".comments[$i].path")"
        line="$(printf '%s' "$review" | jq -r ".comments[$i].line")"
        side="$(printf '%s' "$review" | jq -r ".comments[$i].side // \"RIGHT\"")"
        if [ "$side" != RIGHT ] || ! shown "$path" "$line"; then
          unprocessable "Pull request review thread line must be part of the diff"
        fi
        i=$((i + 1))
      done
      rid="$(next_id)"
      now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
      printf '%s' "$review" | jq -c --arg id "PRR_fake$rid" --arg login "$(login)" --arg now "$now" --arg commit "$commit" \
        '{id: $id, author: {login: $login}, authorAssociation: "NONE", body: (.body // ""), submittedAt: $now, includesCreatedEdit: false, reactionGroups: [], state: "COMMENTED", commit: {oid: $commit}}' >> "$here/reviews.jsonl"
      i=0
      while [ "$i" -lt "$count" ]; do
        cid="$(next_id)"
        printf '%s' "$review" | jq -c --argjson id "$cid" --argjson rid "$rid" --arg login "$(login)" --arg now "$now" --arg commit "$commit" --arg number "$number" \
          ".comments[$i] | {url: \"https://api.github.com/repos/acme/app/pulls/comments/\(\$id)\", pull_request_review_id: \$rid, id: \$id, path: .path, commit_id: \$commit, original_commit_id: \$commit, user: {login: \$login, type: \"User\"}, body: .body, created_at: \$now, updated_at: \$now, html_url: \"https://github.com/acme/app/pull/\(\$number)#discussion_r\(\$id)\", author_association: \"NONE\", line: .line, original_line: .line, side: \"RIGHT\", subject_type: \"line\"}" >> "$here/line-comments.jsonl"
        printf '%s' "$review" | jq -c --argjson id "$cid" --arg login "$(login)" \
          ".comments[$i] | {id: \"PRRT_\(\$id)\", isResolved: false, comments: {nodes: [{author: {login: \$login}, path: .path, body: .body}]}}" >> "$here/review-threads.jsonl"
        i=$((i + 1))
      done
      printf '{"id":%s,"node_id":"PRR_fake%s","user":{"login":"%s","type":"User"},"state":"COMMENTED","commit_id":"%s","html_url":"https://github.com/acme/app/pull/%s#pullrequestreview-%s"}\n' \
        "$rid" "$rid" "$(login)" "$commit" "$number" "$rid"
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
      printf '{"id":%s,"in_reply_to_id":%s,"user":{"login":"%s","type":"User"},"author_association":"NONE","path":"%s","line":null,"original_line":null,"html_url":"https://github.com/acme/app/pull/%s#discussion_r%s",%s\n' \
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
  [ -n "$(pr_head "$number")" ] || not_found "$number"
  body="$(cat)"
  printf '%s\n\036\n' "$body" >> "$here/pr-comments.log"
  id="$(next_id)"
  printf '{"id":"IC_fake%s","author":{"login":"%s"},"authorAssociation":"NONE","body":%s,"createdAt":"%s","includesCreatedEdit":false,"isMinimized":false,"minimizedReason":"","reactionGroups":[],"url":"https://github.com/acme/app/pull/%s#issuecomment-%s","viewerDidAuthor":true}\n' \
    "$id" "$(login)" "$(printf '%s' "$body" | json_string)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$number" "$id" >> "$here/comments.jsonl"
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
      headRefOid|baseRefName|reviewDecision|reviews|latestReviews) ;;
      *) echo "Unknown JSON field: \"$field\"" >&2; exit 1 ;;
    esac
  done
  if [ "$kind" = issue ]; then
    printf '{"number":%s,"title":"Fake issue %s","state":"OPEN","url":"https://github.com/acme/app/issues/%s","author":{"login":"alice"},"comments":[]}\n' \
      "$number" "$number" "$number"
    exit 0
  fi
  find_origin
  head="$(pr_head "$number")"
  [ -n "$head" ] || not_found "$number"
  pr_state "$number"
  # GitHub's review decision: what the test set (set_review_decision), else the one the
  # reviews add up to (each reviewer's latest approval or request for changes).
  decision="$(cat "$here/review-decision" 2>/dev/null || cat "$here/reviews-decision" 2>/dev/null)"
  printf '{"number":%s,"title":%s,"state":"%s","mergeable":"%s","mergedAt":%s,"closedAt":%s,"url":"https://github.com/acme/app/pull/%s","statusCheckRollup":%s,"comments":%s,"reviews":%s,"latestReviews":%s,"reviewDecision":"%s","headRefName":"%s","baseRefName":"%s","headRefOid":"%s"}\n' \
    "$number" "$(cat "$here/prs/$number/title" | json_string)" "$state" "$(mergeable_of "$number")" "$(quoted "$merged_at")" "$(quoted "$closed_at")" "$number" "$(rollup)" \
    "$(json_list "$here/comments.jsonl")" "$(json_list "$here/reviews.jsonl")" "$(json_list "$here/latest-reviews.jsonl")" "$decision" "$head" "$(base_branch)" "$(pr_head_oid "$number")"
  exit 0
fi

if [ "$1" = "pr" ] && [ "$2" = "edit" ]; then
  number="$3"
  number_or_die "$number" "pr edit"
  if [ "$4" != "--body-file" ] || [ "$5" != "-" ] || [ $# -ne 5 ]; then
    echo "fake gh: unsupported invocation: gh $* (only 'pr edit <n> --body-file -')" >&2
    exit 1
  fi
  [ -n "$(pr_head "$number")" ] || not_found "$number"
  cat > "$here/pr-edit-body.md.part"
  if [ -f "$here/edit.block" ]; then
    : > "$here/edit.waiting"
    while [ -f "$here/edit.block" ]; do sleep 0.05; done
    rm -f "$here/edit.waiting"
    if [ -f "$here/edit.lost" ]; then
      rm -f "$here/edit.lost" "$here/pr-edit-body.md.part"
      echo "fake gh: error connecting to api.github.com" >&2
      exit 1
    fi
  fi
  # Every body GitHub received, in order, each followed by a separator line.
  { cat "$here/pr-edit-body.md.part"; printf '\n\036\n'; } >> "$here/pr-edits.log"
  # Written whole, then renamed: a test waiting for the file never reads half of it.
  mv "$here/pr-edit-body.md.part" "$here/pr-edit-body.md"
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
  [ -n "$FAKE_GH_PERSON" ] || printf '%s\n' "$strategy" >> "$here/merges.log"
  find_origin
  [ -n "$(pr_head "$number")" ] || not_found "$number"
  if [ -f "$here/merge.block" ]; then
    : > "$here/merge.waiting"
    while [ -f "$here/merge.block" ]; do sleep 0.05; done
    # GitHub decides when the merge reaches it: the state as it is now.
    if [ -f "$here/pr.env" ]; then . "$here/pr.env"; fi
  fi
  pr_state "$number"
  case "$state" in
    MERGED) echo "X Pull request #$number was already merged" >&2; exit 1 ;;
    CLOSED) echo "X Pull request #$number is closed" >&2; exit 1 ;;
  esac
  if [ "$admin" = 0 ] && { [ "$checks" = failing ] || [ "$checks" = pending ]; }; then
    echo "X Pull request #$number is not mergeable: the base branch policy prohibits the merge." >&2
    echo "To have the pull request merged after all the requirements have been met, add the \`--auto\` flag." >&2
    echo "To use administrator privileges to immediately merge the pull request, add the \`--admin\` flag." >&2
    exit 1
  fi
  land
  printf '2026-11-24T12:00:00Z' > "$here/prs/$number/merged"
  case "$strategy" in
    squash) echo "✓ Squashed and merged pull request #$number" ;;
    merge) echo "✓ Merged pull request #$number" ;;
    rebase) echo "✓ Rebased and merged pull request #$number" ;;
  esac
  exit 0
fi

if [ "$1" = "pr" ] && [ "$2" = "create" ]; then
  head=""; title=""; prev=""
  for arg in "$@"; do
    [ "$prev" = "--head" ] && head="$arg"
    [ "$prev" = "--title" ] && title="$arg"
    prev="$arg"
  done
  find_origin
  base="$(base_branch)"
  # The body comes on stdin (`--body-file -`); keep it for the test.
  cat > "$here/pr-body.md.part" && mv "$here/pr-body.md.part" "$here/pr-body.md"
  # Like GitHub: one open pull request per head branch.
  for dir in "$here"/prs/*/; do
    [ -f "$dir/head" ] || continue
    n="$(basename "$dir")"
    if [ "$(cat "$dir/head")" = "$head" ] && [ ! -f "$dir/merged" ] && [ "$state" = OPEN ]; then
      echo "a pull request for branch \"$head\" into branch \"$base\" already exists:" >&2
      echo "https://github.com/acme/app/pull/$n" >&2
      exit 1
    fi
  done
  # Like GitHub: the head must be a branch on origin, with commits the base lacks.
  head_tip="$(origin_tip "$head")"
  if [ -z "$head" ] || [ -z "$head_tip" ]; then
    echo "pull request create failed: GraphQL: Head sha can't be blank, Base sha can't be blank, No commits between $base and $head, Head ref must be a branch (createPullRequest)" >&2
    exit 1
  fi
  if [ -z "$(og rev-list -n 1 "refs/heads/$base..$head_tip")" ]; then
    echo "pull request create failed: GraphQL: No commits between $base and $head (createPullRequest)" >&2
    exit 1
  fi
  echo "$head" >> "$here/pr-heads"
  # #7, unless the test asked for numbers in order (7, 8, 9… one per pull request, as
  # GitHub gives each its own).
  created=7
  if [ -f "$here/pr-numbers" ]; then
    created=$((6 + $(wc -l < "$here/pr-heads")))
  fi
  mkdir -p "$here/prs/$created"
  printf '%s' "$title" > "$here/prs/$created/title"
  printf '%s' "$head" > "$here/prs/$created/head"
  echo "Creating pull request for $head into $base in acme/app"
  echo
  echo "https://github.com/acme/app/pull/$created"
  exit 0
fi

echo "fake gh: unsupported invocation: gh $*" >&2
exit 1
"#;

/// Writes an executable `gh` script into `dir` and returns its path.
///
/// Every invocation appends its arguments (space-joined, one line) to `dir/gh.log`. Like
/// `gh`, the fake finds its repository as the `origin` remote of the repository it runs in
/// (`git remote get-url origin`), and every answer about a pull request comes from that
/// repository (read with `git -C <origin>`), never from the local one's branches. The base
/// of every pull request is origin's default branch (its `HEAD`). What GitHub decides on its
/// own (a person closing the pull request, the checks) is what [`FakePr::set`] wrote (by
/// default open, no checks):
/// - `gh pr create --head B --title T …` fails like GitHub when origin has no branch `B`
///   ("Head sha can't be blank, …") or `B` has no commit the base lacks ("No commits
///   between …"), and when an open pull request of `B` exists ("a pull request for branch …
///   already exists:" and its address); otherwise it saves its stdin (the body) to
///   `dir/pr-body.md`, records pull request #7 (after [`number_prs_in_order`], #7, #8, #9…)
///   of head `B` titled `T`, and prints its address as its last line;
/// - `gh pr view <n> --json …` prints the pull request: `headRefOid` is origin's tip of its
///   branch (the last one seen once the branch is gone), `mergeable` is `MERGEABLE` or
///   `CONFLICTING` as `git merge-tree` of the base and the head on origin says (`UNKNOWN`
///   unless it is open), its state `MERGED` once merged; a number never created fails like
///   GitHub; an unknown JSON field or flag fails like `gh`;
/// - `gh pr edit <n> --body-file -` saves its stdin to `dir/pr-edit-body.md` and appends it
///   to `dir/pr-edits.log` ([`gh_edited_bodies`]); while `dir/edit.block` exists it waits
///   first (having created `dir/edit.waiting`), and then, if `dir/edit.lost` exists, fails
///   without GitHub receiving the body ([`block_edit`], [`release_edit`]);
/// - `gh pr merge <n> --squash|--merge|--rebase [--admin]` appends the strategy to
///   `dir/merges.log`, waits while `dir/merge.block` exists (having created
///   `dir/merge.waiting`), then fails like `gh` when the PR is merged, closed, or (without
///   `--admin`) has failing or pending checks; otherwise it lands the head on origin's base
///   branch as GitHub does — one squash commit, a merge commit, or the head's commits
///   replayed — or fails like GitHub when they conflict;
/// - `gh issue view <n> --json …` prints an open issue; `gh --version` prints a version
///   line; `gh auth status` says it is logged in (until [`log_out_gh`]); anything else exits
///   1 with a message on stderr.
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

/// What GitHub decides on its own about the fake's pull requests, as `gh pr view` reports
/// it: a person closing them, the checks. A merge is not a state a test can set: it is
/// done, on origin, by `gh pr merge` ([`merge_on_github`] for a person's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakePr {
    /// `OPEN` or `CLOSED`.
    pub state: &'static str,
    /// `none`, `passing`, `failing` (a `test` check failed) or `pending` (`test` running).
    pub checks: &'static str,
}

impl Default for FakePr {
    fn default() -> Self {
        Self {
            state: "OPEN",
            checks: "none",
        }
    }
}

impl FakePr {
    /// Makes the fake `gh` in `dir` answer with this state from now on (a closed PR gets a
    /// fixed `closedAt`).
    pub fn set(&self, dir: &Path) {
        assert!(
            matches!(self.state, "OPEN" | "CLOSED"),
            "fake gh: a pull request is merged by a merge on origin (merge_on_github), not set {}",
            self.state
        );
        let closed_at = if self.state == "OPEN" {
            "null"
        } else {
            "2026-11-24T12:00:00Z"
        };
        let text = format!(
            "state={}\nchecks={}\nmerged_at=null\nclosed_at={closed_at}\n",
            self.state, self.checks,
        );
        let tmp = dir.join(".pr.env.set");
        std::fs::write(&tmp, text).expect("fake gh: write pr.env");
        std::fs::rename(&tmp, dir.join("pr.env")).expect("fake gh: rename pr.env");
    }

    /// The state of the fake `gh`'s pull requests in `dir`: `MERGED` once one was merged,
    /// else what [`FakePr::set`] wrote (`OPEN` by default).
    pub fn state(dir: &Path) -> String {
        let merged = std::fs::read_dir(dir.join("prs"))
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .any(|e| e.path().join("merged").exists())
            })
            .unwrap_or(false);
        if merged {
            return "MERGED".into();
        }
        std::fs::read_to_string(dir.join("pr.env"))
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|l| l.strip_prefix("state=").map(str::to_owned))
            })
            .unwrap_or_else(|| "OPEN".into())
    }
}

/// A person opens a pull request of `head` (a branch on origin) titled `title` on GitHub:
/// the fake `gh` in `dir`, run in the repository `repo`, as `gh pr create` does. Panics with
/// gh's error when GitHub would refuse. Not the product's doing: [`gh_log`] does not list
/// it.
pub fn open_pr_on_github(dir: &Path, repo: &Path, head: &str, title: &str) {
    let out = std::process::Command::new(dir.join("gh"))
        .args([
            "pr", "create", "--head", head, "--title", title, "--body", "",
        ])
        .current_dir(repo)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("fake gh: run gh pr create");
    assert!(
        out.status.success(),
        "fake gh: open a pull request of {head} on GitHub: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A person merges pull request `number` on GitHub with `strategy` (`squash`, `merge` or
/// `rebase`): the fake `gh` in `dir`, run in the repository `repo` (whose `origin` is
/// GitHub's repository), lands it on origin's base branch as `gh pr merge` does. Panics
/// with gh's error when GitHub would refuse. Not the product's doing: neither [`gh_log`] nor
/// [`gh_merges`] lists it.
pub fn merge_on_github(dir: &Path, repo: &Path, number: u64, strategy: &str) {
    let out = std::process::Command::new(dir.join("gh"))
        .args(["pr", "merge", &number.to_string(), &format!("--{strategy}")])
        .current_dir(repo)
        .env("FAKE_GH_PERSON", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("fake gh: run gh pr merge");
    assert!(
        out.status.success(),
        "fake gh: merge #{number} on GitHub: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The review loop's side of the fake `gh` (its own block of the script above):
/// - `gh api user` prints `{"login": …}` with [`set_login`]'s login (`codebutler-bot`);
/// - `gh api repos/{owner}/{repo}/collaborators/<login>/permission` answers with the role
///   [`set_permission`] gave the login (`permission` the legacy base role, `role_name` the
///   role), or GitHub's 404 for a login without one;
/// - `gh api [--paginate] repos/{owner}/{repo}/pulls/<n>/comments` prints the line comments
///   [`add_line_comment`] added, in the REST API's shape, and the replies posted;
/// - `gh api --method POST repos/{owner}/{repo}/pulls/<n>/comments/<id>/replies --input -`
///   records the reply ([`gh_replies`]) and lists it among the line comments as the login's,
///   or fails with GitHub's 404 for an unknown comment and its 422 for a reply to a reply;
/// - `gh api --method POST repos/{owner}/{repo}/pulls/<n>/reviews --input -` keeps the body
///   it received ([`gh_reviews_posted`]) and answers as GitHub does: 422 for `APPROVE` or
///   `REQUEST_CHANGES` (the pull request's author may do neither) and for a comment on a
///   line origin's `base...commit` diff does not show on its new side (three lines of
///   context), creating nothing; otherwise the review is listed among the reviews as the
///   login's (`COMMENTED`) and its comments among the line comments, with the review's id,
///   each opening an unresolved review thread (`jq` reads the JSON);
/// - `gh pr comment <n> --body-file -` records the comment ([`gh_pr_comments`]) and lists it
///   among the conversation comments;
/// - `gh pr view` prints the reviews and conversation comments added ([`add_review`],
///   [`submit_review`], [`add_conversation_comment`]), each reviewer's latest review
///   (`latestReviews`) and the decision they add up to (or [`set_review_decision`]'s);
/// - `gh api graphql` with the review threads query answers with the threads the line
///   comments opened, resolved or not ([`resolve_review_thread`]); another query fails;
/// - `gh run view <id> --log-failed` prints [`set_run_log`]'s log, or fails like `gh` for a
///   run it does not know; the `failing` checks' `test` run is 4242;
/// - after [`lose_next_answer`] the next reply or comment is made but its answer is lost
///   (HTTP 502).
pub fn set_login(dir: &Path, login: &str) {
    std::fs::write(dir.join("login"), login).expect("fake gh: write login");
}

/// Appends one JSON object as a line of `dir/<file>` (written whole, then renamed).
/// When GitHub dates a comment added now: this second, as GitHub's times go, and always
/// after the one this fake dated before it (two comments a test adds within one second were
/// still written one after the other, and GitHub's order says so).
fn created_now(dir: &Path) -> String {
    let clock = dir.join("comment-clock");
    let last: i64 = std::fs::read_to_string(&clock)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    let now = chrono::Utc::now().timestamp().max(last + 1);
    std::fs::write(&clock, now.to_string()).expect("fake gh: write the comment clock");
    chrono::DateTime::from_timestamp(now, 0)
        .expect("fake gh: a time")
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn append_line(dir: &Path, file: &str, value: &serde_json::Value) {
    let path = dir.join(file);
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    text.push_str(&value.to_string());
    text.push('\n');
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).expect("fake gh: write comments");
    std::fs::rename(&tmp, path).expect("fake gh: rename comments");
}

/// `login`'s role on the repository from now on (`admin`, `maintain`, `write`, `triage`,
/// `read`), as `gh api repos/{owner}/{repo}/collaborators/<login>/permission` answers it; a
/// login without one is no collaborator (GitHub's 404).
pub fn set_permission(dir: &Path, login: &str, role: &str) {
    let roles = dir.join("permissions");
    std::fs::create_dir_all(&roles).expect("fake gh: create permissions");
    std::fs::write(roles.join(login.to_ascii_lowercase()), role)
        .expect("fake gh: write permission");
}

/// `author` is a member of the team with write access, unless the test gave them a role.
fn team_member(dir: &Path, author: &str) {
    if !dir
        .join("permissions")
        .join(author.to_ascii_lowercase())
        .exists()
    {
        set_permission(dir, author, "write");
    }
}

/// A line comment on `path:line` by `author`, a member of the team with write access
/// (association `MEMBER`, role `write` unless [`set_permission`] gave another), as the REST
/// API lists it.
pub fn add_line_comment(dir: &Path, id: u64, author: &str, path: &str, line: u64, body: &str) {
    team_member(dir, author);
    add_line_comment_as(dir, id, author, "MEMBER", path, line, body);
}

/// A line comment on `path:line` by `author`, whose `author_association` with the repository
/// is `association` (`OWNER`, `MEMBER`, `COLLABORATOR`, `CONTRIBUTOR`, `NONE`…), as the REST
/// API lists it.
pub fn add_line_comment_as(
    dir: &Path,
    id: u64,
    author: &str,
    association: &str,
    path: &str,
    line: u64,
    body: &str,
) {
    let bot = author.ends_with("[bot]");
    let created = created_now(dir);
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
            "created_at": created,
            "updated_at": created,
            "html_url": format!("https://github.com/acme/app/pull/7#discussion_r{id}"),
            "author_association": association,
            "start_line": null,
            "original_start_line": null,
            "start_side": null,
            "line": line,
            "original_line": line,
            "side": "RIGHT",
            "subject_type": "line"
        }),
    ); // The comment opens a review thread, unresolved, as GraphQL's `reviewThreads` gives it.
    append_line(
        dir,
        "review-threads.jsonl",
        &serde_json::json!({
            "id": format!("PRRT_{id}"),
            "isResolved": false,
            "comments": {"nodes": [{"author": {"login": author}, "path": path, "body": body}]}
        }),
    );
}

/// A line comment answering the line comment `in_reply_to` (in its thread) by `author`, a
/// member of the team with write access, as the REST API lists it.
pub fn add_line_comment_reply(dir: &Path, id: u64, in_reply_to: u64, author: &str, body: &str) {
    team_member(dir, author);
    append_line(
        dir,
        "line-comments.jsonl",
        &serde_json::json!({
            "id": id,
            "in_reply_to_id": in_reply_to,
            "user": {"login": author, "id": 2, "type": "User"},
            "author_association": "MEMBER",
            "body": body,
            "path": "notes.txt",
            "line": 1,
            "original_line": 1,
            "html_url": format!("https://github.com/acme/app/pull/7#discussion_r{id}"),
            "author_association": "MEMBER",
            "created_at": created_now(dir)
        }),
    );
}

/// A comment on the pull request's conversation by `author`, a member of the team with write
/// access, as `gh pr view --json comments` prints it.
pub fn add_conversation_comment(dir: &Path, id: &str, author: &str, body: &str) {
    team_member(dir, author);
    add_conversation_comment_as(dir, id, author, "MEMBER", body);
}

/// A comment on the pull request's conversation by `author`, whose `authorAssociation` is
/// `association`, as `gh pr view --json comments` prints it.
pub fn add_conversation_comment_as(
    dir: &Path,
    id: &str,
    author: &str,
    association: &str,
    body: &str,
) {
    append_line(
        dir,
        "comments.jsonl",
        &serde_json::json!({
            "id": id,
            "author": {"login": author},
            "authorAssociation": association,
            "body": body,
            "createdAt": created_now(dir),
            "includesCreatedEdit": false,
            "isMinimized": false,
            "minimizedReason": "",
            "reactionGroups": [],
            "url": format!("https://github.com/acme/app/pull/7#issuecomment-{id}"),
            "viewerDidAuthor": false
        }),
    );
}

/// A review (`APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`) with its body by `author`, a
/// member of the team with write access, as `gh pr view --json reviews` prints it.
pub fn add_review(dir: &Path, id: &str, author: &str, state: &str, body: &str) {
    team_member(dir, author);
    add_review_as(dir, id, author, "MEMBER", state, body);
}

/// A review with its body by `author`, whose `authorAssociation` is `association`, as
/// `gh pr view --json reviews` prints it.
pub fn add_review_as(
    dir: &Path,
    id: &str,
    author: &str,
    association: &str,
    state: &str,
    body: &str,
) {
    append_line(
        dir,
        "reviews.jsonl",
        &serde_json::json!({
            "id": id,
            "author": {"login": author},
            "authorAssociation": association,
            "body": body,
            "submittedAt": created_now(dir),
            "includesCreatedEdit": false,
            "reactionGroups": [],
            "state": state,
            "commit": {"oid": "0000000000000000000000000000000000000000"}
        }),
    );
    derive_latest_reviews(dir);
}

/// A person submits a review (`APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`) with `body` on
/// the pull request as `login`, a member of the team with write access: listed among its
/// reviews, and as GitHub does, `latestReviews` and `reviewDecision` follow (the latest
/// review of each reviewer wins; an approval after a request for changes clears it).
pub fn submit_review(dir: &Path, login: &str, state: &str, body: &str) {
    let n = std::fs::read_to_string(dir.join("reviews.jsonl"))
        .map(|t| t.lines().count())
        .unwrap_or(0);
    add_review(dir, &format!("PRR_fake{}", n + 1), login, state, body);
}

/// Writes what GitHub makes of the reviews in `reviews.jsonl`: each reviewer's latest review
/// (`latestReviews`, in the order of those reviews) and the decision their latest approvals
/// and requests for changes add up to (`reviewDecision`: any request for changes wins, else
/// an approval, else none).
fn derive_latest_reviews(dir: &Path) {
    let reviews: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("reviews.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let author = |r: &serde_json::Value| r["author"]["login"].as_str().unwrap_or("").to_owned();
    let mut latest: Vec<serde_json::Value> = Vec::new();
    let mut opinion: Vec<(String, String)> = Vec::new();
    for review in &reviews {
        let who = author(review);
        let state = review["state"].as_str().unwrap_or("").to_owned();
        if state == "PENDING" {
            continue;
        }
        latest.retain(|r| author(r) != who);
        latest.push(review.clone());
        if matches!(
            state.as_str(),
            "APPROVED" | "CHANGES_REQUESTED" | "DISMISSED"
        ) {
            opinion.retain(|(w, _)| *w != who);
            opinion.push((who, state));
        }
    }
    let decision = if opinion.iter().any(|(_, s)| s == "CHANGES_REQUESTED") {
        "CHANGES_REQUESTED"
    } else if opinion.iter().any(|(_, s)| s == "APPROVED") {
        "APPROVED"
    } else {
        ""
    };
    let lines: String = latest.iter().map(|r| format!("{r}\n")).collect();
    write_whole(dir, "latest-reviews.jsonl", &lines);
    write_whole(dir, "reviews-decision", decision);
}

/// Writes `dir/<file>` whole, then renames it into place.
fn write_whole(dir: &Path, file: &str, text: &str) {
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).expect("fake gh: write");
    std::fs::rename(&tmp, dir.join(file)).expect("fake gh: rename");
}

/// A person resolves (or, with `resolved` false, unresolves) the review thread the line
/// comment `id` opened, as GitHub's `reviewThreads { isResolved }` says from then on.
pub fn resolve_review_thread(dir: &Path, id: u64, resolved: bool) {
    let path = dir.join("review-threads.jsonl");
    let text = std::fs::read_to_string(&path).expect("fake gh: no review thread yet");
    let mut found = false;
    let lines: String = text
        .lines()
        .map(|l| {
            let mut node: serde_json::Value = serde_json::from_str(l).expect("fake gh: a thread");
            if node["id"] == format!("PRRT_{id}") {
                node["isResolved"] = serde_json::Value::Bool(resolved);
                found = true;
            }
            format!("{node}\n")
        })
        .collect();
    assert!(found, "fake gh: no review thread opened by comment {id}");
    write_whole(dir, "review-threads.jsonl", &lines);
}

/// The bodies of the reviews GitHub received (`POST …/pulls/<n>/reviews`), in order, each
/// as the JSON sent, whether GitHub took it or refused it.
pub fn gh_reviews_posted(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("reviews-posted.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("fake gh: a posted review"))
        .collect()
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

/// Every body `gh pr edit --body-file -` gave GitHub, in order.
pub fn gh_edited_bodies(dir: &Path) -> Vec<String> {
    let log = std::fs::read_to_string(dir.join("pr-edits.log")).unwrap_or_default();
    let mut bodies: Vec<String> = log.split("\n\u{1e}\n").map(str::to_owned).collect();
    // What follows the last separator is being written (or nothing).
    bodies.pop();
    bodies
}

/// Makes the fake's `gh pr edit` wait before GitHub receives the body (until
/// [`release_edit`]).
pub fn block_edit(dir: &Path) {
    std::fs::write(dir.join("edit.block"), "").expect("fake gh: write edit.block");
}

/// Whether a `gh pr edit` is waiting on [`block_edit`].
pub fn edit_waiting(dir: &Path) -> bool {
    dir.join("edit.waiting").exists()
}

/// Lets a waiting `gh pr edit` go on: GitHub receives its body, or with `lost` it fails as
/// when the connection drops, and GitHub receives nothing.
pub fn release_edit(dir: &Path, lost: bool) {
    if lost {
        std::fs::write(dir.join("edit.lost"), "").expect("fake gh: write edit.lost");
    }
    std::fs::remove_file(dir.join("edit.block")).expect("fake gh: remove edit.block");
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

//! Who has write access to the repository on GitHub. Only those people steer the Coder from
//! GitHub (`github.reviewFrom`, `write` by default): their review comments start review
//! rounds, and their comments are what the PM's GHStatus shows. On a public repository
//! anyone may comment, so a comment's author is checked before its text goes anywhere.
//!
//! GitHub gives every comment its author's `author_association` with the repository.
//! `OWNER` (the account that owns it) always has write access. Every other association is
//! asked about: `MEMBER` only says the author belongs to the organisation (whose members may
//! have nothing but read on this repository), `COLLABORATOR` may have been invited with
//! read or triage only, and `CONTRIBUTOR`, `NONE` and the like may still have write access
//! through a team the token cannot see. The question is
//! `gh api repos/{owner}/{repo}/collaborators/<login>/permission`: `admin`, `maintain` or
//! `write` is write access; `triage`, `read`, `none` and GitHub's 404 for a
//! non-collaborator are not. Each answer is kept for [`CACHE_TTL`], so the PR watcher's
//! minute-by-minute polls do not ask about a login again, and at most
//! [`MAX_LOOKUPS_PER_CALL`] logins are asked about at once: the rest wait for the next poll.
//! A login that is no user's (a GitHub App's `name[bot]`, a deleted account's `ghost`) has
//! no write access. A lookup that fails decides nothing: the comment waits for a later poll
//! rather than being acted on, or written off, by mistake.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::git_command::CommandError;
use super::pull_request::{self, PullRequestError};
use crate::config::ReviewFrom;

/// How long an answer about one login is kept.
pub const CACHE_TTL: Duration = Duration::from_secs(15 * 60);
/// Most logins asked about in one call of [`WriteAccess::decide`].
pub const MAX_LOOKUPS_PER_CALL: usize = 10;
/// The association that is write access without asking.
const OWNER: &str = "OWNER";

/// A login as compared: lower-case, trimmed.
fn login_key(login: &str) -> String {
    login.trim().to_ascii_lowercase()
}

/// Whether `login` looks like a GitHub user's login (letters, digits and hyphens, at most
/// 39, not starting with a hyphen): the only kind the permission endpoint is asked about,
/// and the only kind that goes into its path.
pub fn user_login(login: &str) -> bool {
    !login.is_empty()
        && login.len() <= 39
        && !login.starts_with('-')
        && login
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !login.eq_ignore_ascii_case("ghost")
}

/// Whether GitHub's `association` alone says the author has write access.
pub fn owner(association: Option<&str>) -> bool {
    association.is_some_and(|a| a.eq_ignore_ascii_case(OWNER))
}

/// The order logins are asked about in when there are more than a call asks about: those
/// most likely to have write access first.
fn lookup_rank(association: Option<&str>) -> u8 {
    match association.map(str::to_ascii_uppercase).as_deref() {
        Some("MEMBER" | "COLLABORATOR") => 0,
        Some("CONTRIBUTOR") => 1,
        _ => 2,
    }
}

/// The endpoint's answer (its other fields are ignored).
#[derive(Deserialize)]
struct PermissionAnswer {
    permission: String,
}

/// Why the permission endpoint's answer could not be read.
#[derive(Debug, thiserror::Error)]
#[error("read `gh api …/collaborators/{login}/permission`'s answer: {source}")]
pub struct PermissionError {
    login: String,
    source: serde_json::Error,
}

/// Whether the endpoint's `output` for `login` says write access.
pub fn parse_permission(login: &str, output: &str) -> Result<bool, PermissionError> {
    let answer: PermissionAnswer =
        serde_json::from_str(output).map_err(|source| PermissionError {
            login: login.to_owned(),
            source,
        })?;
    Ok(matches!(
        answer.permission.to_ascii_lowercase().as_str(),
        "admin" | "maintain" | "write"
    ))
}

/// Answers about logins, each kept until it expires.
#[derive(Debug, Default)]
struct Cache {
    answers: HashMap<String, (bool, Instant)>,
}

impl Cache {
    /// The answer kept about `login`, unless it expired at `now`.
    fn get(&self, login: &str, now: Instant) -> Option<bool> {
        self.answers
            .get(&login_key(login))
            .filter(|(_, at)| now.saturating_duration_since(*at) < CACHE_TTL)
            .map(|(write, _)| *write)
    }

    fn put(&mut self, login: &str, write: bool, now: Instant) {
        self.answers
            .retain(|_, (_, at)| now.saturating_duration_since(*at) < CACHE_TTL);
        self.answers.insert(login_key(login), (write, now));
    }
}

/// One author to decide about: a login and the association GitHub gave with the comment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Author<'a> {
    pub login: &'a str,
    pub association: Option<&'a str>,
}

/// What [`WriteAccess::decide`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decisions {
    /// Whether each decided login (lower-case) may steer.
    decided: HashMap<String, bool>,
    /// Whether a lookup failed (`gh` down, an answer not understood).
    pub failed: bool,
}

impl Decisions {
    /// Whether `login` may steer: `None` when it is not decided yet.
    pub fn may_steer(&self, login: &str) -> Option<bool> {
        self.decided.get(&login_key(login)).copied()
    }
}

/// Who may steer the Coder from GitHub, as `github.reviewFrom` says; shared by the PR
/// watcher and the PM's GHStatus, so a login is asked about once for both.
#[derive(Clone, Debug)]
pub struct WriteAccess {
    review_from: ReviewFrom,
    /// The `gh` executable.
    gh: PathBuf,
    /// The main repository, where `gh` runs.
    repo: PathBuf,
    cache: Arc<Mutex<Cache>>,
}

impl WriteAccess {
    /// Decides with `gh` run in the main repository `repo`.
    pub fn new(review_from: ReviewFrom, gh: PathBuf, repo: PathBuf) -> Self {
        Self {
            review_from,
            gh,
            repo,
            cache: Arc::default(),
        }
    }

    /// Whether everyone may steer (`github.reviewFrom = "anyone"`).
    pub fn anyone(&self) -> bool {
        self.review_from == ReviewFrom::Anyone
    }

    /// Decides whether each of `authors` may steer: from `github.reviewFrom`, the
    /// association, the answers kept, or by asking GitHub about at most
    /// [`MAX_LOOKUPS_PER_CALL`] logins; the others stay undecided.
    pub async fn decide(&self, authors: &[Author<'_>]) -> Decisions {
        let mut decisions = Decisions::default();
        let mut ask: Vec<&Author<'_>> = Vec::new();
        {
            let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            for author in authors {
                let key = login_key(author.login);
                if decisions.decided.contains_key(&key) {
                    continue;
                }
                let known = if self.anyone() || owner(author.association) {
                    Some(true)
                } else if !user_login(author.login) {
                    Some(false)
                } else {
                    cache.get(author.login, now)
                };
                match known {
                    Some(write) => {
                        decisions.decided.insert(key, write);
                    }
                    None if !ask.iter().any(|a| login_key(a.login) == key) => ask.push(author),
                    None => {}
                }
            }
        }
        ask.sort_by_key(|a| lookup_rank(a.association));
        for author in ask.into_iter().take(MAX_LOOKUPS_PER_CALL) {
            match self.ask(author.login).await {
                Ok(write) => {
                    self.cache
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .put(author.login, write, Instant::now());
                    decisions.decided.insert(login_key(author.login), write);
                }
                Err(e) => {
                    tracing::warn!("write access of {}: {e}", author.login);
                    decisions.failed = true;
                }
            }
        }
        decisions
    }

    /// Asks GitHub whether `login` (a [`user_login`]) has write access.
    async fn ask(&self, login: &str) -> Result<bool, LookupError> {
        match pull_request::collaborator_permission(&self.gh, &self.repo, login).await {
            Ok(output) => Ok(parse_permission(login, &output)?),
            Err(PullRequestError::Command(CommandError::Failed { output, .. }))
                if output.contains("(HTTP 404)") =>
            {
                // Not a collaborator (or no such user).
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Why a lookup decided nothing.
#[derive(Debug, thiserror::Error)]
enum LookupError {
    #[error(transparent)]
    Gh(#[from] PullRequestError),
    #[error(transparent)]
    Answer(#[from] PermissionError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_user_logins_are_asked_about() {
        for good in ["alice", "Alice-B", "a", "x1", &"a".repeat(39)] {
            assert!(user_login(good), "{good}");
        }
        for bad in [
            "",
            "-alice",
            "dependabot[bot]",
            "ghost",
            "a/b",
            "../x",
            "alice?x=1",
            "al ice",
            "élise",
            &"a".repeat(40),
        ] {
            assert!(!user_login(bad), "{bad}");
        }
    }

    #[test]
    fn only_the_owner_needs_no_question() {
        assert!(owner(Some("OWNER")));
        assert!(owner(Some("owner")));
        for other in [
            Some("MEMBER"),
            Some("COLLABORATOR"),
            Some("CONTRIBUTOR"),
            Some("FIRST_TIME_CONTRIBUTOR"),
            Some("FIRST_TIMER"),
            Some("NONE"),
            Some("MANNEQUIN"),
            None,
        ] {
            assert!(!owner(other), "{other:?}");
        }
        assert!(lookup_rank(Some("MEMBER")) < lookup_rank(Some("CONTRIBUTOR")));
        assert!(lookup_rank(Some("CONTRIBUTOR")) < lookup_rank(Some("NONE")));
        assert!(lookup_rank(Some("COLLABORATOR")) < lookup_rank(None));
    }

    #[test]
    fn write_maintain_and_admin_are_write_access() {
        let answer = |p: &str| {
            format!(r#"{{"permission":"{p}","role_name":"{p}","user":{{"login":"alice","id":1}}}}"#)
        };
        for (permission, write) in [
            ("admin", true),
            ("maintain", true),
            ("write", true),
            ("triage", false),
            ("read", false),
            ("none", false),
        ] {
            assert_eq!(
                parse_permission("alice", &answer(permission)).unwrap(),
                write,
                "{permission}"
            );
        }
        for bad in ["", "{}", r#"{"message":"Not Found"}"#, "[]"] {
            let err = parse_permission("alice", bad).unwrap_err().to_string();
            assert!(
                err.starts_with("read `gh api …/collaborators/alice/permission`'s answer: "),
                "{err}"
            );
        }
    }

    #[test]
    fn answers_are_kept_for_a_while_by_login_without_case() {
        let mut cache = Cache::default();
        let start = Instant::now();
        cache.put("Alice", true, start);
        cache.put("mallory", false, start);
        assert_eq!(cache.get("alice", start), Some(true));
        assert_eq!(cache.get("MALLORY", start + CACHE_TTL / 2), Some(false));
        assert_eq!(cache.get("bob", start), None);
        assert_eq!(cache.get("alice", start + CACHE_TTL), None, "expired");
        // An expired answer is dropped when another is kept.
        cache.put("bob", true, start + CACHE_TTL);
        assert_eq!(cache.answers.len(), 1);
    }

    #[tokio::test]
    async fn the_setting_the_owner_and_non_users_decide_without_gh() {
        let nowhere = || PathBuf::from("/nonexistent/gh");
        let authors = [
            Author {
                login: "mallory",
                association: Some("NONE"),
            },
            Author {
                login: "octo",
                association: Some("OWNER"),
            },
            Author {
                login: "renovate[bot]",
                association: Some("CONTRIBUTOR"),
            },
        ];
        let anyone = WriteAccess::new(ReviewFrom::Anyone, nowhere(), nowhere());
        let all = anyone.decide(&authors).await;
        assert_eq!(all.may_steer("mallory"), Some(true));
        assert_eq!(all.may_steer("renovate[bot]"), Some(true));
        assert!(!all.failed);

        let write = WriteAccess::new(ReviewFrom::Write, nowhere(), nowhere());
        let some = write.decide(&authors).await;
        assert_eq!(some.may_steer("octo"), Some(true));
        assert_eq!(some.may_steer("renovate[bot]"), Some(false));
        // `gh` cannot be run: mallory stays undecided, and nothing is kept about her.
        assert_eq!(some.may_steer("mallory"), None);
        assert!(some.failed);
        assert!(write.cache.lock().unwrap().answers.is_empty());
    }
}

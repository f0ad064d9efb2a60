//! Routing by `@codebutler.<role>` mentions (spec `daemon-routing.md`): plain string
//! matching, no model involved. The PM takes a message that mentions no role or mentions it;
//! the Artist one that mentions it; one that mentions both gets an answer from each, the PM
//! first; the researcher one that mentions it and neither of those; a message that names
//! only other roles gets a short reply listing the roles that exist.

use crate::domain::{Mention, Role};

/// Where a message goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// To the PM.
    Pm,
    /// To the Artist.
    Artist,
    /// To the PM, then to the Artist: each answers in its own voice.
    PmThenArtist,
    /// To the researcher.
    Researcher,
    /// To roles other than the PM only (lower-cased as written, known or not).
    OtherRoles(Vec<Mention>),
}

const PREFIX: &str = "@codebutler.";

/// The roles a message mentions, lower-cased, in order, without repeats.
pub fn mentioned_roles(text: &str) -> Vec<Mention> {
    let lower = text.to_lowercase();
    let mut roles: Vec<Mention> = Vec::new();
    let mut rest = lower.as_str();
    while let Some(i) = rest.find(PREFIX) {
        rest = &rest[i + PREFIX.len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        let mention = Mention::from(name.as_str());
        if !name.is_empty() && !roles.contains(&mention) {
            roles.push(mention);
        }
    }
    roles
}

/// Routes a message by its mentions.
pub fn route(text: &str) -> Route {
    let roles = mentioned_roles(text);
    let pm = roles.contains(&Mention::Role(Role::Pm));
    let artist = roles.contains(&Mention::Role(Role::Artist));
    match (pm, artist) {
        (true, true) => Route::PmThenArtist,
        (false, true) => Route::Artist,
        (true, false) => Route::Pm,
        (false, false) if roles.is_empty() => Route::Pm,
        (false, false) if roles.contains(&Mention::Role(Role::Researcher)) => Route::Researcher,
        (false, false) => Route::OtherRoles(roles),
    }
}

/// The reply to a message that names only roles other than the PM.
pub fn other_roles_reply(named: &[Mention]) -> String {
    let unknown: Vec<&str> = named
        .iter()
        .filter_map(|m| match m {
            Mention::Unknown(name) => Some(name.as_str()),
            Mention::Role(_) => None,
        })
        .collect();
    let mut reply = String::new();
    if !unknown.is_empty() {
        let list: Vec<String> = unknown
            .iter()
            .map(|r| format!("`@codebutler.{r}`"))
            .collect();
        reply.push_str(&format!("There is no {} role here. ", list.join(", ")));
    } else {
        reply.push_str(
            "The Coder starts from a plan you approve in a thread, so talk to me first. ",
        );
    }
    reply.push_str(
        "The roles are `@codebutler.pm` (questions and plans; also any message with no mention), \
         `@codebutler.coder` (implements an approved plan), `@codebutler.artist` (images) and \
         `@codebutler.researcher` (questions that need the web, with the pages it read).",
    );
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_mentions_case_insensitively() {
        assert_eq!(
            mentioned_roles("hey @CodeButler.Coder and @codebutler.reviewer, @codebutler.coder"),
            vec!["coder", "reviewer"]
        );
        assert!(mentioned_roles("no mention, codebutler.pm without at").is_empty());
        assert!(mentioned_roles("@codebutler. alone").is_empty());
    }

    #[test]
    fn pm_takes_unaddressed_and_addressed_messages() {
        assert_eq!(route("how do we deploy?"), Route::Pm);
        assert_eq!(route("@codebutler.pm how do we deploy?"), Route::Pm);
        assert_eq!(route("@codebutler.coder @codebutler.pm both"), Route::Pm);
        assert_eq!(
            route("@codebutler.coder fix it"),
            Route::OtherRoles(vec!["coder".into()])
        );
        assert_eq!(
            route("@codebutler.researcher what does serde 2 change?"),
            Route::Researcher
        );
        assert_eq!(
            route("@codebutler.researcher @codebutler.pm both"),
            Route::Pm
        );
    }

    #[test]
    fn the_artist_takes_its_mentions_and_answers_after_the_pm_when_both_are_named() {
        assert_eq!(route("@codebutler.artist draw a logo"), Route::Artist);
        assert_eq!(route("@CodeButler.Artist @codebutler.coder"), Route::Artist);
        assert_eq!(
            route("@codebutler.artist @codebutler.pm a logo and a plan"),
            Route::PmThenArtist
        );
        assert_eq!(
            route("@codebutler.pm @codebutler.artist"),
            Route::PmThenArtist
        );
    }

    #[test]
    fn reply_lists_the_roles_and_names_unknown_ones() {
        let reply = other_roles_reply(&["reviewer".into()]);
        assert!(
            reply.starts_with("There is no `@codebutler.reviewer` role here."),
            "{reply}"
        );
        for role in Role::ALL {
            assert!(reply.contains(&format!("`@codebutler.{role}`")), "{reply}");
        }
        let reply = other_roles_reply(&["coder".into()]);
        assert!(reply.starts_with("The Coder starts from a plan"), "{reply}");
    }
}

//! The roles CodeButler plays in a thread, and the names people use for them in
//! `@codebutler.<role>` mentions.

use std::fmt;

/// A role of CodeButler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The product manager: questions and plans.
    Pm,
    /// Implements an approved plan.
    Coder,
    /// Images.
    Artist,
    /// Questions that need the web, answered citing the pages read.
    Researcher,
}

impl Role {
    /// Every role, in the order the replies list them.
    pub const ALL: [Role; 4] = [Role::Pm, Role::Coder, Role::Artist, Role::Researcher];

    /// The role's name as written in mentions, conversations and usage records.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pm => "pm",
            Self::Coder => "coder",
            Self::Artist => "artist",
            Self::Researcher => "researcher",
        }
    }

    /// The role's name as people read it: in front of what it says in the thread, in the
    /// history a model is given and in the journal.
    pub const fn label(self) -> &'static str {
        match self {
            Self::Pm => "PM",
            Self::Coder => "Coder",
            Self::Artist => "Artist",
            Self::Researcher => "Researcher",
        }
    }

    /// The role named `name` (lower-case), if there is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A role as a message names it: one of ours, or a name we do not know (kept as written,
/// lower-cased, so the reply can say it does not exist).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mention {
    Role(Role),
    Unknown(String),
}

impl Mention {
    /// The name as mentioned.
    pub fn name(&self) -> &str {
        match self {
            Self::Role(role) => role.as_str(),
            Self::Unknown(name) => name,
        }
    }
}

impl From<&str> for Mention {
    fn from(name: &str) -> Self {
        Role::parse(name).map_or_else(|| Self::Unknown(name.to_owned()), Self::Role)
    }
}

impl PartialEq<&str> for Mention {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip_through_their_names() {
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Some(role));
        }
        assert_eq!(Role::parse("reviewer"), None);
        assert_eq!(Mention::from("coder"), Mention::Role(Role::Coder));
        assert_eq!(
            Mention::from("reviewer"),
            Mention::Unknown("reviewer".into())
        );
    }
}

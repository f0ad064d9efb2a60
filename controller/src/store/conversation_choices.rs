//! Which repository a direct-message conversation is about when one service serves several
//! (`crate::service::conversations`): asked once, answered by the person, kept across
//! restarts. Written as [`super::Change::ConversationAsked`] and
//! [`super::Change::ConversationChosen`], each with the line that says so.

use super::{Store, StoreError};

/// What is settled of a conversation's repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConversationChoice {
    /// Nothing asked yet.
    NotAsked,
    /// Asked, not answered.
    Asked,
    /// The repository of this name (as the configuration names it).
    Chosen(String),
}

impl Store {
    /// What is settled of the repository of the conversation in `channel`.
    pub async fn conversation_choice(
        &self,
        channel: &str,
    ) -> Result<ConversationChoice, StoreError> {
        let row = sqlx::query_scalar::<_, Option<String>>(
            "SELECT repository FROM conversation_choices WHERE channel_id = $1",
        )
        .bind(channel)
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            None => ConversationChoice::NotAsked,
            Some(None) => ConversationChoice::Asked,
            Some(Some(name)) => ConversationChoice::Chosen(name),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Change;

    async fn a_conversation_is_asked_once_then_chosen(s: &Store) {
        assert_eq!(
            s.conversation_choice("D1").await.unwrap(),
            ConversationChoice::NotAsked
        );
        let asked = Change::ConversationAsked { channel: "D1" };
        assert!(s.commit(&[asked], &[]).await.unwrap());
        assert!(!s.commit(&[asked], &[]).await.unwrap(), "asked once");
        assert_eq!(
            s.conversation_choice("D1").await.unwrap(),
            ConversationChoice::Asked
        );
        for name in ["api", "web"] {
            let chosen = Change::ConversationChosen {
                channel: "D1",
                repository: name,
                user: "U1",
            };
            s.commit(&[chosen], &[]).await.unwrap();
        }
        assert_eq!(
            s.conversation_choice("D1").await.unwrap(),
            ConversationChoice::Chosen("web".into())
        );
    }

    crate::store::testing::on_both_backends!(a_conversation_is_asked_once_then_chosen);
}

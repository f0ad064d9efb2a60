//! Which repository a conversation outside every repository's channel is about when one
//! service serves several (`crate::service::conversations`): a direct-message conversation,
//! or the thread of a mention in a channel no repository is served in. Asked once, answered
//! by the person, kept across restarts. Written as [`super::Change::ConversationAsked`] and
//! [`super::Change::ConversationChosen`], each with the line that says so.

use super::{Store, StoreError};
use crate::domain::Conversation;

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
    /// What is settled of the repository of `conversation`.
    pub async fn conversation_choice(
        &self,
        conversation: &Conversation,
    ) -> Result<ConversationChoice, StoreError> {
        let row = sqlx::query_scalar::<_, Option<String>>(
            "SELECT repository FROM conversation_choices WHERE channel_id = $1 AND thread_ts = $2",
        )
        .bind(conversation.channel())
        .bind(conversation.thread_ts())
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
    use crate::domain::ThreadKey;
    use crate::store::Change;

    async fn a_conversation_is_asked_once_then_chosen(s: &Store) {
        let dm = Conversation::Direct("D1".into());
        assert_eq!(
            s.conversation_choice(&dm).await.unwrap(),
            ConversationChoice::NotAsked
        );
        let asked = Change::ConversationAsked(&dm);
        assert!(s.commit(&[asked], &[]).await.unwrap());
        assert!(!s.commit(&[asked], &[]).await.unwrap(), "asked once");
        assert_eq!(
            s.conversation_choice(&dm).await.unwrap(),
            ConversationChoice::Asked
        );
        for name in ["api", "web"] {
            let chosen = Change::ConversationChosen {
                conversation: &dm,
                repository: name,
                user: "U1",
            };
            assert!(s.commit(&[chosen], &[]).await.unwrap(), "{name} chosen");
        }
        assert_eq!(
            s.conversation_choice(&dm).await.unwrap(),
            ConversationChoice::Chosen("web".into())
        );
        let again = Change::ConversationChosen {
            conversation: &dm,
            repository: "web",
            user: "U1",
        };
        assert!(
            !s.commit(&[again], &[]).await.unwrap(),
            "the same choice again changes nothing"
        );
    }

    /// A mention's thread is a conversation of its own, apart from its channel's other
    /// threads and from a direct-message conversation.
    async fn a_mention_thread_is_its_own_conversation(s: &Store) {
        let thread = |ts: &str| {
            Conversation::Thread(ThreadKey {
                channel: "C9".into(),
                thread_ts: ts.into(),
            })
        };
        let (first, second) = (thread("1.1"), thread("2.2"));
        let chosen = Change::ConversationChosen {
            conversation: &first,
            repository: "api",
            user: "U1",
        };
        assert!(s.commit(&[chosen], &[]).await.unwrap());
        assert_eq!(
            s.conversation_choice(&first).await.unwrap(),
            ConversationChoice::Chosen("api".into())
        );
        assert_eq!(
            s.conversation_choice(&second).await.unwrap(),
            ConversationChoice::NotAsked
        );
        assert_eq!(
            s.conversation_choice(&Conversation::Direct("C9".into()))
                .await
                .unwrap(),
            ConversationChoice::NotAsked
        );
    }

    crate::store::testing::on_both_backends!(
        a_conversation_is_asked_once_then_chosen,
        a_mention_thread_is_its_own_conversation
    );
}

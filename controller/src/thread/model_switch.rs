//! The check a PM model chosen from Slack passes before a thread uses it, by the rule the
//! start applies to the configuration's ids: an id the provider's model list lacks is
//! refused in the thread with the closest ids the list has; a list that cannot be read
//! leaves the id unchecked and the switch goes on. `/codebutler pm <model>`
//! ([`crate::thread::pm_choice`]) calls [`check_pm_model`] and answers with its refusal.

use crate::gateway::{Gateway, ModelCheck};

/// What a switch of the PM's model to an id may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PmModelSwitch {
    /// The provider carries the id.
    Accepted,
    /// The provider's model list could not be read (why, in a few words): the id is used
    /// unchecked, as at start.
    Unchecked(String),
    /// The provider does not carry the id: this is the thread's answer, and nothing changes.
    Refused(String),
}

/// Whether the PM may switch to `id`, asked of the provider's model list (read anew when the
/// kept one lacks it: the provider may have added it since the start).
pub async fn check_pm_model(gateway: &Gateway, id: &str) -> PmModelSwitch {
    match gateway.check_model(id).await {
        ModelCheck::Known => PmModelSwitch::Accepted,
        ModelCheck::Unchecked(why) => PmModelSwitch::Unchecked(why),
        ModelCheck::Unknown { closest } => PmModelSwitch::Refused(refusal(id, &closest)),
    }
}

/// The thread's answer to a switch to `id`, which the provider does not list.
fn refusal(id: &str, closest: &[String]) -> String {
    let suggestion = if closest.is_empty() {
        "None of its models is close to it.".to_owned()
    } else {
        let ids: Vec<String> = closest.iter().map(|c| format!("`{}`", inline(c))).collect();
        format!("The closest it lists: {}.", ids.join(", "))
    };
    format!(
        "I can't switch the PM to `{}`: the model provider does not list it. {suggestion} The \
         PM keeps its model.",
        inline(id)
    )
}

/// `text` as inline code can hold it: one line, without backticks (no model id has one).
fn inline(text: &str) -> String {
    text.chars()
        .map(|c| if c == '`' || c.is_control() { ' ' } else { c })
        .take(120)
        .collect()
}

#[cfg(test)]
mod tests {
    use codebutler_test_support::model::FakeModel;

    use super::*;
    use crate::config::OpenRouterConfig;
    use crate::secret::Secret;
    use crate::store::Store;

    async fn gateway(model: &FakeModel, dir: &tempfile::TempDir) -> Gateway {
        let store = Store::open(&dir.path().join("s.db")).await.unwrap();
        let config = OpenRouterConfig {
            api_key: Secret::new("sk-or-test"),
            base_url: model.base_url(),
            timeout_secs: 5,
            max_retries: 0,
            breaker_failures: 0,
            breaker_cool_down_secs: 0,
        };
        Gateway::new(&config, store).unwrap()
    }

    #[tokio::test]
    async fn an_id_the_provider_lacks_is_refused_with_the_closest_it_has() {
        let model = FakeModel::start().await;
        for id in [
            "moonshotai/kimi-k2",
            "anthropic/claude-sonnet-4.5",
            "anthropic/claude-opus-4.6",
        ] {
            model.list(id);
        }
        let dir = tempfile::tempdir().unwrap();
        let gateway = gateway(&model, &dir).await;
        assert_eq!(
            check_pm_model(&gateway, "anthropic/claude-sonnet-4.5").await,
            PmModelSwitch::Accepted
        );
        assert_eq!(
            check_pm_model(&gateway, "anthropic/claude-sonnet-4-5").await,
            PmModelSwitch::Refused(
                "I can't switch the PM to `anthropic/claude-sonnet-4-5`: the model provider does \
                 not list it. The closest it lists: `anthropic/claude-sonnet-4.5`, \
                 `anthropic/claude-opus-4.6`. The PM keeps its model."
                    .to_owned()
            )
        );
        assert_eq!(
            check_pm_model(&gateway, "acme/`nothing`\nlike it").await,
            PmModelSwitch::Refused(
                "I can't switch the PM to `acme/ nothing  like it`: the model provider does not \
                 list it. None of its models is close to it. The PM keeps its model."
                    .to_owned()
            )
        );
    }

    /// The list read at the start is kept, but a model the provider added since is found:
    /// an id the kept list lacks is looked up in the list read anew.
    #[tokio::test]
    async fn a_model_added_since_the_list_was_read_is_accepted() {
        let model = FakeModel::start().await;
        model.list("moonshotai/kimi-k2");
        let dir = tempfile::tempdir().unwrap();
        let gateway = gateway(&model, &dir).await;
        assert_eq!(
            check_pm_model(&gateway, "moonshotai/kimi-k2").await,
            PmModelSwitch::Accepted
        );
        assert_eq!(model.model_list_requests().len(), 1);
        model.list("moonshotai/kimi-k2.5");
        assert_eq!(
            check_pm_model(&gateway, "moonshotai/kimi-k2.5").await,
            PmModelSwitch::Accepted
        );
        assert_eq!(model.model_list_requests().len(), 2);
        // Known ids are answered from the kept list.
        assert_eq!(
            check_pm_model(&gateway, "moonshotai/kimi-k2").await,
            PmModelSwitch::Accepted
        );
        assert_eq!(model.model_list_requests().len(), 2);
    }

    #[tokio::test]
    async fn a_list_that_cannot_be_read_leaves_the_id_unchecked() {
        let model = FakeModel::start().await;
        model.fail_model_list(502);
        let dir = tempfile::tempdir().unwrap();
        let gateway = gateway(&model, &dir).await;
        assert_eq!(
            check_pm_model(&gateway, "anthropic/claude-opus-4.6").await,
            PmModelSwitch::Unchecked("the provider answered HTTP 502".to_owned())
        );
    }
}

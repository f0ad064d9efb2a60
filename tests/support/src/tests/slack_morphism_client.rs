//! FakeSlack driven by the very client the daemon uses: slack-morphism 2.31.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;

use crate::slack::*;

type Connector = SlackClientHyperConnector<HttpConnector>;

const T: Duration = Duration::from_secs(10);

/// Events and listener errors seen by the callbacks (plain `fn`s, so state goes through statics).
static EVENTS: Mutex<Vec<SlackPushEventCallback>> = Mutex::new(Vec::new());
static ERRORS: Mutex<Vec<String>> = Mutex::new(Vec::new());

async fn on_push(
    event: SlackPushEventCallback,
    _client: Arc<SlackClient<Connector>>,
    _state: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    EVENTS.lock().unwrap().push(event);
    Ok(())
}

fn on_error(
    err: Box<dyn std::error::Error + Send + Sync>,
    _client: Arc<SlackClient<Connector>>,
    _state: SlackClientEventsUserState,
) -> axum::http::StatusCode {
    ERRORS.lock().unwrap().push(format!("{err:?}"));
    axum::http::StatusCode::OK
}

fn events() -> Vec<SlackPushEventCallback> {
    EVENTS.lock().unwrap().clone()
}

fn message_events() -> Vec<SlackMessageEvent> {
    events()
        .into_iter()
        .filter_map(|e| match e.event {
            SlackEventCallbackBody::Message(m) => Some(m),
            _ => None,
        })
        .collect()
}

fn client(fake: &FakeSlack) -> Arc<SlackClient<Connector>> {
    let api = fake.api_url();
    let connector = SlackClientHyperConnector::with_connector(HttpConnector::new())
        .with_slack_api_url(api.trim_end_matches('/'));
    Arc::new(SlackClient::new(connector))
}

fn token(value: &str) -> SlackApiToken {
    SlackApiToken::new(SlackApiTokenValue(value.into()))
}

#[tokio::test]
async fn slack_morphism_speaks_with_the_fake() {
    let fake = FakeSlack::start().await;
    let client = client(&fake);
    let bot = token(BOT_TOKEN);
    let session = client.open_session(&bot);

    let auth = session.auth_test().await.unwrap();
    assert_eq!(auth.user_id.0, BOT_USER_ID);
    assert_eq!(auth.team_id.0, TEAM_ID);
    assert_eq!(auth.bot_id.as_ref().unwrap().0, BOT_ID);

    // Socket Mode with the crate's default of 2 connections, without the 5 s stagger.
    let env = Arc::new(
        SlackClientEventsListenerEnvironment::new(client.clone()).with_error_handler(on_error),
    );
    let callbacks = SlackSocketModeListenerCallbacks::new().with_push_events(on_push);
    let config = SlackClientSocketModeConfig::new().with_initial_backoff_in_seconds(0);
    let listener = SlackClientSocketModeListener::new(&config, env, callbacks);
    listener.listen_for(&token(APP_TOKEN)).await.unwrap();
    listener.start().await;
    assert!(fake.wait_until(T, || fake.open_connections() == 2).await);
    assert_eq!(fake.calls_of("apps.connections.open").len(), 2);

    // A user message reaches the callback as a parsed Message and is acked.
    let sent = fake.user_message(CHANNEL, "U0ALICE", "hello bot", None);
    assert!(fake.wait_acked(&sent.envelope_id, T).await);
    let msgs = message_events();
    assert_eq!(msgs.len(), 1, "{:?}", events());
    let m = &msgs[0];
    assert_eq!(m.origin.ts.0, sent.ts);
    assert_eq!(m.origin.channel.as_ref().unwrap().0, CHANNEL);
    assert_eq!(m.sender.user.as_ref().unwrap().0, "U0ALICE");
    assert_eq!(
        m.content.as_ref().unwrap().text.as_deref(),
        Some("hello bot")
    );
    assert!(
        m.content.as_ref().unwrap().blocks.is_some(),
        "rich_text blocks parse"
    );
    assert_eq!(events()[0].event_id.0, sent.event_id);

    // postMessage in the thread: response parses, and the echo arrives as a bot message.
    let posted = session
        .chat_post_message(
            &SlackApiChatPostMessageRequest::new(
                SlackChannelId(CHANNEL.into()),
                SlackMessageContent::new().with_text("working on it".into()),
            )
            .with_thread_ts(SlackTs(sent.ts.clone())),
        )
        .await
        .unwrap();
    assert_eq!(posted.channel.0, CHANNEL);
    assert!(fake.wait_until(T, || message_events().len() == 2).await);
    let echo = message_events().pop().unwrap();
    assert_eq!(echo.origin.ts, posted.ts);
    assert_eq!(echo.origin.thread_ts.as_ref().unwrap().0, sent.ts);
    assert_eq!(echo.sender.bot_id.as_ref().unwrap().0, BOT_ID);
    assert!(echo.subtype.is_none());

    // chat.update parses; its message_changed echo parses as a Message with a subtype.
    let updated = session
        .chat_update(&SlackApiChatUpdateRequest::new(
            SlackChannelId(CHANNEL.into()),
            SlackMessageContent::new().with_text("done".into()),
            posted.ts.clone(),
        ))
        .await
        .unwrap();
    assert_eq!(updated.ts, posted.ts);
    assert!(fake.wait_until(T, || message_events().len() == 3).await);
    assert_eq!(
        message_events()[2].subtype,
        Some(SlackMessageEventType::MessageChanged)
    );

    // reactions.add, then already_reacted as an ApiError.
    let add = SlackApiReactionsAddRequest::new(
        SlackChannelId(CHANNEL.into()),
        SlackReactionName("eyes".into()),
        SlackTs(sent.ts.clone()),
    );
    session.reactions_add(&add).await.unwrap();
    match session.reactions_add(&add).await {
        Err(SlackClientError::ApiError(e)) => assert_eq!(e.code, "already_reacted"),
        other => panic!("expected already_reacted, got {other:?}"),
    }

    // Upload: get URL (GET), raw POST of the bytes, complete into the thread.
    let content = b"line 1\nline 2\n".to_vec();
    let url = session
        .get_upload_url_external(&SlackApiFilesGetUploadUrlExternalRequest::new(
            "notes.txt".into(),
            content.len(),
        ))
        .await
        .unwrap();
    session
        .files_upload_via_url(&SlackApiFilesUploadViaUrlRequest::new(
            url.upload_url.clone(),
            content.clone(),
            "text/plain".into(),
        ))
        .await
        .unwrap();
    let done = session
        .files_complete_upload_external(
            &SlackApiFilesCompleteUploadExternalRequest::new(vec![
                SlackApiFilesComplete::new(url.file_id.clone()).with_title("Notes".into()),
            ])
            .with_channel_id(SlackChannelId(CHANNEL.into()))
            .with_thread_ts(SlackTs(sent.ts.clone())),
        )
        .await
        .unwrap();
    assert_eq!(done.files[0].id, url.file_id);
    let uploads = fake.uploads();
    assert_eq!(uploads.len(), 1);
    assert_eq!(uploads[0].content, "line 1\nline 2\n");
    assert_eq!(uploads[0].title, "Notes");
    assert_eq!(uploads[0].thread_ts.as_deref(), Some(sent.ts.as_str()));
    assert!(fake.wait_until(T, || message_events().len() == 4).await);
    assert_eq!(
        message_events()[3].subtype,
        Some(SlackMessageEventType::FileShare)
    );

    // 429 → RateLimitError with retry_after.
    fake.rate_limit("chat.postMessage", 1, 7);
    let req = SlackApiChatPostMessageRequest::new(
        SlackChannelId(CHANNEL.into()),
        SlackMessageContent::new().with_text("again".into()),
    );
    match session.chat_post_message(&req).await {
        Err(SlackClientError::RateLimitError(e)) => {
            assert_eq!(e.retry_after, Some(Duration::from_secs(7)))
        }
        other => panic!("expected a rate limit error, got {other:?}"),
    }
    session.chat_post_message(&req).await.unwrap();

    // disconnect → the crate reconnects through apps.connections.open; events still flow.
    let opened = fake.connections_opened();
    fake.disconnect_all();
    assert!(
        fake.wait_until(T, || fake.connections_opened() >= opened + 2
            && fake.open_connections() == 2)
            .await,
        "opened {} open {}",
        fake.connections_opened(),
        fake.open_connections()
    );
    assert_eq!(fake.calls_of("apps.connections.open").len(), 4);
    let after = fake.user_message(CHANNEL, "U0ALICE", "still there?", None);
    assert!(fake.wait_acked(&after.envelope_id, T).await);

    // Everything was acked, nothing failed to parse, no protocol problems.
    let distinct = events()
        .iter()
        .map(|e| e.event_id.0.clone())
        .collect::<std::collections::HashSet<_>>()
        .len();
    assert_eq!(distinct, events().len(), "no event delivered twice");
    assert!(
        ERRORS.lock().unwrap().is_empty(),
        "{:?}",
        ERRORS.lock().unwrap()
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    listener.shutdown().await;
}

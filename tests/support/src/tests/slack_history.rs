//! FakeSlack's history: message metadata on `chat.postMessage` and `conversations.replies`
//! with `include_all_metadata`, paging, rate limits; and stalled answers.

use std::time::Duration;

use serde_json::{Value, json};

use super::http;
use super::slack_raw::urlencode;
use crate::slack::*;

const T: Duration = Duration::from_secs(5);

async fn post(fake: &FakeSlack, method: &str, body: Value) -> (u16, Value) {
    let resp = http()
        .post(format!("{}{method}", fake.api_url()))
        .bearer_auth(BOT_TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// `conversations.replies` as slack-morphism sends it: a GET with a query string.
async fn replies(fake: &FakeSlack, query: &[(&str, &str)]) -> (u16, Value) {
    let resp = http()
        .get(format!(
            "{}conversations.replies?{}",
            fake.api_url(),
            urlencode(query)
        ))
        .bearer_auth(BOT_TOKEN)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

fn metadata(id: &str) -> Value {
    json!({"event_type": "codebutler_post", "event_payload": {"id": id}})
}

/// A thread started by a user, with `n` bot replies carrying metadata `r0`, `r1`, ….
async fn thread_with_replies(fake: &FakeSlack, n: usize) -> String {
    let parent = fake.user_message(CHANNEL, "U1", "question", None).ts;
    for i in 0..n {
        let (_, r) = post(
            fake,
            "chat.postMessage",
            json!({"channel": CHANNEL, "thread_ts": parent, "text": format!("reply {i}"),
                   "metadata": metadata(&format!("r{i}"))}),
        )
        .await;
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["message"]["metadata"], metadata(&format!("r{i}")));
    }
    parent
}

#[tokio::test]
async fn posts_keep_their_metadata_and_replies_return_it_only_when_asked() {
    let fake = FakeSlack::start().await;
    let parent = thread_with_replies(&fake, 2).await;
    // Another thread's reply and a top-level post are not part of this thread.
    let other = fake.user_message(CHANNEL, "U1", "other", None).ts;
    post(
        &fake,
        "chat.postMessage",
        json!({"channel": CHANNEL, "thread_ts": other, "text": "elsewhere"}),
    )
    .await;
    assert_eq!(fake.posts()[0].metadata, Some(metadata("r0")));

    let (_, plain) = replies(&fake, &[("channel", CHANNEL), ("ts", &parent)]).await;
    assert_eq!(plain["ok"], true, "{plain}");
    let texts: Vec<&str> = plain["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["question", "reply 0", "reply 1"]);
    assert!(plain["messages"][1].get("metadata").is_none(), "{plain}");
    assert_eq!(plain["has_more"], false);
    assert!(
        plain["messages"][0].get("channel").is_none(),
        "history shape"
    );

    let (_, full) = replies(
        &fake,
        &[
            ("channel", CHANNEL),
            ("ts", &parent),
            ("include_all_metadata", "true"),
        ],
    )
    .await;
    assert_eq!(full["messages"][1]["metadata"], metadata("r0"));
    assert_eq!(full["messages"][2]["metadata"], metadata("r1"));
    assert_eq!(full["messages"][2]["bot_id"], BOT_ID);

    // Any message of the thread names it; an unknown ts does not.
    let reply_ts = fake.posts()[1].ts.clone();
    let (_, by_reply) = replies(&fake, &[("channel", CHANNEL), ("ts", &reply_ts)]).await;
    assert_eq!(by_reply["messages"].as_array().unwrap().len(), 3);
    // Bounded by time: from the second reply on.
    let second = fake.posts()[1].ts.clone();
    let (_, later) = replies(
        &fake,
        &[
            ("channel", CHANNEL),
            ("ts", &parent),
            ("oldest", &second),
            ("inclusive", "true"),
        ],
    )
    .await;
    let later: Vec<&str> = later["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(later, ["reply 1"]);
    let (_, after) = replies(
        &fake,
        &[("channel", CHANNEL), ("ts", &parent), ("oldest", &second)],
    )
    .await;
    assert!(after["messages"].as_array().unwrap().is_empty(), "{after}");
    let (_, missing) = replies(&fake, &[("channel", CHANNEL), ("ts", "1.000009")]).await;
    assert_eq!(missing["error"], "thread_not_found");
    let (_, no_ts) = replies(&fake, &[("channel", CHANNEL)]).await;
    assert_eq!(no_ts["error"], "invalid_arguments");
}

#[tokio::test]
async fn malformed_metadata_is_refused_like_slack_does() {
    let fake = FakeSlack::start().await;
    for bad in [
        json!({"event_payload": {"id": "x"}}),
        json!({"event_type": "", "event_payload": {}}),
        json!({"event_type": "has space", "event_payload": {}}),
        json!({"event_type": "ok_type", "event_payload": "not an object"}),
        json!("not json"),
    ] {
        let (_, r) = post(
            &fake,
            "chat.postMessage",
            json!({"channel": CHANNEL, "text": "t", "metadata": bad}),
        )
        .await;
        assert_eq!(r["error"], "invalid_metadata_format", "{bad}");
    }
    assert!(fake.posts().is_empty());
}

#[tokio::test]
async fn replies_are_paged_with_cursors_and_capped_pages() {
    let fake = FakeSlack::start().await;
    let parent = thread_with_replies(&fake, 6).await;
    fake.cap_history_pages(3);
    let mut seen = Vec::new();
    let mut cursor = String::new();
    let mut pages = 0;
    loop {
        let mut query = vec![
            ("channel", CHANNEL),
            ("ts", parent.as_str()),
            ("limit", "200"),
            ("include_all_metadata", "1"),
        ];
        if !cursor.is_empty() {
            query.push(("cursor", cursor.as_str()));
        }
        let (_, page) = replies(&fake, &query).await;
        assert_eq!(page["ok"], true, "{page}");
        pages += 1;
        let messages = page["messages"].as_array().unwrap();
        assert!(messages.len() <= 3, "the cap wins over limit");
        seen.extend(
            messages
                .iter()
                .map(|m| m["text"].as_str().unwrap().to_owned()),
        );
        cursor = page["response_metadata"]["next_cursor"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(page["has_more"], !cursor.is_empty());
        if cursor.is_empty() {
            break;
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len(), 7, "{seen:?}");
    assert_eq!(seen[0], "question");
    assert_eq!(seen[6], "reply 5");
    let (_, bad) = replies(
        &fake,
        &[("channel", CHANNEL), ("ts", &parent), ("cursor", "zz")],
    )
    .await;
    assert_eq!(bad["error"], "invalid_cursor");
}

#[tokio::test]
async fn replies_can_be_rate_limited_and_follow_edits_and_deletions() {
    let fake = FakeSlack::start().await;
    let parent = thread_with_replies(&fake, 2).await;
    fake.rate_limit("conversations.replies", 1, 7);
    let (status, limited) = replies(&fake, &[("channel", CHANNEL), ("ts", &parent)]).await;
    assert_eq!(
        (status, limited["error"].as_str()),
        (429, Some("ratelimited"))
    );

    let first = fake.posts()[0].ts.clone();
    let (_, r) = post(
        &fake,
        "chat.update",
        json!({"channel": CHANNEL, "ts": first, "text": "edited"}),
    )
    .await;
    assert_eq!(r["ok"], true);
    fake.send_event(
        json!({"type": "message", "subtype": "message_deleted", "channel": CHANNEL,
        "hidden": true, "deleted_ts": fake.posts()[1].ts, "ts": fake.next_ts()}),
    );
    let (_, now) = replies(
        &fake,
        &[
            ("channel", CHANNEL),
            ("ts", &parent),
            ("include_all_metadata", "true"),
        ],
    )
    .await;
    let messages = now["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{now}");
    assert_eq!(messages[1]["text"], "edited");
    assert!(messages[1]["edited"]["ts"].is_string());
    assert_eq!(
        messages[1]["metadata"],
        metadata("r0"),
        "an edit keeps the metadata"
    );
}

#[tokio::test]
async fn a_stalled_call_takes_effect_but_its_answer_waits() {
    let fake = FakeSlack::start().await;
    let stall = fake.stall_next("chat.postMessage");
    let f = fake.clone();
    let call = tokio::spawn(async move {
        post(
            &f,
            "chat.postMessage",
            json!({"channel": CHANNEL, "text": "held"}),
        )
        .await
    });
    assert!(stall.reached(T).await);
    assert_eq!(fake.posts().len(), 1, "posted before the answer");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!call.is_finished(), "the answer is held");
    drop(stall);
    let (_, r) = tokio::time::timeout(T, call).await.unwrap().unwrap();
    assert_eq!(r["ok"], true);
    // Only the next call stalls.
    let (_, again) = post(
        &fake,
        "chat.postMessage",
        json!({"channel": CHANNEL, "text": "free"}),
    )
    .await;
    assert_eq!(again["ok"], true);
}

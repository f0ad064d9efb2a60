//! FakeSlack driven by reqwest and a bare tokio-tungstenite client.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::http;
use crate::slack::*;

pub(super) fn urlencode(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                b' ' => "+".to_owned(),
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

const T: Duration = Duration::from_secs(5);

async fn post_json(fake: &FakeSlack, method: &str, token: &str, body: Value) -> Value {
    http()
        .post(format!("{}{method}", fake.api_url()))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn get(fake: &FakeSlack, method: &str, token: &str, query: &[(&str, &str)]) -> Value {
    http()
        .get(format!("{}{method}?{}", fake.api_url(), urlencode(query)))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn connect(fake: &FakeSlack) -> Ws {
    let open = post_json(fake, "apps.connections.open", APP_TOKEN, json!({})).await;
    assert_eq!(open["ok"], true, "{open}");
    let url = open["url"].as_str().unwrap();
    assert!(url.starts_with(&format!("ws://{}/ws?ticket=", fake.addr())));
    let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    ws
}

async fn next_json(ws: &mut Ws) -> Value {
    loop {
        let msg = tokio::time::timeout(T, ws.next())
            .await
            .expect("timed out waiting for a frame")
            .expect("socket closed")
            .unwrap();
        match msg {
            Message::Text(t) => return serde_json::from_str(t.as_str()).unwrap(),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

/// Reads the hello, which counts the app's open connections (`num_connections`).
async fn hello_of(ws: &mut Ws, num_connections: usize) {
    let hello = next_json(ws).await;
    assert_eq!(
        hello,
        json!({
            "type": "hello",
            "num_connections": num_connections,
            "debug_info": {"host": "fake-slack", "build_number": 1, "approximate_connection_time": 18060},
            "connection_info": {"app_id": APP_ID},
        })
    );
}

/// Reads the hello of the app's only connection.
async fn hello(ws: &mut Ws) {
    hello_of(ws, 1).await;
}

#[tokio::test]
async fn web_api_auth_and_errors() {
    let fake = FakeSlack::start().await;
    assert!(fake.api_url().starts_with("http://127.0.0.1:"));
    assert!(fake.api_url().ends_with("/api/"));

    let auth = get(&fake, "auth.test", BOT_TOKEN, &[]).await;
    assert_eq!(
        auth,
        json!({
            "ok": true, "url": "https://fake.slack.com/", "team": "Fake", "user": "codebutler",
            "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID, "is_enterprise_install": false,
        })
    );
    assert_eq!(
        get(&fake, "auth.test", "xoxb-wrong", &[]).await["error"],
        "invalid_auth"
    );
    assert_eq!(
        get(&fake, "auth.test", APP_TOKEN, &[]).await["error"],
        "not_allowed_token_type"
    );
    assert_eq!(
        post_json(&fake, "apps.connections.open", BOT_TOKEN, json!({})).await["error"],
        "not_allowed_token_type"
    );
    let resp = http()
        .post(format!("{}auth.test", fake.api_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.json::<Value>().await.unwrap()["error"], "not_authed");
    // The token may also come as a form parameter.
    let resp: Value = http()
        .post(format!("{}auth.test", fake.api_url()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(urlencode(&[("token", BOT_TOKEN)]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resp["ok"], true);
    assert_eq!(
        post_json(&fake, "users.list", BOT_TOKEN, json!({"channel": CHANNEL})).await["error"],
        "unknown_method"
    );
    assert_eq!(
        post_json(
            &fake,
            "chat.postMessage",
            BOT_TOKEN,
            json!({"text": "no channel"})
        )
        .await["error"],
        "invalid_arguments"
    );
    assert_eq!(
        post_json(
            &fake,
            "chat.postMessage",
            BOT_TOKEN,
            json!({"channel": CHANNEL})
        )
        .await["error"],
        "no_text"
    );

    let calls = fake.calls();
    assert_eq!(calls.len(), 9);
    assert_eq!(calls[0].method, "auth.test");
    assert_eq!(calls[0].http_method, "GET");
    assert_eq!(calls[0].error, None);
    assert_eq!(calls[1].error.as_deref(), Some("invalid_auth"));
    let unknown = fake.calls_of("users.list");
    assert_eq!(unknown.len(), 1);
    assert_eq!(unknown[0].params, json!({"channel": CHANNEL}));
    assert!(fake.posts().is_empty());
}

#[tokio::test]
async fn socket_mode_hello_event_ack_resend_and_ping() {
    let fake = FakeSlack::start().await;
    let mut ws = connect(&fake).await;
    hello(&mut ws).await;
    assert!(fake.wait_connected(T).await);
    assert_eq!(fake.connections_opened(), 1);
    assert_eq!(fake.hellos_sent(), 1);

    let sent = fake.user_message(CHANNEL, "U0ALICE", "hi bot", None);
    let env = next_json(&mut ws).await;
    assert_eq!(env["envelope_id"], sent.envelope_id);
    assert_eq!(env["type"], "events_api");
    assert_eq!(env["accepts_response_payload"], false);
    assert_eq!(env["retry_attempt"], 0);
    assert_eq!(env["retry_reason"], "");
    let payload = &env["payload"];
    assert_eq!(payload["type"], "event_callback");
    assert_eq!(payload["team_id"], TEAM_ID);
    assert_eq!(payload["api_app_id"], APP_ID);
    assert_eq!(payload["event_id"], sent.event_id);
    assert!(payload["event_time"].as_u64().unwrap() > 1_600_000_000);
    assert_eq!(
        payload["authorizations"][0]["user_id"], BOT_USER_ID,
        "{payload}"
    );
    let ev = &payload["event"];
    assert_eq!(ev["type"], "message");
    assert_eq!(ev["channel"], CHANNEL);
    assert_eq!(ev["user"], "U0ALICE");
    assert_eq!(ev["text"], "hi bot");
    assert_eq!(ev["ts"], sent.ts);
    assert_eq!(ev["event_ts"], sent.ts);
    assert_eq!(ev["channel_type"], "channel");
    assert!(ev["client_msg_id"].is_string());
    assert!(ev.get("thread_ts").is_none());
    assert!(ev.get("subtype").is_none());

    // Ack it.
    ws.send(Message::Text(
        json!({"envelope_id": sent.envelope_id}).to_string().into(),
    ))
    .await
    .unwrap();
    assert!(fake.wait_acked(&sent.envelope_id, T).await);
    let acks = fake.acks();
    assert_eq!(acks.len(), 1);
    assert!(acks[0].at >= fake.sent_at(&sent.envelope_id));
    assert_eq!(acks[0].payload, None);

    // Resend: same ids, retry bumped.
    fake.resend(&sent.envelope_id);
    let again = next_json(&mut ws).await;
    assert_eq!(again["envelope_id"], sent.envelope_id);
    assert_eq!(again["retry_attempt"], 1);
    assert_eq!(again["retry_reason"], "timeout");
    assert_eq!(again["payload"]["event_id"], sent.event_id);
    fake.resend(&sent.envelope_id);
    assert_eq!(next_json(&mut ws).await["retry_attempt"], 2);

    // Thread reply.
    let reply = fake.user_message(CHANNEL, "U0ALICE", "more", Some(&sent.ts));
    let env = next_json(&mut ws).await;
    assert_eq!(env["payload"]["event"]["thread_ts"], sent.ts);
    assert_eq!(env["payload"]["event"]["parent_user_id"], "U0ALICE");
    assert!(reply.ts > sent.ts, "ts are monotonic");

    // Arbitrary event.
    let s = fake
        .send_event(json!({"type": "member_joined_channel", "user": "U0BOB", "channel": CHANNEL}));
    let env = next_json(&mut ws).await;
    assert_eq!(env["payload"]["event"]["type"], "member_joined_channel");
    assert_eq!(env["payload"]["event"]["event_ts"], s.ts);

    // Pings are answered.
    ws.send(Message::Ping(b"abc".to_vec().into()))
        .await
        .unwrap();
    let pong = tokio::time::timeout(T, async {
        loop {
            if let Message::Pong(p) = ws.next().await.unwrap().unwrap() {
                return p;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(&pong[..], b"abc");

    // Acks of unknown envelopes are flagged.
    assert!(fake.violations().is_empty());
    ws.send(Message::Text(r#"{"envelope_id":"nope"}"#.into()))
        .await
        .unwrap();
    assert!(fake.wait_until(T, || !fake.violations().is_empty()).await);
}

#[tokio::test]
async fn events_wait_for_a_connection_then_round_robin() {
    let fake = FakeSlack::start().await;
    let first = fake.user_message(CHANNEL, "U1", "queued one", None);
    let second = fake.user_message(CHANNEL, "U1", "queued two", None);
    assert!(!fake.wait_connected(Duration::from_millis(50)).await);

    let mut a = connect(&fake).await;
    hello(&mut a).await;
    assert_eq!(next_json(&mut a).await["envelope_id"], first.envelope_id);
    assert_eq!(next_json(&mut a).await["envelope_id"], second.envelope_id);

    let mut b = connect(&fake).await;
    hello_of(&mut b, 2).await;
    assert!(fake.wait_until(T, || fake.open_connections() == 2).await);
    let ids: Vec<String> = (0..4)
        .map(|i| {
            fake.user_message(CHANNEL, "U1", &format!("m{i}"), None)
                .envelope_id
        })
        .collect();
    let mut got_a = vec![
        next_json(&mut a).await["envelope_id"]
            .as_str()
            .unwrap()
            .to_owned(),
        next_json(&mut a).await["envelope_id"]
            .as_str()
            .unwrap()
            .to_owned(),
    ];
    let got_b = vec![
        next_json(&mut b).await["envelope_id"]
            .as_str()
            .unwrap()
            .to_owned(),
        next_json(&mut b).await["envelope_id"]
            .as_str()
            .unwrap()
            .to_owned(),
    ];
    got_a.extend(got_b);
    got_a.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(got_a, want, "each event goes to exactly one socket");

    // disconnect_all: every socket gets `disconnect` then a close.
    fake.disconnect_all();
    for ws in [&mut a, &mut b] {
        let msg = next_json(ws).await;
        assert_eq!(
            msg,
            json!({"type": "disconnect", "reason": "refresh_requested", "debug_info": {"host": "fake-slack"}})
        );
        let close = tokio::time::timeout(T, ws.next()).await.unwrap();
        assert!(
            matches!(close, Some(Ok(Message::Close(_))) | None),
            "{close:?}"
        );
    }
    assert_eq!(fake.open_connections(), 0);
    // Sent while nobody is connected → queued for the next socket.
    let later = fake.user_message(CHANNEL, "U1", "after disconnect", None);
    let mut c = connect(&fake).await;
    hello(&mut c).await;
    assert_eq!(next_json(&mut c).await["envelope_id"], later.envelope_id);
    assert_eq!(fake.connections_opened(), 3);
    assert_eq!(fake.hellos_sent(), 3);
}

#[tokio::test]
async fn tickets_are_single_use() {
    let fake = FakeSlack::start().await;
    let open = post_json(&fake, "apps.connections.open", APP_TOKEN, json!({})).await;
    let url = open["url"].as_str().unwrap().to_owned();
    let (_ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    assert!(tokio_tungstenite::connect_async(&url).await.is_err());
    assert!(
        tokio_tungstenite::connect_async(format!("ws://{}/ws", fake.addr()))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn post_message_echo_update_and_reactions() {
    let fake = FakeSlack::start().await;
    let mut ws = connect(&fake).await;
    hello(&mut ws).await;
    let user = fake.user_message(CHANNEL, "U0ALICE", "do it", None);
    next_json(&mut ws).await;

    let resp = post_json(
        &fake,
        "chat.postMessage",
        BOT_TOKEN,
        json!({"channel": CHANNEL, "text": "on it", "thread_ts": user.ts}),
    )
    .await;
    assert_eq!(resp["ok"], true, "{resp}");
    assert_eq!(resp["channel"], CHANNEL);
    let ts = resp["ts"].as_str().unwrap().to_owned();
    assert!(ts > user.ts);
    assert_eq!(resp["message"]["ts"], ts);
    assert_eq!(resp["message"]["text"], "on it");
    assert_eq!(resp["message"]["user"], BOT_USER_ID);
    assert_eq!(resp["message"]["bot_id"], BOT_ID);
    assert_eq!(resp["message"]["type"], "message");

    let echo = next_json(&mut ws).await;
    let ev = &echo["payload"]["event"];
    assert_eq!(ev["type"], "message");
    assert!(ev.get("subtype").is_none());
    assert_eq!(ev["user"], BOT_USER_ID);
    assert_eq!(ev["bot_id"], BOT_ID);
    assert_eq!(ev["app_id"], APP_ID);
    assert_eq!(ev["ts"], ts);
    assert_eq!(ev["thread_ts"], user.ts);
    assert_eq!(ev["text"], "on it");

    // Form-encoded post works too (blocks as a JSON string).
    let resp: Value = http()
        .post(format!("{}chat.postMessage", fake.api_url()))
        .bearer_auth(BOT_TOKEN)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(urlencode(&[
            ("channel", CHANNEL),
            ("blocks", r#"[{"type":"divider"}]"#),
        ]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resp["ok"], true, "{resp}");
    next_json(&mut ws).await;

    let posts = fake.wait_posts(2, T).await;
    assert_eq!(
        posts[0],
        Post {
            channel: CHANNEL.into(),
            ts: ts.clone(),
            thread_ts: Some(user.ts.clone()),
            text: "on it".into(),
            blocks: None,
            metadata: None,
        }
    );
    assert_eq!(posts[1].text, "");
    // Slack keeps the blocks and gives each one a block_id.
    let blocks = posts[1].blocks.clone().unwrap();
    assert_eq!(blocks.as_array().unwrap().len(), 1, "{blocks}");
    assert_eq!(blocks[0]["type"], "divider");
    assert!(blocks[0]["block_id"].is_string(), "{blocks}");

    // chat.update of the bot's message → ok + message_changed event.
    let upd = post_json(
        &fake,
        "chat.update",
        BOT_TOKEN,
        json!({"channel": CHANNEL, "ts": ts, "text": "done"}),
    )
    .await;
    assert_eq!(upd["ok"], true, "{upd}");
    assert_eq!(upd["ts"], ts);
    let changed = next_json(&mut ws).await;
    assert_eq!(changed["payload"]["event"]["subtype"], "message_changed");
    assert_eq!(changed["payload"]["event"]["message"]["text"], "done");
    assert_eq!(
        changed["payload"]["event"]["previous_message"]["text"],
        "on it"
    );
    assert_eq!(
        fake.updates(),
        vec![Update {
            channel: CHANNEL.into(),
            ts: ts.clone(),
            text: "done".into(),
            blocks: None
        }]
    );
    // Not the bot's / unknown message.
    assert_eq!(
        post_json(
            &fake,
            "chat.update",
            BOT_TOKEN,
            json!({"channel": CHANNEL, "ts": user.ts, "text": "x"})
        )
        .await["error"],
        "cant_update_message"
    );
    assert_eq!(
        post_json(
            &fake,
            "chat.update",
            BOT_TOKEN,
            json!({"channel": CHANNEL, "ts": "1.000001", "text": "x"})
        )
        .await["error"],
        "message_not_found"
    );

    // Reactions.
    let add = json!({"channel": CHANNEL, "timestamp": user.ts, "name": "eyes"});
    assert_eq!(
        post_json(&fake, "reactions.add", BOT_TOKEN, add.clone()).await["ok"],
        true
    );
    assert_eq!(
        post_json(&fake, "reactions.add", BOT_TOKEN, add.clone()).await["error"],
        "already_reacted"
    );
    assert_eq!(
        post_json(&fake, "reactions.remove", BOT_TOKEN, add.clone()).await["ok"],
        true
    );
    assert_eq!(
        post_json(&fake, "reactions.remove", BOT_TOKEN, add.clone()).await["error"],
        "no_reaction"
    );
    assert_eq!(
        post_json(
            &fake,
            "reactions.add",
            BOT_TOKEN,
            json!({"channel": CHANNEL, "timestamp": "1.000001", "name": "eyes"})
        )
        .await["error"],
        "message_not_found"
    );
    assert_eq!(
        fake.reactions(),
        vec![Reaction {
            channel: CHANNEL.into(),
            ts: user.ts.clone(),
            name: "eyes".into()
        }]
    );
    assert!(fake.current_reactions().is_empty());
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn rate_limited_calls_get_429_with_retry_after() {
    let fake = FakeSlack::start().await;
    fake.rate_limit("chat.postMessage", 2, 7);
    let body = json!({"channel": CHANNEL, "text": "hi"});
    for _ in 0..2 {
        let resp = http()
            .post(format!("{}chat.postMessage", fake.api_url()))
            .bearer_auth(BOT_TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 429);
        assert_eq!(resp.headers()["retry-after"], "7");
        assert_eq!(
            resp.json::<Value>().await.unwrap(),
            json!({"ok": false, "error": "ratelimited"})
        );
    }
    assert_eq!(
        post_json(&fake, "chat.postMessage", BOT_TOKEN, body).await["ok"],
        true
    );
    assert_eq!(get(&fake, "auth.test", BOT_TOKEN, &[]).await["ok"], true);
    let errors: Vec<_> = fake
        .calls_of("chat.postMessage")
        .into_iter()
        .map(|c| c.error)
        .collect();
    assert_eq!(
        errors,
        vec![Some("ratelimited".into()), Some("ratelimited".into()), None]
    );
    assert_eq!(fake.posts().len(), 1);
}

#[tokio::test]
async fn upload_flow_raw_and_multipart() {
    let fake = FakeSlack::start().await;
    let mut ws = connect(&fake).await;
    hello(&mut ws).await;
    let user = fake.user_message(CHANNEL, "U0ALICE", "send the diff", None);
    next_json(&mut ws).await;

    let content = "diff --git a/x b/x\n+hello\n";
    let len = content.len().to_string();
    let got = get(
        &fake,
        "files.getUploadURLExternal",
        BOT_TOKEN,
        &[("filename", "change.diff"), ("length", &len)],
    )
    .await;
    assert_eq!(got["ok"], true, "{got}");
    let file_id = got["file_id"].as_str().unwrap().to_owned();
    assert!(file_id.starts_with('F'));
    let upload_url = got["upload_url"].as_str().unwrap().to_owned();
    assert_eq!(upload_url, format!("{}/upload/{file_id}", fake.base_url()));

    // Raw body, as slack-morphism sends it.
    let resp = http()
        .post(&upload_url)
        .bearer_auth(BOT_TOKEN)
        .header("content-type", "text/plain")
        .body(content)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        resp.text().await.unwrap(),
        format!("OK - {}", content.len())
    );

    // Completing an id that was never uploaded fails.
    assert_eq!(
        post_json(
            &fake,
            "files.completeUploadExternal",
            BOT_TOKEN,
            json!({"files": [{"id": "F0NOPE"}]})
        )
        .await["error"],
        "file_not_found"
    );
    let done = post_json(
        &fake,
        "files.completeUploadExternal",
        BOT_TOKEN,
        json!({"files": [{"id": file_id, "title": "The diff"}], "channel_id": CHANNEL, "thread_ts": user.ts, "initial_comment": "here"}),
    )
    .await;
    assert_eq!(
        done,
        json!({"ok": true, "files": [{"id": file_id, "name": "change.diff", "title": "The diff"}]})
    );
    assert_eq!(
        fake.uploads(),
        vec![Upload {
            file_id: file_id.clone(),
            filename: "change.diff".into(),
            title: "The diff".into(),
            bytes: content.as_bytes().to_vec(),
            content: content.into(),
            channel: Some(CHANNEL.into()),
            thread_ts: Some(user.ts.clone()),
            initial_comment: Some("here".into()),
        }]
    );
    let share = next_json(&mut ws).await;
    let ev = &share["payload"]["event"];
    assert_eq!(ev["subtype"], "file_share");
    assert_eq!(ev["bot_id"], BOT_ID);
    assert_eq!(ev["thread_ts"], user.ts);
    assert_eq!(ev["files"][0]["id"], file_id);

    // Multipart upload, form-encoded complete (files as a JSON string), POST for the URL.
    let got: Value = http()
        .post(format!("{}files.getUploadURLExternal", fake.api_url()))
        .bearer_auth(BOT_TOKEN)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(urlencode(&[("filename", "a.txt"), ("length", "3")]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let file_id = got["file_id"].as_str().unwrap().to_owned();
    let boundary = "XyZbOuNdArY";
    let body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"filename\"\r\n\r\na.txt\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\nabc\r\n--{boundary}--\r\n"
    );
    let resp = http()
        .post(got["upload_url"].as_str().unwrap())
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.text().await.unwrap(), "OK - 3");
    let files = json!([{"id": file_id}]).to_string();
    let done: Value = http()
        .post(format!("{}files.completeUploadExternal", fake.api_url()))
        .bearer_auth(BOT_TOKEN)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(urlencode(&[("files", files.as_str())]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(done["ok"], true, "{done}");
    let up = &fake.uploads()[1];
    assert_eq!(
        (
            up.content.as_str(),
            up.title.as_str(),
            up.channel.as_deref()
        ),
        ("abc", "a.txt", None)
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());

    // A size that differs from `length` is flagged.
    let got = get(
        &fake,
        "files.getUploadURLExternal",
        BOT_TOKEN,
        &[("filename", "b"), ("length", "10")],
    )
    .await;
    http()
        .post(got["upload_url"].as_str().unwrap())
        .body("short")
        .send()
        .await
        .unwrap();
    assert_eq!(fake.violations().len(), 1);
}

#[tokio::test]
async fn users_info_and_permalinks_answer_like_slack() {
    let fake = FakeSlack::start().await;
    fake.add_user("U0ALICE", "alice", "Alice Liddell");
    let info = get(&fake, "users.info", BOT_TOKEN, &[("user", "U0ALICE")]).await;
    assert_eq!(info["ok"], true, "{info}");
    assert_eq!(info["user"]["profile"]["display_name"], "alice");
    assert_eq!(info["user"]["profile"]["real_name"], "Alice Liddell");
    let unknown = get(&fake, "users.info", BOT_TOKEN, &[("user", "U0NOBODY")]).await;
    assert_eq!(unknown, json!({"ok": false, "error": "user_not_found"}));

    let sent = fake.user_message(CHANNEL, "U0ALICE", "hi bot", None);
    let link = get(
        &fake,
        "chat.getPermalink",
        BOT_TOKEN,
        &[("channel", CHANNEL), ("message_ts", &sent.ts)],
    )
    .await;
    assert_eq!(
        link,
        json!({
            "ok": true,
            "channel": CHANNEL,
            "permalink": format!("https://fake.slack.com/archives/{CHANNEL}/p{}", sent.ts.replace('.', "")),
        })
    );
    let missing = get(
        &fake,
        "chat.getPermalink",
        BOT_TOKEN,
        &[("channel", CHANNEL), ("message_ts", "1.000001")],
    )
    .await;
    assert_eq!(missing["error"], "message_not_found");
    let other = get(
        &fake,
        "chat.getPermalink",
        BOT_TOKEN,
        &[("channel", "C0OTHER"), ("message_ts", &sent.ts)],
    )
    .await;
    assert_eq!(other["error"], "channel_not_found");
}

/// What the app may do and where, as Slack answers it: scopes from the manifest until a
/// test changes them (`missing_scope` with `needed` and `provided`), Socket Mode off,
/// a channel's name and the bot's membership (`conversations.info`, `not_in_channel`,
/// `channel_not_found`).
#[tokio::test]
async fn scopes_socket_mode_and_channels_answer_as_slack() {
    let fake = FakeSlack::start().await;
    assert!(manifest_bot_scopes().contains("chat:write"));
    let info = get(
        &fake,
        "conversations.info",
        BOT_TOKEN,
        &[("channel", CHANNEL)],
    )
    .await;
    assert_eq!(info["ok"], true, "{info}");
    assert_eq!(info["channel"]["name"], "c0chan");
    assert_eq!(info["channel"]["is_member"], true);

    fake.set_bot_scopes(&["channels:read"]);
    let post = json!({"channel": CHANNEL, "text": "hi"});
    let refused = post_json(&fake, "chat.postMessage", BOT_TOKEN, post.clone()).await;
    assert_eq!(
        refused,
        json!({"ok": false, "error": "missing_scope", "needed": "chat:write", "provided": "channels:read"})
    );
    fake.set_bot_scopes(&[]);
    let refused = get(
        &fake,
        "conversations.info",
        BOT_TOKEN,
        &[("channel", CHANNEL)],
    )
    .await;
    assert_eq!(refused["error"], "missing_scope");
    assert_eq!(
        refused["needed"],
        "channels:read,groups:read,mpim:read,im:read"
    );
    fake.set_bot_scopes(&["channels:read", "chat:write"]);

    fake.name_channel(CHANNEL, "deploys");
    fake.remove_bot_from(CHANNEL);
    let info = get(
        &fake,
        "conversations.info",
        BOT_TOKEN,
        &[("channel", CHANNEL)],
    )
    .await;
    assert_eq!(info["channel"]["name"], "deploys");
    assert_eq!(info["channel"]["is_member"], false);
    let refused = post_json(&fake, "chat.postMessage", BOT_TOKEN, post.clone()).await;
    assert_eq!(refused["error"], "not_in_channel");
    fake.invite_bot_to(CHANNEL);
    let posted = post_json(&fake, "chat.postMessage", BOT_TOKEN, post.clone()).await;
    assert_eq!(posted["ok"], true, "{posted}");
    fake.delete_channel(CHANNEL);
    for (method, answer) in [
        (
            "conversations.info",
            get(
                &fake,
                "conversations.info",
                BOT_TOKEN,
                &[("channel", CHANNEL)],
            )
            .await,
        ),
        (
            "chat.postMessage",
            post_json(&fake, "chat.postMessage", BOT_TOKEN, post).await,
        ),
    ] {
        assert_eq!(answer["error"], "channel_not_found", "{method}: {answer}");
    }

    let open = |fake: FakeSlack| async move {
        post_json(&fake, "apps.connections.open", APP_TOKEN, json!({})).await
    };
    assert_eq!(open(fake.clone()).await["ok"], true);
    fake.turn_socket_mode_off();
    assert_eq!(open(fake.clone()).await["error"], "socket_mode_not_enabled");
    fake.set_app_scopes(&[]);
    let refused = open(fake.clone()).await;
    assert_eq!(refused["error"], "missing_scope");
    assert_eq!(refused["needed"], "connections:write");
}

/// A person's reaction is Slack's `reaction_added` event with the message's author, once per
/// person and emoji, and only to an app with `reactions:read`.
#[tokio::test]
async fn a_persons_reaction_is_one_reaction_added_event() {
    let fake = FakeSlack::start().await;
    let mut ws = connect(&fake).await;
    hello(&mut ws).await;
    let message = fake.user_message(CHANNEL, "U1", "deploy is broken", None);
    assert_eq!(
        next_json(&mut ws).await["payload"]["event"]["ts"],
        message.ts
    );

    assert!(
        fake.person_reacts(CHANNEL, "1.000001", "U2", "eyes")
            .is_none(),
        "no such message"
    );
    let sent = fake
        .person_reacts(CHANNEL, &message.ts, "U2", "codebutler")
        .unwrap();
    let envelope = next_json(&mut ws).await;
    assert_eq!(envelope["envelope_id"], sent.envelope_id);
    let event = &envelope["payload"]["event"];
    assert_eq!(event["type"], "reaction_added");
    assert_eq!(event["user"], "U2");
    assert_eq!(event["reaction"], "codebutler");
    assert_eq!(event["item_user"], "U1");
    assert_eq!(
        event["item"],
        json!({"type": "message", "channel": CHANNEL, "ts": message.ts})
    );
    assert!(event["event_ts"].is_string());
    assert!(
        fake.person_reacts(CHANNEL, &message.ts, "U2", "codebutler")
            .is_none(),
        "the same person's same reaction is one"
    );

    let scopes: Vec<String> = manifest_bot_scopes()
        .into_iter()
        .filter(|s| s != "reactions:read")
        .collect();
    fake.set_bot_scopes(&scopes.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        fake.person_reacts(CHANNEL, &message.ts, "U3", "codebutler")
            .is_none()
    );
}

/// A slash command is Slack's `slash_commands` envelope; the acknowledgement's payload is
/// what the person was shown, to them alone unless `in_channel`; an app without `commands`
/// has no command.
#[tokio::test]
async fn a_slash_command_is_answered_by_its_acknowledgement() {
    let fake = FakeSlack::start().await;
    let mut ws = connect(&fake).await;
    hello(&mut ws).await;
    let sent = fake.slash_command(CHANNEL, "U1", "status").unwrap();
    let envelope = next_json(&mut ws).await;
    assert_eq!(envelope["type"], "slash_commands");
    assert_eq!(envelope["envelope_id"], sent.envelope_id);
    assert_eq!(envelope["accepts_response_payload"], true);
    let payload = &envelope["payload"];
    for (key, value) in [
        ("command", "/codebutler"),
        ("text", "status"),
        ("channel_id", CHANNEL),
        ("user_id", "U1"),
        ("team_id", TEAM_ID),
        ("api_app_id", APP_ID),
    ] {
        assert_eq!(payload[key], value, "{key}");
    }
    assert!(payload["response_url"].is_string() && payload["trigger_id"].is_string());
    let ack = json!({"envelope_id": sent.envelope_id,
        "payload": {"text": "all quiet", "response_type": "ephemeral"}});
    ws.send(Message::Text(ack.to_string().into()))
        .await
        .unwrap();
    let other = fake.slash_command(CHANNEL, "U2", "cost").unwrap();
    next_json(&mut ws).await;
    let ack = json!({"envelope_id": other.envelope_id,
        "payload": {"text": "for everyone", "response_type": "in_channel"}});
    ws.send(Message::Text(ack.to_string().into()))
        .await
        .unwrap();
    assert!(
        fake.wait_until(T, || fake.command_answers().len() == 2)
            .await
    );
    assert_eq!(fake.ephemeral_answers("U1"), ["all quiet"]);
    assert!(fake.ephemeral_answers("U2").is_empty());
    assert_eq!(
        fake.command_answers()[1],
        CommandAnswer {
            user: "U2".into(),
            channel: CHANNEL.into(),
            typed: "cost".into(),
            text: "for everyone".into(),
            ephemeral: false,
        }
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());

    fake.set_bot_scopes(&["chat:write"]);
    assert!(fake.slash_command(CHANNEL, "U1", "status").is_none());
}

/// Opening the Home tab is Slack's `app_home_opened` event; `views.publish` of a home view
/// replaces what the person's tab shows, and anything else is refused.
#[tokio::test]
async fn a_home_tab_opened_and_its_view_published() {
    let fake = FakeSlack::start().await;
    let mut ws = connect(&fake).await;
    hello(&mut ws).await;
    let opened = fake.open_app_home("U1");
    let envelope = next_json(&mut ws).await;
    assert_eq!(envelope["envelope_id"], opened.envelope_id);
    let event = &envelope["payload"]["event"];
    assert_eq!(event["type"], "app_home_opened");
    assert_eq!(event["user"], "U1");
    assert_eq!(event["tab"], "home");
    assert!(event["channel"].as_str().unwrap().starts_with('D'));

    let view = json!({"type": "home", "blocks": [
        {"type": "section", "text": {"type": "mrkdwn", "text": "first"}}]});
    let published = post_json(
        &fake,
        "views.publish",
        BOT_TOKEN,
        json!({"user_id": "U1", "view": view}),
    )
    .await;
    assert_eq!(published["ok"], true, "{published}");
    assert_eq!(published["view"]["type"], "home");
    assert!(published["view"]["id"].is_string());
    let view = json!({"type": "home", "blocks": [
        {"type": "section", "text": {"type": "mrkdwn", "text": "second"}}]});
    post_json(
        &fake,
        "views.publish",
        BOT_TOKEN,
        json!({"user_id": "U1", "view": view}),
    )
    .await;
    assert_eq!(fake.home_text("U1"), "second");
    let modal = json!({"type": "modal", "blocks": []});
    let refused = post_json(
        &fake,
        "views.publish",
        BOT_TOKEN,
        json!({"user_id": "U2", "view": modal}),
    )
    .await;
    assert_eq!(refused["error"], "invalid_arguments");
    assert!(fake.home_view("U2").is_none());
}

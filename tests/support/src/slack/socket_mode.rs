//! The Socket Mode websocket: a ticket from `apps.connections.open` opens it, `hello` with
//! the app's connection count, envelopes out, acks in, `disconnect` on demand.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::error::ApiError;
use super::web::Params;
use super::{APP_ID, APP_TOKEN, Ack, Conn, ConnCmd, Inner, SlackState};

/// `apps.connections.open`: a one-time ticket for the websocket, with the app token that
/// asked for it.
pub(super) fn connections_open(
    inner: &Inner,
    st: &mut SlackState,
    _: &Params,
) -> Result<Value, ApiError> {
    let ticket = format!("{}", st.next_id());
    // Only the one app token gets here (checked before dispatch).
    st.tickets.insert(ticket.clone(), APP_TOKEN.to_owned());
    Ok(json!({
        "ok": true,
        "url": format!("ws://{}/ws?ticket={ticket}", inner.addr),
    }))
}

pub(super) async fn ws_handler(
    State(inner): State<Arc<Inner>>,
    Query(query): Query<HashMap<String, String>>,
    ws: WebSocketUpgrade,
) -> Response {
    let ticket = query.get("ticket").cloned().unwrap_or_default();
    let app_token = inner.lock().tickets.remove(&ticket);
    let Some(app_token) = app_token else {
        inner.lock().violations.push(format!(
            "websocket connect with unknown or reused ticket {ticket:?}"
        ));
        return (StatusCode::UNAUTHORIZED, "invalid ticket").into_response();
    };
    ws.on_upgrade(move |socket| run_connection(inner, socket, app_token))
}

async fn run_connection(inner: Arc<Inner>, mut socket: WebSocket, app_token: String) {
    let mut shutdown = inner.shutdown.subscribe();
    if *shutdown.borrow() {
        return;
    }
    // Like Slack, hello counts the app's open connections, this one included.
    let num_connections = {
        let mut st = inner.lock();
        st.connections_opened += 1;
        1 + st
            .conns
            .iter()
            .filter(|c| c.app_token == app_token && !c.tx.is_closed())
            .count()
    };
    let hello = json!({
        "type": "hello",
        "num_connections": num_connections,
        "debug_info": {
            "host": "fake-slack",
            "build_number": 1,
            "approximate_connection_time": 18060,
        },
        "connection_info": {"app_id": APP_ID},
    });
    if socket
        .send(Message::Text(hello.to_string().into()))
        .await
        .is_err()
    {
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let id = {
        let mut st = inner.lock();
        st.hellos += 1;
        let id = st.next_id();
        st.conns.push(Conn { id, app_token, tx });
        let open = st.conns.len();
        tracing::debug!("FakeSlack: socket {id} connected ({open} open)");
        st.flush_queue();
        id
    };
    loop {
        tokio::select! {
            cmd = rx.recv() => match cmd {
                Some(ConnCmd::Send(text)) => {
                    if socket.send(Message::Text(text.into())).await.is_err() {
                        break;
                    }
                }
                Some(ConnCmd::Disconnect(reason)) => {
                    let msg = json!({
                        "type": "disconnect",
                        "reason": reason,
                        "debug_info": {"host": "fake-slack"},
                    });
                    let _ = socket.send(Message::Text(msg.to_string().into())).await;
                    let _ = socket
                        .send(Message::Close(Some(CloseFrame {
                            code: 1000,
                            reason: "".into(),
                        })))
                        .await;
                    break;
                }
                None => break,
            },
            msg = socket.recv() => match msg {
                Some(Ok(Message::Text(text))) => on_client_text(&inner, text.as_str()),
                Some(Ok(Message::Binary(data))) => inner.lock().violations.push(format!(
                    "socket {id}: unexpected binary frame of {} bytes", data.len()
                )),
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                // Pings are answered by tungstenite itself.
                Some(Ok(_)) => {}
            },
            _ = shutdown.changed() => break,
        }
    }
    // Hand frames that never reached this socket to the next one.
    let mut st = inner.lock();
    st.conns.retain(|c| c.id != id);
    rx.close();
    let mut unsent = Vec::new();
    while let Ok(cmd) = rx.try_recv() {
        if let ConnCmd::Send(text) = cmd {
            let envelope_id = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["envelope_id"].as_str().map(str::to_owned))
                .unwrap_or_default();
            unsent.push((envelope_id, text));
        }
    }
    for item in unsent.into_iter().rev() {
        st.queue.push_front(item);
    }
    st.flush_queue();
    tracing::debug!("FakeSlack: socket {id} closed");
}

fn on_client_text(inner: &Inner, text: &str) {
    let mut st = inner.lock();
    let parsed = serde_json::from_str::<Value>(text);
    match parsed
        .as_ref()
        .ok()
        .and_then(|v| v.get("envelope_id"))
        .and_then(Value::as_str)
    {
        Some(envelope_id) => {
            if !st.envelopes.contains_key(envelope_id) {
                st.violations
                    .push(format!("ack of unknown envelope {envelope_id}: {text}"));
            }
            let payload = parsed.as_ref().ok().and_then(|v| v.get("payload")).cloned();
            st.acks.push(Ack {
                envelope_id: envelope_id.to_owned(),
                at: Instant::now(),
                payload,
            });
        }
        None => st
            .violations
            .push(format!("unexpected frame from the client: {text}")),
    }
}

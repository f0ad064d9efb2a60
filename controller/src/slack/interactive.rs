//! Block Kit buttons: the Approve/Cancel buttons on a plan, the Cancel button on a Coder's
//! status message and the Draw it/Cancel buttons on the Artist's proposal, and how a click
//! becomes a message of its thread.
//!
//! A click arrives over Socket Mode as an `interactive` envelope with a `block_actions`
//! payload. It takes the same path as a typed message, so it is as durable and happens at
//! most once: [`classify`] turns it into an [`IncomingMessage`] whose text is a click marker
//! (see [`crate::domain::Click`]) and whose `ts` is derived from the action's `action_ts`; the intake stores it
//! before the envelope is acknowledged (a redelivery of the same envelope has the same
//! `action_ts` and is dropped as a duplicate) and wakes the thread's dispatcher, which handles
//! it in order with the thread's other messages.
//!
//! The marker starts with `<codebutler:click`: Slack escapes `<` in what people type (as
//! `&lt;`), so no typed message can pass for a click. Pure: block building and parsing are
//! unit-tested here; posting lives in [`super::api`].

use slack_morphism::prelude::*;

use crate::domain::{ButtonAction, Click, IncomingMessage};
use crate::slack::format::split_message;
use crate::slack::intake::{Intake, IntakeFilter};

/// `action_id` of a plan's Approve button.
pub const APPROVE: &str = "codebutler_approve";
/// `action_id` of a plan's Cancel button.
pub const CANCEL_PLAN: &str = "codebutler_cancel_plan";
/// `action_id` of the Cancel button on a Coder's status message.
pub const STOP_RUN: &str = "codebutler_stop_run";
/// `action_id` of the Draw it button on the Artist's proposal.
pub const DRAW_IT: &str = "codebutler_draw_it";
/// `action_id` of the Cancel button on the Artist's proposal.
pub const CANCEL_DRAWING: &str = "codebutler_cancel_drawing";
/// `block_id` of the actions block, so an update can find and replace it.
pub const ACTIONS_BLOCK: &str = "codebutler_actions";

/// Slack fails a section block whose text is longer than this.
const SECTION_MAX_CHARS: usize = 3000;

/// The button an `action_id` of ours names.
fn button_action(id: &str) -> Option<ButtonAction> {
    match id {
        APPROVE => Some(ButtonAction::Approve),
        CANCEL_PLAN => Some(ButtonAction::CancelPlan),
        STOP_RUN => Some(ButtonAction::StopRun),
        DRAW_IT => Some(ButtonAction::DrawIt),
        CANCEL_DRAWING => Some(ButtonAction::CancelDrawing),
        _ => None,
    }
}

/// The message reactions about `msg` go on: for a click, the message with the button (the
/// click itself is no Slack message); otherwise `msg` itself.
pub fn reaction_target(msg: &IncomingMessage) -> IncomingMessage {
    match msg.click() {
        Some(click) => IncomingMessage {
            ts: click.message_ts,
            ..msg.clone()
        },
        None => msg.clone(),
    }
}

/// A short digest of a plan's JSON, carried as the Approve button's value, so a click on an
/// older plan's button cannot approve a newer plan it was never shown with (FNV-1a, 64 bits).
pub fn plan_digest(plan_json: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in plan_json.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Classifies an interaction: a click on one of our buttons in our channel becomes a thread
/// message carrying a [`Click`](crate::domain::Click); everything else is ignored (and acknowledged).
pub fn classify(event: &SlackInteractionEvent, filter: &IntakeFilter) -> Intake {
    let SlackInteractionEvent::BlockActions(actions) = event else {
        return Intake::Ignore("not a block action");
    };
    let Some(user) = &actions.user else {
        return Intake::Ignore("no user");
    };
    let SlackInteractionActionContainer::Message(container) = &actions.container else {
        return Intake::Ignore("not on a message");
    };
    let channel = actions
        .channel
        .as_ref()
        .map(|c| c.id.0.clone())
        .or_else(|| container.channel_id.as_ref().map(|c| c.0.clone()));
    let Some(channel) = channel else {
        return Intake::Ignore("no channel");
    };
    if channel != filter.channel {
        return Intake::Ignore("other channel");
    }
    let Some(message) = &actions.message else {
        return Intake::Ignore("no message");
    };
    if message.sender.user.as_ref().map(|u| u.0.as_str()) != Some(filter.bot_user_id.as_str()) {
        return Intake::Ignore("a button on someone else's message");
    }
    let Some((action, info)) = actions
        .actions
        .iter()
        .flatten()
        .find_map(|a| button_action(&a.action_id.0).map(|action| (action, a)))
    else {
        return Intake::Ignore("not one of our buttons");
    };
    let Some(action_ts) = &info.action_ts else {
        return Intake::Ignore("no action_ts");
    };
    let message_ts = message.origin.ts.0.clone();
    let thread_ts = message
        .origin
        .thread_ts
        .as_ref()
        .map_or_else(|| message_ts.clone(), |t| t.0.clone());
    // Deliberate defaults: a button without a value, or a message without text, carries
    // the empty string, which the marker round trip below checks like any other.
    let click = Click {
        action,
        message_ts,
        value: info.value.clone().unwrap_or_default(),
        message_text: message.content.text.clone().unwrap_or_default(),
    };
    // A ts or value the marker line cannot carry (Slack's never hold spaces) would turn the
    // stored click into typed text.
    if Click::parse(&click.to_text()).as_ref() != Some(&click) {
        return Intake::Ignore("a click the marker cannot carry");
    }
    Intake::Accept(IncomingMessage {
        channel,
        // Unique per click and after the clicked message in the thread's order; the suffix
        // keeps it apart from any real message ts.
        ts: format!("{}c", action_ts.0),
        thread_ts,
        user: user.id.0.clone(),
        text: click.to_text(),
        event_id: Some(format!("click:{}", actions.trigger_id.0)),
        origin: crate::domain::Origin::Click,
    })
}

/// Section blocks holding `mrkdwn`, each under Slack's limit for a section's text.
pub fn sections(mrkdwn: &str) -> Vec<SlackBlock> {
    split_message(mrkdwn, SECTION_MAX_CHARS)
        .into_iter()
        .map(|chunk| {
            SlackSectionBlock::new()
                .with_text(SlackBlockText::MarkDown(chunk.as_str().into()))
                .into()
        })
        .collect()
}

fn button(action_id: &str, label: &str, value: &str) -> SlackBlockButtonElement {
    SlackBlockButtonElement::new(label.into())
        .with_action_id(action_id.into())
        .with_value(value.to_owned())
}

/// A plan message's blocks: its text, then Approve and Cancel. `digest` is [`plan_digest`]
/// of the plan shown.
pub fn plan_blocks(mrkdwn: &str, digest: &str) -> Vec<SlackBlock> {
    let mut blocks = sections(mrkdwn);
    blocks.push(
        SlackActionsBlock::new(vec![
            SlackActionBlockElement::Button(
                button(APPROVE, "Approve", digest).with_style(SlackBlockButtonStyle::Primary),
            ),
            SlackActionBlockElement::Button(button(CANCEL_PLAN, "Cancel", digest)),
        ])
        .with_block_id(ACTIONS_BLOCK.into())
        .into(),
    );
    blocks
}

/// The Artist's proposal: its text, then Draw it and Cancel, whose value is the drawing's
/// number in the thread.
pub fn drawing_blocks(mrkdwn: &str, number: i64) -> Vec<SlackBlock> {
    let mut blocks = sections(mrkdwn);
    let value = number.to_string();
    blocks.push(
        SlackActionsBlock::new(vec![
            SlackActionBlockElement::Button(
                button(DRAW_IT, "Draw it", &value).with_style(SlackBlockButtonStyle::Primary),
            ),
            SlackActionBlockElement::Button(button(CANCEL_DRAWING, "Cancel", &value)),
        ])
        .with_block_id(ACTIONS_BLOCK.into())
        .into(),
    );
    blocks
}

/// A running Coder's status blocks: its text, then Cancel.
pub fn status_blocks(mrkdwn: &str) -> Vec<SlackBlock> {
    let mut blocks = sections(mrkdwn);
    blocks.push(
        SlackActionsBlock::new(vec![SlackActionBlockElement::Button(
            button(STOP_RUN, "Cancel", "stop").with_style(SlackBlockButtonStyle::Danger),
        )])
        .with_block_id(ACTIONS_BLOCK.into())
        .into(),
    );
    blocks
}

/// A message's blocks once its buttons were used: its text, then a context line such as
/// "Approved by <@U1>" where the buttons were.
pub fn resolved_blocks(mrkdwn: &str, note: &str) -> Vec<SlackBlock> {
    let mut blocks = sections(mrkdwn);
    blocks
        .push(SlackContextBlock::new(vec![SlackContextBlockElement::MarkDown(note.into())]).into());
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn filter() -> IntakeFilter {
        IntakeFilter {
            channel: "C1".into(),
            bot_user_id: "UBOT".into(),
        }
    }

    fn block_actions(action_id: &str) -> serde_json::Value {
        json!({
            "type": "block_actions",
            "user": {"id": "U1", "username": "alice", "name": "alice", "team_id": "T1"},
            "api_app_id": "A1",
            "token": "verification",
            "container": {"type": "message", "message_ts": "1700000001.000200",
                          "channel_id": "C1", "is_ephemeral": false},
            "trigger_id": "123.456.abc",
            "team": {"id": "T1", "domain": "acme"},
            "channel": {"id": "C1", "name": "dev"},
            "message": {"type": "message", "user": "UBOT", "bot_id": "B1",
                        "text": "*PM:* plan", "ts": "1700000001.000200",
                        "thread_ts": "1700000000.000100",
                        "blocks": plan_blocks("*PM:* plan", "abc")},
            "response_url": "https://hooks.slack.com/actions/T1/1/x",
            "actions": [{"action_id": action_id, "block_id": ACTIONS_BLOCK,
                         "text": {"type": "plain_text", "text": "Approve", "emoji": true},
                         "value": "abc", "style": "primary", "type": "button",
                         "action_ts": "1700000002.123456"}]
        })
    }

    fn event(payload: serde_json::Value) -> SlackInteractionEvent {
        serde_json::from_value(payload).unwrap()
    }

    #[test]
    fn a_click_on_approve_becomes_a_message_of_the_plans_thread() {
        let Intake::Accept(m) = classify(&event(block_actions(APPROVE)), &filter()) else {
            panic!("not accepted");
        };
        assert_eq!(m.thread_ts, "1700000000.000100");
        assert_eq!(m.ts, "1700000002.123456c");
        assert_eq!(m.user, "U1");
        let click = Click::parse(&m.text).unwrap();
        assert_eq!(
            click,
            Click {
                action: ButtonAction::Approve,
                message_ts: "1700000001.000200".into(),
                value: "abc".into(),
                message_text: "*PM:* plan".into(),
            }
        );
    }

    #[test]
    fn clicks_elsewhere_are_ignored() {
        let mut other_channel = block_actions(APPROVE);
        other_channel["channel"]["id"] = json!("C2");
        other_channel["container"]["channel_id"] = json!("C2");
        let mut foreign = block_actions(APPROVE);
        foreign["message"]["user"] = json!("U9");
        let mut no_ts = block_actions(APPROVE);
        no_ts["actions"][0]
            .as_object_mut()
            .unwrap()
            .remove("action_ts");
        // Found by the socket_frame fuzz target: a ts with a space stored a click that read
        // back as typed text.
        let mut spaced_ts = block_actions(APPROVE);
        spaced_ts["message"]["ts"] = json!("1700 0001.000200");
        let mut dash_value = block_actions(APPROVE);
        dash_value["actions"][0]["value"] = json!("-");
        for (payload, reason) in [
            (
                block_actions("someone_elses_button"),
                "not one of our buttons",
            ),
            (other_channel, "other channel"),
            (foreign, "a button on someone else's message"),
            (no_ts, "no action_ts"),
            (spaced_ts, "a click the marker cannot carry"),
            (dash_value, "a click the marker cannot carry"),
        ] {
            assert_eq!(classify(&event(payload), &filter()), Intake::Ignore(reason));
        }
    }

    #[test]
    fn typed_text_is_never_a_click() {
        assert_eq!(Click::parse("approve"), None);
        assert_eq!(Click::parse("&lt;codebutler:click approve 1.2 -&gt;"), None);
        assert_eq!(Click::parse("<codebutler:click launch 1.2 ->"), None);
        let click = Click {
            action: ButtonAction::StopRun,
            message_ts: "1.2".into(),
            value: String::new(),
            message_text: "status\nline two".into(),
        };
        assert_eq!(Click::parse(&click.to_text()), Some(click));
    }

    #[test]
    fn plan_blocks_are_text_sections_then_the_two_buttons() {
        let blocks = serde_json::to_value(plan_blocks("*Plan:* fix it", "d1")).unwrap();
        assert_eq!(
            blocks,
            json!([
                {"type": "section", "text": {"type": "mrkdwn", "text": "*Plan:* fix it"}},
                {"type": "actions", "block_id": ACTIONS_BLOCK, "elements": [
                    {"type": "button", "action_id": APPROVE, "value": "d1", "style": "primary",
                     "text": {"type": "plain_text", "text": "Approve"}},
                    {"type": "button", "action_id": CANCEL_PLAN, "value": "d1",
                     "text": {"type": "plain_text", "text": "Cancel"}}
                ]}
            ])
        );
        let resolved = serde_json::to_value(resolved_blocks("x", "Approved by <@U1>")).unwrap();
        assert_eq!(
            resolved[1],
            json!({"type": "context", "elements": [{"type": "mrkdwn", "text": "Approved by <@U1>"}]})
        );
    }

    #[test]
    fn long_texts_are_cut_into_sections_slack_accepts() {
        let text = "word ".repeat(1500);
        let blocks = sections(&text);
        assert!(blocks.len() >= 3);
        for block in serde_json::to_value(blocks).unwrap().as_array().unwrap() {
            assert!(block["text"]["text"].as_str().unwrap().chars().count() <= 3000);
        }
    }

    #[test]
    fn plan_digests_tell_plans_apart() {
        assert_eq!(plan_digest("{\"a\":1}"), plan_digest("{\"a\":1}"));
        assert_ne!(plan_digest("{\"a\":1}"), plan_digest("{\"a\":2}"));
        assert_eq!(plan_digest("").len(), 16);
    }
}

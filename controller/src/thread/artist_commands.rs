//! A message for the Artist, and the words that answer its drawing. The Artist proposes a
//! prompt with its price ("draw it" / "cancel"); "draw it" is refused over a daily spending
//! cap, as a Coder's start is, and otherwise draws the image, posts it in the thread and
//! offers "use it", "use it at <path>", "again" (a new image, a new cost) and "cancel";
//! "use it" commits the image to the thread's branch and pushes it ([`crate::artist::asset`]).
//!
//! Each answer is recorded with the change it reports in one transaction (the drawing's
//! stage guards it), so a word answered twice changes nothing the second time. A message for
//! both the PM and the Artist, or one the PM hands to the Artist (`ask_artist`), gets the
//! PM's turn first, then the Artist's ([`super::pm_turn`] runs both, once each across a
//! restart).

use base64::Engine as _;
use tokio_util::sync::CancellationToken;

use crate::artist::asset::{self, Placed, Workspace};
use crate::artist::path::check_asset_path;
use crate::artist::{ArtistTurn, ImagePrice, QUALITY, ROLE};
use crate::domain::{Drawing, DrawingStage, IncomingMessage, Role};
use crate::gateway::caps;
use crate::slack::effects::{Effect, Effects};
use crate::slack::interactive::drawing_blocks;
use crate::store::{Change, DrawingChange};
use crate::thread::handler::{Settle, ThreadHandler, speaker};

/// What the thread is told of one image's price, and how it is known.
fn price_text(price: ImagePrice) -> String {
    match price {
        ImagePrice::Published(p) => format!("${p:.3} an image"),
        ImagePrice::Configured(p) => format!("${p:.3} an image, as `artist.dollarsPerImage` says"),
        ImagePrice::LastDrawn(p) => format!("about ${p:.3} an image: what the last one cost"),
        ImagePrice::Unknown => "price not known before the first image is drawn".to_owned(),
    }
}

impl ThreadHandler {
    /// The Artist answers `msg` with a prompt to approve: its proposal recorded with its
    /// answer, and the message processed.
    pub(super) async fn ask_artist(
        &self,
        msg: &IncomingMessage,
        cancel: &CancellationToken,
    ) -> Settle {
        let thread = msg.thread();
        tracing::info!(tag = "IMG", "thread {thread} → artist responding");
        self.react(msg, "art").await;
        let done = Change::Processed(msg);
        let turn = match self.artist.propose(msg, cancel).await {
            Ok(turn) => turn,
            Err(e) => {
                tracing::warn!(thread = %thread, "the Artist could not answer: {e}");
                let reply = format!("I could not write a prompt for this: {e}");
                return self.reply(msg, Role::Artist, &reply, &[done]).await;
            }
        };
        let ArtistTurn {
            proposal,
            base,
            new_messages,
        } = &turn;
        let number = match self.store.next_drawing_number(&thread).await {
            Ok(number) => number,
            Err(e) => {
                tracing::error!(thread = %thread, "number the drawing: {e}");
                return Settle::Failed;
            }
        };
        let price = self.artist.price(&proposal.size).await;
        let mut text = String::new();
        if let Some(note) = &proposal.note {
            text.push_str(note);
            text.push_str("\n\n");
        }
        let what = if base.is_some() {
            "An edit of the image you shared"
        } else {
            "The prompt"
        };
        text.push_str(&format!(
            "{what}, for `{}` at {}, {QUALITY} quality ({}):\n\n> {}\n\nIt would go at `{}`. \
             Say *draw it* (or press Draw it) to draw it, or *cancel*.",
            self.artist.image_model,
            proposal.size,
            price_text(price),
            proposal.prompt.replace('\n', "\n> "),
            proposal.path,
        ));
        let changes = [
            Change::Turn {
                thread: &thread,
                role: ROLE,
                messages: new_messages,
            },
            Change::Drawing(DrawingChange::Propose {
                thread: &thread,
                number,
                prompt: &proposal.prompt,
                path: &proposal.path,
                size: &proposal.size,
                base: base.as_deref(),
            }),
            done,
        ];
        let effects = Effects::new(&thread)
            .reply_with_blocks(&text, &speaker(Role::Artist), |t| drawing_blocks(t, number));
        self.record(msg, &changes, &effects).await
    }

    /// "draw it" or "again": the open drawing `number` drawn and posted.
    pub(super) async fn draw(&self, msg: &IncomingMessage, number: i64) -> Settle {
        let thread = msg.thread();
        let drawing = match self.open_drawing(msg, number).await {
            Ok(drawing) => drawing,
            Err(settle) => return settle,
        };
        let now = chrono::Utc::now();
        if let Some(refused) = caps::refusal(&self.store, self.caps, &msg.user, now).await {
            tracing::info!(
                tag = "IMG",
                "thread {thread} → drawing {number} refused: {refused:?}"
            );
            let reply = refused.markdown_as(
                now,
                "Not drawn",
                "The prompt stays: say *draw it* again once the cap allows.",
            );
            return self.answer(msg, Role::Artist, &reply).await;
        }
        tracing::info!(tag = "IMG", "thread {thread} → drawing {number}");
        self.react(msg, "art").await;
        let png = match self.artist.draw(&thread, &msg.user, &drawing).await {
            Ok(png) => png,
            Err(e) => {
                tracing::warn!(thread = %thread, "draw drawing {number}: {e}");
                let reply = format!("The image could not be drawn: {e}");
                return self.answer(msg, Role::Artist, &reply).await;
            }
        };
        let name = drawing.path.rsplit('/').next().unwrap_or("image.png");
        let effects = Effects::new(&thread)
            .push(Effect::Image {
                filename: name.to_owned(),
                title: name.to_owned(),
                png_base64: base64::engine::general_purpose::STANDARD.encode(&png),
            })
            .reply(
                &format!(
                    "Here it is. Say *use it* to commit it at `{}`, *use it at <path>* to put it \
                     elsewhere, *again* to draw it again ({}), or *cancel*.",
                    drawing.path,
                    price_text(self.artist.price(&drawing.size).await)
                ),
                &speaker(Role::Artist),
            );
        let changes = [
            Change::Drawing(DrawingChange::Drawn {
                thread: &thread,
                number,
                png: &png,
            }),
            Change::Processed(msg),
        ];
        self.record_guarded(msg, &changes, &effects).await
    }

    /// "use it" or "use it at <path>": drawing `number` committed and pushed.
    pub(super) async fn use_drawing(
        &self,
        msg: &IncomingMessage,
        number: i64,
        path: Option<&str>,
    ) -> Settle {
        let thread = msg.thread();
        let drawing = match self.open_drawing(msg, number).await {
            Ok(drawing) => drawing,
            Err(settle) => return settle,
        };
        let path = match check_asset_path(path.unwrap_or(&drawing.path)) {
            Ok(path) => path,
            Err(refused) => {
                let reply = format!(
                    "I will not put the image there: {refused}. Say *use it at <path>* with a \
                     path like `assets/logo.png`."
                );
                return self.answer(msg, Role::Artist, &reply).await;
            }
        };
        let png = match self.store.drawing_image(&thread, number).await {
            Ok(Some(png)) => png,
            Ok(None) => {
                return self
                    .answer(msg, Role::Artist, "There is no image drawn to use yet.")
                    .await;
            }
            Err(e) => {
                tracing::error!(thread = %thread, "read drawing {number}: {e}");
                return Settle::Failed;
            }
        };
        let ws = Workspace {
            store: &self.store,
            repo: &self.artist.layout.repo,
            prepare: &self.artist.prepare,
            memory: &self.artist.memory,
        };
        let placed = match asset::place(ws, &thread, &path, png).await {
            Ok(placed) => placed,
            Err(e) => {
                tracing::warn!(thread = %thread, "commit drawing {number} at {path}: {e}");
                let reply = format!("The image could not be committed: {e}");
                return self.answer(msg, Role::Artist, &reply).await;
            }
        };
        tracing::info!(
            tag = "IMG",
            "thread {thread} → drawing {number} at {path} on {}",
            placed.branch
        );
        let reply = used_text(&path, &placed);
        let effects = Effects::new(&thread).reply(&reply, &speaker(Role::Artist));
        let changes = [
            Change::Drawing(DrawingChange::Used {
                thread: &thread,
                number,
                path: &path,
            }),
            Change::Processed(msg),
        ];
        self.record_guarded(msg, &changes, &effects).await
    }

    /// "cancel": the open drawing `number` is dropped.
    pub(super) async fn cancel_drawing(&self, msg: &IncomingMessage, number: i64) -> Settle {
        let thread = msg.thread();
        let effects = Effects::new(&thread).reply("Cancelled.", &speaker(Role::Artist));
        let changes = [
            Change::Drawing(DrawingChange::Cancelled {
                thread: &thread,
                number,
            }),
            Change::Processed(msg),
        ];
        self.record_guarded(msg, &changes, &effects).await
    }

    /// The thread's open drawing, which must be `number` (else the word came for one that
    /// was replaced or used meanwhile: it is processed with nothing done).
    async fn open_drawing(&self, msg: &IncomingMessage, number: i64) -> Result<Drawing, Settle> {
        match self.store.open_drawing(&msg.thread()).await {
            Ok(Some(d)) if d.number == number && d.stage != DrawingStage::Used => Ok(d),
            Ok(_) => Err(Settle::Processed),
            Err(e) => {
                tracing::error!(thread = %msg.thread(), "read the open drawing: {e}");
                Err(Settle::Failed)
            }
        }
    }

    /// Records `changes` with `effects`; when a guard finds them recorded already (a word
    /// answered twice), the message is processed with nothing said.
    async fn record_guarded(
        &self,
        msg: &IncomingMessage,
        changes: &[Change<'_>],
        effects: &Effects,
    ) -> Settle {
        match self.outbox.commit(changes, effects).await {
            Ok(true) => Settle::Settled,
            Ok(false) => Settle::Processed,
            Err(e) => {
                tracing::error!(thread = %msg.thread(), "record the Artist's answer to {}: {e}", msg.ts);
                Settle::Failed
            }
        }
    }
}

/// What the thread is told once the image is on its branch.
fn used_text(path: &str, placed: &Placed) -> String {
    let short = placed.sha.get(..7).unwrap_or(&placed.sha);
    let head = format!(
        "Committed `{path}` to `{}` (`{short}`) and pushed it.",
        placed.branch
    );
    if placed.coder_branch {
        format!("{head} The pull request, if one is open, has it.")
    } else {
        format!(
            "{head} There is no pull request yet: open one from that branch, or ask the PM \
             for a plan."
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_price_says_how_it_is_known() {
        assert_eq!(price_text(ImagePrice::Published(0.042)), "$0.042 an image");
        assert_eq!(
            price_text(ImagePrice::Configured(0.04)),
            "$0.040 an image, as `artist.dollarsPerImage` says"
        );
        assert_eq!(
            price_text(ImagePrice::LastDrawn(0.0387)),
            "about $0.039 an image: what the last one cost"
        );
        assert_eq!(
            price_text(ImagePrice::Unknown),
            "price not known before the first image is drawn"
        );
    }
}

//! The Artist: images for the project (spec: the Artist role; issue 25). Its model (the
//! PM's default model: writing an image prompt is a cheap model's job, so no model of its
//! own is configured) reads the thread's conversation with the Artist, the names of the
//! files shared on the message (and sees its images when the model takes images) and the
//! Artist's memory (`.codebutler/memory/artist.md`, the default branch's committed blob),
//! and answers with an image prompt and where the image would go ([`answer`]). A person
//! says "draw it"; the image is drawn by OpenAI's images API ([`crate::gateway::images`],
//! `artist.provider` `openai`) or by an image model through OpenRouter's chat completions
//! ([`crate::gateway::openrouter_images`], `openrouter`), its price recorded as the Artist's
//! usage and charged to the person who said it (their `access.maxCostPerUserPerDay`); "use
//! it" commits it to the thread's branch ([`asset`]) and pushes it like the Coder's work.
//!
//! What an image will cost is shown before it is drawn, as well as it can be known
//! ([`ImagePrice`]): OpenAI's published price; through OpenRouter, `artist.dollarsPerImage`
//! when set, else what the last image of the model cost as OpenRouter reported it.
//!
//! What the thread says and when is the thread's (`thread::artist_commands`); this module
//! does the work and returns plain results.

pub mod answer;
pub mod asset;
pub mod path;

use std::sync::Arc;

use codebutler_agent::conversation::ChatMessage;
use tokio_util::sync::CancellationToken;

use crate::domain::{Drawing, FileKind, FileState, IncomingMessage, Role, ThreadKey, UsageRecord};
use crate::gateway::images::{BaseImage, ImageRequest, ImagesApi, ImagesError};
use crate::gateway::openrouter_images::OpenRouterImages;
use crate::gateway::pricing::image_price;
use crate::gateway::{CallContext, Gateway, GatewayError};
use crate::layout::{Layout, LayoutError};
use crate::memory::seed;
use crate::memory::source::DefaultBranchMemory;
use crate::pm::attachments::{AttachmentError, Attachments};
use crate::store::{Store, StoreError};
use crate::workspace::worktree::Preparer;
use answer::{ANSWER_FORMAT, AnswerError, Proposal, parse_answer};

/// The role name of the Artist's conversation and usage.
pub const ROLE: &str = "artist";
/// The quality every image is drawn at: OpenAI's middle one, priced in the table.
pub const QUALITY: &str = "medium";
/// `artist.provider` for OpenAI's own images API.
pub const OPENAI: &str = "openai";
/// `artist.provider` for an image model through OpenRouter's chat completions.
pub const OPENROUTER: &str = crate::config::OPENROUTER_PROVIDER;

/// The Artist of one repository.
#[derive(Clone, Debug)]
pub struct Artist {
    pub store: Store,
    pub layout: Layout,
    /// Chat completions, for the prompt (the PM's gateway).
    pub gateway: Arc<Gateway>,
    /// The model that writes the prompt (the PM's default model).
    pub prompt_model: String,
    /// `artist.provider` and `artist.model`: what draws.
    pub provider: String,
    pub image_model: String,
    /// OpenAI's images API (`openai.baseUrl`, `openai.apiKey`).
    pub images: ImagesApi,
    /// OpenRouter's chat completions with image output (`openrouter.baseUrl`, `.apiKey`).
    pub openrouter: OpenRouterImages,
    /// `artist.dollarsPerImage`: an image's price through OpenRouter, when configured.
    pub dollars_per_image: Option<f64>,
    /// The default branch's memory, for `artist.md` and the base of a new branch.
    pub memory: DefaultBranchMemory,
    /// Files shared on messages (the PM's).
    pub attachments: Attachments,
    /// Worktrees: the helper that writes an asset into a thread's worktree.
    pub prepare: Preparer,
}

/// What one image will cost, as well as the Artist can know it before drawing it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ImagePrice {
    /// OpenAI's published price per image.
    Published(f64),
    /// `artist.dollarsPerImage`.
    Configured(f64),
    /// What the last image of the model cost, as OpenRouter reported it.
    LastDrawn(f64),
    /// Not known before OpenRouter reports it.
    Unknown,
}

impl ImagePrice {
    /// The figure, when there is one.
    pub fn dollars(self) -> Option<f64> {
        match self {
            Self::Published(p) | Self::Configured(p) | Self::LastDrawn(p) => Some(p),
            Self::Unknown => None,
        }
    }
}

/// What the Artist made of one message.
#[derive(Clone, Debug)]
pub struct ArtistTurn {
    pub proposal: Proposal,
    /// The image shared on the message, which an edit starts from (its stored name).
    pub base: Option<String>,
    /// What its conversation keeps of the turn.
    pub new_messages: Vec<ChatMessage>,
}

/// Why the Artist could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum ArtistError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Model(#[from] GatewayError),
    #[error(transparent)]
    Attachment(#[from] AttachmentError),
    #[error(transparent)]
    Answer(#[from] AnswerError),
    #[error(transparent)]
    Images(#[from] ImagesError),
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error("read the image to edit, {name}: {source}")]
    Base {
        name: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Asset(#[from] asset::AssetError),
}

impl Artist {
    /// The Artist's answer to `msg`: the prompt it proposes, from its conversation in the
    /// thread, the message with its files and its memory. Nothing is stored here.
    pub async fn propose(
        &self,
        msg: &IncomingMessage,
        cancel: &CancellationToken,
    ) -> Result<ArtistTurn, ArtistError> {
        let thread = msg.thread();
        self.attachments.fetch(&self.store, msg).await?;
        let sees_images = self.gateway.sees_images(&self.prompt_model).await;
        let said = self.attachments.said(&self.store, msg, sees_images).await?;
        let memory = self.memory.file(seed::ARTIST_PATH, false).await;
        let system = crate::prompts::artist_system_prompt(&self.layout, &memory).await;
        let mut messages = vec![ChatMessage::system(format!("{system}\n\n{ANSWER_FORMAT}"))];
        messages.extend(self.store.conversation(&thread, ROLE).await?);
        messages.push(said.request);
        let ctx = CallContext {
            thread: thread.clone(),
            role: ROLE,
            model: self.prompt_model.clone(),
        };
        let completion = self.gateway.complete(&ctx, &messages, &[], cancel).await?;
        let text = completion.reply.content.unwrap_or_default();
        let proposal = parse_answer(&text)?;
        let base = self.base_of(msg).await?;
        Ok(ArtistTurn {
            proposal,
            base,
            new_messages: vec![said.kept, ChatMessage::assistant_text(text)],
        })
    }

    /// The first image stored from `msg`'s files, if any.
    async fn base_of(&self, msg: &IncomingMessage) -> Result<Option<String>, StoreError> {
        Ok(self
            .store
            .message_files(msg)
            .await?
            .into_iter()
            .find_map(|f| match f.state {
                FileState::Stored(name)
                    if FileKind::of(&f.file.mimetype) == Some(FileKind::Image) =>
                {
                    Some(name)
                }
                _ => None,
            }))
    }

    /// Whether the Artist can draw: through OpenRouter (whose key the controller always
    /// has), or through OpenAI with its key.
    pub fn can_draw(&self) -> bool {
        self.provider == OPENROUTER || self.images.has_key()
    }

    /// What one image of `size` will cost, as well as it is known.
    pub async fn price(&self, size: &str) -> ImagePrice {
        if self.provider != OPENROUTER {
            return image_price(&self.image_model, QUALITY, size)
                .map_or(ImagePrice::Unknown, ImagePrice::Published);
        }
        if let Some(price) = self.dollars_per_image {
            return ImagePrice::Configured(price);
        }
        match self.store.last_cost(ROLE, &self.image_model).await {
            Ok(Some(cost)) => ImagePrice::LastDrawn(cost),
            Ok(None) => ImagePrice::Unknown,
            Err(e) => {
                tracing::warn!("read the last image's cost: {e}");
                ImagePrice::Unknown
            }
        }
    }

    /// Draws `drawing` of `thread` (an edit of its base image when it has one) for `person`,
    /// who asked for it, and records its price as the Artist's usage, charged to them: the
    /// PNG's bytes.
    pub async fn draw(
        &self,
        thread: &ThreadKey,
        person: &str,
        drawing: &Drawing,
    ) -> Result<Vec<u8>, ArtistError> {
        let base = match &drawing.base {
            Some(name) => {
                let dir = self.layout.thread_attachments(thread)?;
                let bytes = std::fs::read(dir.join(name)).map_err(|source| ArtistError::Base {
                    name: name.clone(),
                    source,
                })?;
                Some((mimetype_of(name), bytes))
            }
            None => None,
        };
        let request = ImageRequest {
            model: &self.image_model,
            prompt: &drawing.prompt,
            size: &drawing.size,
            quality: QUALITY,
            base: base
                .as_ref()
                .map(|(mimetype, bytes)| BaseImage { mimetype, bytes }),
        };
        let started = std::time::Instant::now();
        let (png, cost) = if self.provider == OPENROUTER {
            let drawn = self.openrouter.draw(&request).await?;
            let cost = drawn.cost.or(self.dollars_per_image);
            if cost.is_none() {
                tracing::warn!(thread = %thread, "OpenRouter reported no cost for an image and `artist.dollarsPerImage` is not set: it is recorded without one");
            }
            (drawn.png, cost)
        } else {
            let png = self.images.draw(&request).await?;
            let cost = image_price(&self.image_model, QUALITY, &drawing.size).unwrap_or(0.0);
            (png, Some(cost))
        };
        let usage = UsageRecord {
            thread: thread.clone(),
            role: Role::Artist.as_str().to_owned(),
            model: self.image_model.clone(),
            prompt_tokens: 0,
            completion_tokens: 0,
            cached_tokens: 0,
            cost,
            duration_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
        };
        if let Err(e) = self.store.record_usage_for(&usage, person).await {
            tracing::warn!(thread = %thread, "could not record the image's usage: {e}");
        }
        Ok(png)
    }
}

/// The image type of an attachment by its stored name's extension.
fn mimetype_of(name: &str) -> &'static str {
    let lower = name.to_ascii_lowercase();
    if lower.ends_with(".jpg") || lower.ends_with(".jpeg") {
        "image/jpeg"
    } else if lower.ends_with(".webp") {
        "image/webp"
    } else {
        "image/png"
    }
}

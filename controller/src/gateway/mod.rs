//! The model gateway: every chat completion of every role goes through here.
//!
//! It speaks OpenRouter's OpenAI-compatible chat completions API with tool calling, holds the
//! API key, retries 429s, 5xx answers and timeouts with exponential backoff (2 s base, 60 s
//! cap, jitter) that gives way to the provider's `Retry-After`, bounds each call with a
//! timeout, and records the usage of every call against its thread and role. What a call
//! may still spend is a thread's [`budget`] (the runners' hub asks it before each call of a
//! Coder); what a typical run costs at a model's prices is [`pricing`].
//!
//! A model that keeps failing (server errors, timeouts) is skipped for a while by its
//! [`breaker`], and the role's fallback model ([`Fallbacks`]: `productManager.fallback`,
//! `coder.fallback`) answers instead; a call no model answered is
//! [`GatewayError::NoModelAnswered`], naming each model and why.
//!
//! A small hand-written client rather than a generic OpenAI crate: OpenRouter's numeric error
//! codes, its `usage.cost` and its error-in-body responses need exact handling.

pub mod breaker;
pub mod budget;
pub mod caps;
pub mod images;
pub mod key;
pub mod model_list;
pub mod openrouter_images;
pub mod pricing;
pub mod stream;
pub mod transcribe;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use codebutler_agent::conversation::{ChatMessage, ToolCall, ToolSpec};
use codebutler_agent::tool_loop::{AssistantReply, ChatModel};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::config::OpenRouterConfig;
use crate::domain::{ThreadKey, UsageRecord};
use crate::gateway::breaker::{BreakerSettings, Breakers};
use crate::gateway::model_list::{Lookup, ModelList, ModelListError};
use crate::gateway::pricing::Pricing;
use crate::store::Store;
use stream::{Assembly, TextSink};

/// How long fetching the model list may take: it delays a plan's message (or a switch of
/// model).
const MODEL_LIST_TIMEOUT: Duration = Duration::from_secs(5);
/// First backoff delay.
pub const BACKOFF_BASE: Duration = Duration::from_secs(2);
/// Longest backoff delay.
pub const BACKOFF_CAP: Duration = Duration::from_secs(60);
/// Longest `Retry-After` honoured; a longer one is cut to this.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(300);

/// A model call that failed.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("model provider answered HTTP {status}: {message}")]
    Http {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("model call timed out after {0:?}")]
    Timeout(Duration),
    #[error("cannot reach the model provider: {0}")]
    Transport(String),
    #[error("model provider sent an answer we cannot read: {0}")]
    Decode(String),
    #[error("gave up after {attempts} attempts: {last}")]
    RetriesExhausted {
        attempts: u32,
        last: Box<GatewayError>,
    },
    #[error("model call cancelled")]
    Cancelled,
    /// Neither the model asked for nor its role's fallback answered: each model tried or
    /// skipped, with why.
    #[error("no model answered: {}", describe_tried(.0))]
    NoModelAnswered(Vec<Tried>),
}

/// A model a call could not get an answer from, and why.
#[derive(Debug)]
pub struct Tried {
    /// The model id.
    pub model: String,
    /// What happened.
    pub outcome: TriedOutcome,
}

/// Why a model gave no answer.
#[derive(Debug)]
pub enum TriedOutcome {
    /// It was called and failed.
    Failed(Box<GatewayError>),
    /// Its breaker is open: it failed repeatedly and is skipped for this much longer.
    Skipped(Duration),
}

fn describe_tried(tried: &[Tried]) -> String {
    tried
        .iter()
        .map(|t| match &t.outcome {
            TriedOutcome::Failed(e) => format!("{}: {e}", t.model),
            TriedOutcome::Skipped(left) => format!(
                "{}: skipped, failing (tried again in {}s)",
                t.model,
                left.as_secs()
            ),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The models that answer a role's calls while its own model fails: `productManager.fallback`
/// for the PM and every PM-side call (memory, summaries, sorting), `coder.fallback` for the
/// Coder, `reviewer.fallback` and `researcher.fallback` for those roles (the PM's when
/// theirs is not set).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fallbacks {
    pub pm: Option<String>,
    pub coder: Option<String>,
    pub reviewer: Option<String>,
    pub researcher: Option<String>,
}

impl Fallbacks {
    /// The fallback of the calls of `role` (the role names the usage rows carry).
    fn for_role(&self, role: &str) -> Option<&str> {
        let own = match role {
            "coder" => return self.coder.as_deref(),
            "reviewer" => &self.reviewer,
            "researcher" => &self.researcher,
            _ => &self.pm,
        };
        own.as_deref().or(self.pm.as_deref())
    }
}

impl GatewayError {
    /// Whether trying again may succeed: rate limits, server errors, timeouts, and
    /// connection failures.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Http { status, .. } => *status == 429 || *status >= 500 || *status == 408,
            Self::Timeout(_) | Self::Transport(_) => true,
            Self::Decode(_)
            | Self::RetriesExhausted { .. }
            | Self::Cancelled
            | Self::NoModelAnswered(_) => false,
        }
    }

    /// Whether this says the model is failing (a server error, a timeout, the provider
    /// unreachable, no model answering), which counts towards its breaker; a rate limit
    /// does not.
    pub fn is_model_failure(&self) -> bool {
        match self {
            Self::Http { status, .. } => *status >= 500 || *status == 408,
            Self::Timeout(_) | Self::Transport(_) | Self::NoModelAnswered(_) => true,
            Self::RetriesExhausted { last, .. } => last.is_model_failure(),
            Self::Decode(_) | Self::Cancelled => false,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Who a call is for: usage is recorded against the thread and role.
#[derive(Clone, Debug)]
pub struct CallContext {
    pub thread: ThreadKey,
    pub role: &'static str,
    pub model: String,
}

/// The gateway; share it with `Arc`.
#[derive(Debug)]
pub struct Gateway {
    http: reqwest::Client,
    url: String,
    /// The provider's settings: its key, and where its model list is.
    provider: OpenRouterConfig,
    timeout: Duration,
    max_retries: u32,
    store: Store,
    /// The provider's model list (ids and prices): the one the start read, else fetched
    /// when first needed, then kept.
    models: tokio::sync::Mutex<Option<Arc<ModelList>>>,
    /// Each model's breaker, shared by every thread this gateway serves.
    breakers: Breakers,
    /// The roles' fallback models.
    fallbacks: Fallbacks,
}

/// What the provider's model list says of an id a person chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelCheck {
    /// The provider carries it.
    Known,
    /// The provider does not carry it; the closest ids it does.
    Unknown { closest: Vec<String> },
    /// The list could not be read (why, in a few words): nothing is known either way.
    Unchecked(String),
}

impl Gateway {
    /// A gateway for `config`, recording usage in `store`.
    pub fn new(config: &OpenRouterConfig, store: Store) -> Result<Self, GatewayError> {
        crate::tls::ensure_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("codebutler/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| GatewayError::Transport(e.to_string()))?;
        Ok(Self {
            http,
            url: format!("{}/chat/completions", config.base_url),
            provider: config.clone(),
            timeout: Duration::from_secs(config.timeout_secs),
            max_retries: config.max_retries,
            store,
            models: tokio::sync::Mutex::new(None),
            breakers: Breakers::new(BreakerSettings {
                failures: config.breaker_failures,
                cool_down: Duration::from_secs(config.breaker_cool_down_secs),
            }),
            fallbacks: Fallbacks::default(),
        })
    }

    /// This gateway, with the roles' fallback models.
    pub fn with_fallbacks(self, fallbacks: Fallbacks) -> Self {
        Self { fallbacks, ..self }
    }

    /// This gateway, with the model list the start's checks read (so it is not fetched
    /// again for prices); `None` leaves it to be fetched when first needed.
    pub fn knowing_models(self, models: Option<Arc<ModelList>>) -> Self {
        Self {
            models: tokio::sync::Mutex::new(models),
            ..self
        }
    }

    /// The provider's model list: kept once read; a failed fetch is tried again next time.
    pub async fn model_list(&self) -> Result<Arc<ModelList>, ModelListError> {
        let mut models = self.models.lock().await;
        if let Some(list) = models.as_ref() {
            return Ok(list.clone());
        }
        let list =
            Arc::new(model_list::fetch_with(&self.http, &self.provider, MODEL_LIST_TIMEOUT).await?);
        *models = Some(list.clone());
        Ok(list)
    }

    /// Whether the provider's model list says `model` takes images; `false` when the list
    /// cannot be read (a text-only request is what any model takes).
    pub async fn sees_images(&self, model: &str) -> bool {
        match self.model_list().await {
            Ok(list) => list.sees_images(model),
            Err(e) => {
                tracing::warn!("read the provider's model list for image input: {e}");
                false
            }
        }
    }

    /// `model`'s prices from the provider's model list. `None` when the list does not
    /// price the model.
    pub async fn pricing(&self, model: &str) -> Result<Option<Pricing>, GatewayError> {
        let list = self.model_list().await.map_err(|e| match e {
            ModelListError::Http(status) => GatewayError::Http {
                status,
                message: "model list".to_owned(),
                retry_after: None,
            },
            ModelListError::Transport(why) => GatewayError::Transport(why),
            ModelListError::Decode(why) => GatewayError::Decode(format!("model list: {why}")),
        })?;
        Ok(list.pricing(model))
    }

    /// Whether the provider carries `id`, a model a person chose while the service runs. An
    /// id the kept list lacks is looked up once more in a list read anew, since the
    /// provider may have added it since the list was read.
    pub async fn check_model(&self, id: &str) -> ModelCheck {
        let kept = match self.model_list().await {
            Ok(list) => list,
            Err(e) => return ModelCheck::Unchecked(e.to_string()),
        };
        if kept.lookup(id) == Lookup::Known {
            return ModelCheck::Known;
        }
        let mut models = self.models.lock().await;
        let fresh =
            match model_list::fetch_with(&self.http, &self.provider, MODEL_LIST_TIMEOUT).await {
                Ok(fresh) if !fresh.is_empty() => Arc::new(fresh),
                // An empty list says nothing of any id: the kept one stands.
                Ok(_) | Err(_) => kept,
            };
        *models = Some(fresh.clone());
        match fresh.lookup(id) {
            Lookup::Known => ModelCheck::Known,
            Lookup::Unknown { closest } => ModelCheck::Unknown { closest },
        }
    }

    /// One chat completion with retries. Usage of the successful attempt is recorded against
    /// the thread and role, and returned with the reply.
    pub async fn complete(
        &self,
        ctx: &CallContext,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
        cancel: &CancellationToken,
    ) -> Result<Completion, GatewayError> {
        let tools: Vec<serde_json::Value> = tools.iter().map(ToolSpec::to_openai).collect();
        self.complete_with_tool_json(ctx, messages, tools, cancel)
            .await
    }

    /// [`Gateway::complete`] with the tools already in the protocol's JSON shape (as a runner
    /// sends them). The call goes to `ctx.model`, or, while its breaker is open or once it
    /// failed, to the role's fallback; the usage records the model that answered.
    pub async fn complete_with_tool_json(
        &self,
        ctx: &CallContext,
        messages: &[ChatMessage],
        tools: Vec<serde_json::Value>,
        cancel: &CancellationToken,
    ) -> Result<Completion, GatewayError> {
        self.complete_any(ctx, messages, tools, cancel, None).await
    }

    /// [`Gateway::complete`], streamed: each piece of the answer's text is told to `sink` as
    /// the model writes it (a retry or the fallback starts its text again).
    pub async fn complete_streaming(
        &self,
        ctx: &CallContext,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
        cancel: &CancellationToken,
        sink: &dyn TextSink,
    ) -> Result<Completion, GatewayError> {
        let tools: Vec<serde_json::Value> = tools.iter().map(ToolSpec::to_openai).collect();
        self.complete_any(ctx, messages, tools, cancel, Some(sink))
            .await
    }

    async fn complete_any(
        &self,
        ctx: &CallContext,
        messages: &[ChatMessage],
        tools: Vec<serde_json::Value>,
        cancel: &CancellationToken,
        sink: Option<&dyn TextSink>,
    ) -> Result<Completion, GatewayError> {
        let mut candidates = vec![ctx.model.as_str()];
        if let Some(fallback) = self.fallbacks.for_role(ctx.role)
            && fallback != ctx.model
        {
            candidates.push(fallback);
        }
        // With every candidate's breaker open, the first is tried all the same: skipping
        // helps only when another model can answer, and a person who writes again expects a
        // new attempt.
        let all_open = candidates.iter().all(|m| self.breakers.check(m).is_err());
        let mut tried = Vec::new();
        for (i, model) in candidates.into_iter().enumerate() {
            if let Err(left) = self.breakers.check(model)
                && !(all_open && i == 0)
            {
                tried.push(Tried {
                    model: model.to_owned(),
                    outcome: TriedOutcome::Skipped(left),
                });
                continue;
            }
            match self
                .complete_with(ctx, model, messages, tools.clone(), cancel, sink)
                .await
            {
                Ok(completion) => {
                    if !tried.is_empty() {
                        tracing::warn!(
                            thread = %ctx.thread,
                            role = ctx.role,
                            "answered by {model}: {}",
                            describe_tried(&tried)
                        );
                    }
                    return Ok(completion);
                }
                Err(e) if e.is_model_failure() => tried.push(Tried {
                    model: model.to_owned(),
                    outcome: TriedOutcome::Failed(Box::new(e)),
                }),
                Err(e) => return Err(e),
            }
        }
        // One model, called and failed: its own error says it best.
        if let [only] = tried.as_mut_slice()
            && let TriedOutcome::Failed(e) = &mut only.outcome
        {
            return Err(std::mem::replace(e.as_mut(), GatewayError::Cancelled));
        }
        Err(GatewayError::NoModelAnswered(tried))
    }

    /// One model's call with retries; each failure counts towards its breaker, and the
    /// failure that opens it ends the retries.
    async fn complete_with(
        &self,
        ctx: &CallContext,
        model: &str,
        messages: &[ChatMessage],
        tools: Vec<serde_json::Value>,
        cancel: &CancellationToken,
        sink: Option<&dyn TextSink>,
    ) -> Result<Completion, GatewayError> {
        let mut body = request_body(model, messages, tools);
        if sink.is_some() {
            body["stream"] = serde_json::Value::Bool(true);
        }
        let started = std::time::Instant::now();
        let mut attempt = 0;
        loop {
            let result = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(GatewayError::Cancelled),
                r = self.attempt(&body, sink) => r,
            };
            let err = match result {
                Ok((reply, usage)) => {
                    self.breakers.succeeded(model);
                    let usage = self.record(ctx, model, usage, started.elapsed()).await;
                    return Ok(Completion { reply, usage });
                }
                Err(err) => err,
            };
            let opened = err.is_model_failure() && self.breakers.failed(model);
            if !err.is_retryable() {
                return Err(err);
            }
            if attempt >= self.max_retries || opened {
                return Err(GatewayError::RetriesExhausted {
                    attempts: attempt + 1,
                    last: Box::new(err),
                });
            }
            let delay = err
                .retry_after()
                .map(|d| d.min(RETRY_AFTER_CAP))
                .unwrap_or_else(|| backoff_delay(attempt, rand::random::<f64>()));
            tracing::warn!(
                thread = %ctx.thread,
                role = ctx.role,
                "model call to {model} failed ({err}); retry {} of {} in {:.1}s",
                attempt + 1,
                self.max_retries,
                delay.as_secs_f64()
            );
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(GatewayError::Cancelled),
                () = tokio::time::sleep(delay) => {}
            }
            attempt += 1;
        }
    }

    async fn attempt(
        &self,
        body: &serde_json::Value,
        sink: Option<&dyn TextSink>,
    ) -> Result<(AssistantReply, Usage), GatewayError> {
        let Some(sink) = sink else {
            return self.attempt_whole(body).await;
        };
        let send = self
            .http
            .post(&self.url)
            .bearer_auth(self.provider.api_key.expose())
            .json(body)
            .send();
        let read = async {
            let mut response = send.await.map_err(transport)?;
            let status = response.status();
            if !status.is_success() {
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(parse_retry_after);
                let text = response.text().await.map_err(transport)?;
                return parse_response(status.as_u16(), retry_after, &text);
            }
            let mut assembly = Assembly::default();
            while let Some(bytes) = response.chunk().await.map_err(transport)? {
                assembly.feed(&bytes, sink)?;
            }
            assembly.finish(sink)
        };
        tokio::time::timeout(self.timeout, read)
            .await
            .map_err(|_| GatewayError::Timeout(self.timeout))?
    }

    async fn attempt_whole(
        &self,
        body: &serde_json::Value,
    ) -> Result<(AssistantReply, Usage), GatewayError> {
        let send = self
            .http
            .post(&self.url)
            .bearer_auth(self.provider.api_key.expose())
            .json(body)
            .send();
        let read = async {
            let response = send.await.map_err(transport)?;
            let status = response.status();
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(parse_retry_after);
            let text = response.text().await.map_err(transport)?;
            Ok::<_, GatewayError>((status.as_u16(), retry_after, text))
        };
        let (status, retry_after, text) = tokio::time::timeout(self.timeout, read)
            .await
            .map_err(|_| GatewayError::Timeout(self.timeout))??;
        parse_response(status, retry_after, &text)
    }

    async fn record(
        &self,
        ctx: &CallContext,
        model: &str,
        usage: Usage,
        took: Duration,
    ) -> UsageRecord {
        let record = UsageRecord {
            thread: ctx.thread.clone(),
            role: ctx.role.to_owned(),
            model: model.to_owned(),
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            cached_tokens: usage
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            cost: usage.cost,
            duration_ms: i64::try_from(took.as_millis()).unwrap_or(i64::MAX),
        };
        crate::metrics::metrics().model_call(
            &record.role,
            &record.model,
            u64::try_from(record.prompt_tokens).unwrap_or(0),
            u64::try_from(record.completion_tokens).unwrap_or(0),
            u64::try_from(record.cached_tokens).unwrap_or(0),
            record.cost,
        );
        if let Err(e) = self.store.record_usage(&record).await {
            tracing::warn!(thread = %ctx.thread, "could not record usage: {e}");
        }
        record
    }
}

/// A successful model call: the reply and what it used.
#[derive(Clone, Debug)]
pub struct Completion {
    pub reply: AssistantReply,
    pub usage: UsageRecord,
}

fn transport(e: reqwest::Error) -> GatewayError {
    // reqwest's message names the URL, which holds no secret; the key travels in a header.
    GatewayError::Transport(e.without_url().to_string())
}

/// The delay before retry `attempt` (0-based): `2 s · 2^attempt`, capped at 60 s, scaled by
/// a jitter factor in [0.5, 1) so that many clients do not retry in step.
pub fn backoff_delay(attempt: u32, jitter: f64) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(2u32.saturating_pow(attempt.min(16)));
    let capped = exp.min(BACKOFF_CAP);
    capped.mul_f64(0.5 + jitter.clamp(0.0, 1.0) / 2.0)
}

/// A `Retry-After` value: seconds, or an HTTP date.
fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

fn request_body(
    model: &str,
    messages: &[ChatMessage],
    tools: Vec<serde_json::Value>,
) -> serde_json::Value {
    let mut body = serde_json::json!({
        "model": model,
        "messages": messages,
        "usage": { "include": true },
    });
    if needs_cache_breakpoints(model)
        && let Some(json) = body["messages"].as_array_mut()
    {
        let head_end = codebutler_agent::compaction::summary_index(messages)
            .and_then(|summary| summary.checked_sub(1));
        add_cache_breakpoints(json, head_end);
    }
    if !tools.is_empty() {
        body["tools"] = serde_json::Value::Array(tools);
        // Route only to providers that support tool calling.
        body["provider"] = serde_json::json!({ "require_parameters": true });
    }
    body
}

/// Whether `model` caches prompts only where the request marks it (Anthropic's Claude and
/// Google's Gemini through OpenRouter). Other providers (OpenAI, DeepSeek, …) cache long
/// prefixes by themselves; their cached tokens are recorded all the same.
fn needs_cache_breakpoints(model: &str) -> bool {
    let model = model.to_ascii_lowercase();
    model.starts_with("anthropic/") || model.starts_with("google/gemini")
}

/// Marks the cache breakpoints: the system prompt (the same for every call of a role), the
/// end of a compacted conversation's head (`head_end`: the beginning every call after a
/// compaction repeats, kept warm in the cache however many turns follow) and the last
/// message (so the next call, which repeats this conversation and adds to it, reads
/// everything up to here from the cache). A marked message's text becomes one text part
/// with `cache_control`, the shape OpenRouter passes on to the provider.
fn add_cache_breakpoints(messages: &mut [serde_json::Value], head_end: Option<usize>) {
    let system = messages.iter().position(|m| m["role"] == "system");
    let last = messages.len().checked_sub(1);
    for index in [system, head_end, last].into_iter().flatten() {
        let message = &mut messages[index];
        if let Some(text) = message["content"].as_str().filter(|t| !t.is_empty()) {
            message["content"] = serde_json::json!([{
                "type": "text",
                "text": text,
                "cache_control": { "type": "ephemeral" },
            }]);
        }
    }
}

#[derive(Debug, Deserialize)]
struct CompletionResponse {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<Usage>,
    error: Option<ProviderError>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    message: Option<ResponseMessage>,
    finish_reason: Option<String>,
    error: Option<ProviderError>,
}

#[derive(Debug, Deserialize)]
struct ResponseMessage {
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCall>>,
}

#[derive(Debug, Default, Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: i64,
    #[serde(default)]
    completion_tokens: i64,
    cost: Option<f64>,
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Debug, Deserialize)]
struct PromptTokensDetails {
    cached_tokens: Option<i64>,
}

#[derive(Debug, Deserialize)]
struct ProviderError {
    /// OpenRouter sends a number; other providers a string.
    code: Option<serde_json::Value>,
    message: Option<String>,
}

impl ProviderError {
    fn into_error(self, http_status: u16, retry_after: Option<Duration>) -> GatewayError {
        let status = match &self.code {
            Some(serde_json::Value::Number(n)) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
            _ => None,
        }
        .filter(|s| (400..600).contains(s))
        .unwrap_or(if http_status >= 400 { http_status } else { 502 });
        GatewayError::Http {
            status,
            message: self.message.unwrap_or_else(|| "no message".into()),
            retry_after,
        }
    }
}

/// Turns an HTTP answer into a reply or a classified error.
fn parse_response(
    status: u16,
    retry_after: Option<Duration>,
    text: &str,
) -> Result<(AssistantReply, Usage), GatewayError> {
    let parsed: Result<CompletionResponse, _> = serde_json::from_str(text);
    if !(200..300).contains(&status) {
        let message = match parsed {
            Ok(CompletionResponse { error: Some(e), .. }) => {
                return Err(e.into_error(status, retry_after));
            }
            _ => text.chars().take(300).collect(),
        };
        return Err(GatewayError::Http {
            status,
            message,
            retry_after,
        });
    }
    let response = parsed.map_err(|e| GatewayError::Decode(e.to_string()))?;
    if let Some(e) = response.error {
        return Err(e.into_error(status, retry_after));
    }
    let Some(choice) = response.choices.into_iter().next() else {
        return Err(GatewayError::Decode("the response has no choices".into()));
    };
    if let Some(e) = choice.error {
        return Err(e.into_error(502, retry_after));
    }
    if choice.finish_reason.as_deref() == Some("error") {
        return Err(GatewayError::Http {
            status: 502,
            message: "the provider ended the answer with an error".into(),
            retry_after,
        });
    }
    let message = choice
        .message
        .ok_or_else(|| GatewayError::Decode("the choice has no message".into()))?;
    // No `usage` means nothing can be counted: the call is recorded as free, and said so.
    let usage = response.usage.unwrap_or_else(|| {
        tracing::warn!("the provider's answer has no usage: the call is recorded with no tokens");
        Usage::default()
    });
    Ok((
        AssistantReply {
            content: message.content,
            // Absent means the model called no tool.
            tool_calls: message.tool_calls.unwrap_or_default(),
        },
        usage,
    ))
}

/// The model other than the one asked for that answered a role's call (its fallback), once
/// one did: the last such.
#[derive(Debug, Default)]
pub struct FallbackSeen(std::sync::Mutex<Option<String>>);

impl FallbackSeen {
    /// Notes the model that answered (`answered`) a call that asked for `asked`.
    pub fn note(&self, asked: &str, answered: &str) {
        if answered != asked {
            *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(answered.to_owned());
        }
    }

    /// The fallback that answered, if one did.
    pub fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// One role's view of the gateway inside one thread, as the tool loop's model.
pub struct RoleModel<'a> {
    pub gateway: &'a Gateway,
    pub ctx: CallContext,
    pub cancel: CancellationToken,
    /// The last model other than `ctx.model` that answered one of its calls (the role's
    /// fallback), if any did.
    pub fallback_answered: FallbackSeen,
    /// Where the answers' text goes as the model writes it, if anywhere (the calls are then
    /// streamed).
    pub sink: Option<&'a dyn TextSink>,
}

impl std::fmt::Debug for RoleModel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoleModel")
            .field("ctx", &self.ctx)
            .field("streaming", &self.sink.is_some())
            .finish_non_exhaustive()
    }
}

impl<'a> RoleModel<'a> {
    /// `ctx`'s role on `gateway`, cancelled by `cancel`.
    pub fn new(gateway: &'a Gateway, ctx: CallContext, cancel: CancellationToken) -> Self {
        Self {
            gateway,
            ctx,
            cancel,
            fallback_answered: FallbackSeen::default(),
            sink: None,
        }
    }

    /// The same, its calls streamed with their text told to `sink`.
    pub fn streaming_to(self, sink: &'a dyn TextSink) -> Self {
        Self {
            sink: Some(sink),
            ..self
        }
    }

    /// The fallback model that answered one of its calls, if one did.
    pub fn fallback_answered(&self) -> Option<String> {
        self.fallback_answered.get()
    }
}

#[async_trait]
impl ChatModel for RoleModel<'_> {
    type Error = GatewayError;

    async fn complete(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Result<AssistantReply, GatewayError> {
        let completion = match self.sink {
            Some(sink) => {
                self.gateway
                    .complete_streaming(&self.ctx, messages, tools, &self.cancel, sink)
                    .await?
            }
            None => {
                self.gateway
                    .complete(&self.ctx, messages, tools, &self.cancel)
                    .await?
            }
        };
        self.fallback_answered
            .note(&self.ctx.model, &completion.usage.model);
        Ok(completion.reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_two_seconds_up_to_the_cap() {
        assert_eq!(backoff_delay(0, 1.0), Duration::from_secs(2));
        assert_eq!(backoff_delay(1, 1.0), Duration::from_secs(4));
        assert_eq!(backoff_delay(4, 1.0), Duration::from_secs(32));
        assert_eq!(backoff_delay(5, 1.0), Duration::from_secs(60));
        assert_eq!(backoff_delay(40, 1.0), Duration::from_secs(60));
        assert_eq!(backoff_delay(0, 0.0), Duration::from_secs(1));
    }

    #[test]
    fn retry_after_accepts_seconds_and_dates() {
        assert_eq!(parse_retry_after("7"), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn parses_tool_calls_and_usage() {
        let text = r#"{"choices":[{"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"c1","type":"function","function":{"name":"Grep","arguments":"{\"pattern\":\"x\"}"}}]}}],
            "usage":{"prompt_tokens":12,"completion_tokens":3,"cost":0.25,"prompt_tokens_details":{"cached_tokens":4}}}"#;
        let (reply, usage) = parse_response(200, None, text).unwrap();
        assert_eq!(reply.tool_calls[0].function.name, "Grep");
        assert_eq!(reply.content, None);
        assert_eq!(
            (usage.prompt_tokens, usage.completion_tokens, usage.cost),
            (12, 3, Some(0.25))
        );
    }

    #[test]
    fn openrouter_errors_are_classified() {
        let e = parse_response(
            429,
            Some(Duration::from_secs(3)),
            r#"{"error":{"code":429,"message":"slow down"}}"#,
        )
        .unwrap_err();
        assert!(e.is_retryable());
        assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
        assert!(e.to_string().contains("429: slow down"), "{e}");

        let e = parse_response(400, None, r#"{"error":{"code":400,"message":"bad"}}"#).unwrap_err();
        assert!(!e.is_retryable());

        // An error that arrives in a 200 body keeps the provider's status.
        let e = parse_response(
            200,
            None,
            r#"{"error":{"code":503,"message":"overloaded"}}"#,
        )
        .unwrap_err();
        assert!(e.is_retryable(), "{e}");

        let e = parse_response(502, None, "<html>bad gateway</html>").unwrap_err();
        assert!(e.is_retryable());
        let e = parse_response(200, None, "not json").unwrap_err();
        assert!(matches!(e, GatewayError::Decode(_)));
    }

    #[test]
    fn request_offers_tools_only_when_there_are_some() {
        let body = request_body("m", &[ChatMessage::user("hi")], vec![]);
        assert!(body.get("tools").is_none());
        let spec = ToolSpec {
            name: "Grep",
            description: "d",
            parameters: serde_json::json!({"type":"object"}),
        };
        let body = request_body("m", &[ChatMessage::user("hi")], vec![spec.to_openai()]);
        assert_eq!(body["tools"][0]["function"]["name"], "Grep");
        assert_eq!(body["messages"][0]["role"], "user");
    }

    #[test]
    fn claude_and_gemini_get_cache_breakpoints_on_the_system_prompt_and_last_message() {
        let messages = [
            ChatMessage::system("you are the coder"),
            ChatMessage::user("do it"),
            ChatMessage::assistant_text("ok"),
            ChatMessage::tool_result("c1", "output"),
        ];
        let marked =
            |m: &serde_json::Value| m["content"][0]["cache_control"]["type"] == "ephemeral";
        for model in ["anthropic/claude-sonnet-4.5", "google/gemini-2.5-pro"] {
            let body = request_body(model, &messages, vec![]);
            let sent = body["messages"].as_array().unwrap();
            let flags: Vec<bool> = sent.iter().map(marked).collect();
            assert_eq!(flags, [true, false, false, true], "{model}");
            assert_eq!(sent[0]["content"][0]["text"], "you are the coder");
            assert_eq!(sent[3]["content"][0]["text"], "output");
            assert_eq!(sent[3]["tool_call_id"], "c1");
        }
        let body = request_body("openai/gpt-5", &messages, vec![]);
        assert_eq!(body["messages"][0]["content"], "you are the coder");
        assert_eq!(body["messages"][3]["content"], "output");
    }

    /// Where the cache breakpoints go around a compaction, for a Claude Coder: the last turn
    /// before it, the summary turn (the same tools, system prompt and messages, then the
    /// instruction: all but the new turn is read from the cache), and the first turn after
    /// it (the same tools, then the head the compaction kept — system prompt, task and first
    /// turn, read from the cache and marked at its end so it stays there — then the summary
    /// and the turns after it, cached again by the last breakpoint).
    #[test]
    fn cache_breakpoints_before_during_and_after_a_compaction() {
        use codebutler_agent::compaction::Compaction;
        use codebutler_agent::conversation::ToolCall;
        let read = |id: &str, path: &str| ChatMessage::Assistant {
            content: None,
            tool_calls: vec![ToolCall::new(
                id,
                "Read",
                format!(r#"{{"file_path":"{path}"}}"#),
            )],
        };
        let before = vec![
            ChatMessage::system("You are the Coder."),
            ChatMessage::user("Plan: fix the login bug."),
            read("c1", "src/login.rs"),
            ChatMessage::tool_result("c1", "fn login() {}"),
            read("c2", "src/session.rs"),
            ChatMessage::tool_result("c2", "fn session() {}"),
        ];
        let compaction = Compaction {
            context_window: 1_000,
            threshold: 0.01,
            ..Compaction::default()
        };
        assert!(compaction.needed(&before));
        let summary_turn = compaction.summary_turn(&before).unwrap();
        // A head of 30 tokens: the system prompt, the task and the first read.
        let head = Compaction {
            context_window: 100,
            threshold: 1.0,
            head_share: 0.3,
            ..Compaction::default()
        };
        let mut after = head.compacted(
            &before,
            "Read login.rs and session.rs; nothing changed yet.",
        );
        after.push(read("c3", "src/auth.rs"));
        after.push(ChatMessage::tool_result("c3", "fn auth() {}"));
        let tools = || {
            vec![
                ToolSpec {
                    name: "Read",
                    description: "Reads a file.",
                    parameters: serde_json::json!({"type": "object"}),
                }
                .to_openai(),
            ]
        };
        let bodies = serde_json::json!({
            "before": request_body("anthropic/claude-sonnet-4.5", &before, tools()),
            "summary_turn": request_body("anthropic/claude-sonnet-4.5", &summary_turn, tools()),
            "after": request_body("anthropic/claude-sonnet-4.5", &after, tools()),
        });
        insta::assert_json_snapshot!(bodies);
    }
}

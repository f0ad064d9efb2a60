//! `FakeModel`: `POST /v1/chat/completions` of the OpenAI-compatible API, answering like
//! OpenRouter (whole, or as server-sent events for `stream: true`), driven by per-conversation scripts, and checking each request the
//! way a strict provider would; `GET /v1/models`, OpenRouter's model list, holding the models a
//! test lists (a request for any other model is refused, as OpenRouter refuses an id it does
//! not carry); `GET /v1/key`; `POST /v1/audio/transcriptions` ([`transcriptions`]); image
//! generation through chat completions, OpenRouter's way ([`image_output`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

mod image_output;
mod transcriptions;
pub use image_output::IMAGE_COST;
pub use transcriptions::{Transcription, fake_clip};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// An assistant text answer (`finish_reason: "stop"`).
    Text(String),
    /// Tool calls `(name, raw arguments text)`; the arguments may be invalid JSON on purpose.
    /// Ids are generated (`call_<n>`), content is null, `finish_reason: "tool_calls"`.
    ToolCalls(Vec<(String, String)>),
    /// An HTTP error with OpenRouter's body `{"error":{"code":status,"message":…}}`.
    Error {
        status: u16,
        retry_after: Option<String>,
        message: String,
    },
    /// Sleeps, then answers with the inner reply.
    Delayed(Duration, Box<Reply>),
    /// Waits until the test opens the gate ([`Gate::open`]), then answers with the inner
    /// reply: the request is held while the test does something else, without a sleep.
    Held(Gate, Box<Reply>),
}

/// A gate a test holds a reply at ([`Reply::held`]): the request that takes the reply is
/// recorded and waits ([`Gate::arrived`]) until [`Gate::open`]. Cheap to clone; the clones
/// are one gate.
#[derive(Clone, Debug)]
pub struct Gate {
    /// Whether a request waits (or waited) at the gate.
    arrived: Arc<tokio::sync::watch::Sender<bool>>,
    /// Whether the gate is open.
    open: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    /// A closed gate nothing reached yet.
    pub fn new() -> Gate {
        Gate {
            arrived: Arc::new(tokio::sync::watch::channel(false).0),
            open: Arc::new(tokio::sync::watch::channel(false).0),
        }
    }

    /// Whether a request reached the gate (and waits there unless it is open).
    pub fn arrived(&self) -> bool {
        *self.arrived.borrow()
    }

    /// Opens the gate: the request waiting there, and any later one, gets its reply.
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// Waits until the gate is open, saying a request arrived first.
    async fn pass(&self) {
        self.arrived.send_replace(true);
        let mut open = self.open.subscribe();
        // The sender lives in `self`: it is never dropped while this waits.
        let _ = open.wait_for(|o| *o).await;
    }
}

impl Reply {
    /// `Reply::Text`.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Text(text.into())
    }

    /// A single tool call.
    pub fn tool_call(name: impl Into<String>, arguments: impl Into<String>) -> Reply {
        Reply::ToolCalls(vec![(name.into(), arguments.into())])
    }

    /// `Reply::Error` without `Retry-After`.
    pub fn error(status: u16, message: impl Into<String>) -> Reply {
        Reply::Error {
            status,
            retry_after: None,
            message: message.into(),
        }
    }

    /// `Reply::Delayed`.
    pub fn delayed(delay: Duration, reply: Reply) -> Reply {
        Reply::Delayed(delay, Box::new(reply))
    }

    /// `Reply::Held`: `reply`, once the test opens `gate`.
    pub fn held(gate: &Gate, reply: Reply) -> Reply {
        Reply::Held(gate.clone(), Box::new(reply))
    }
}

/// A request the fake received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The JSON body (`Value::Null` if it was not JSON).
    pub body: Value,
    /// The `Authorization` header as sent.
    pub authorization: Option<String>,
    /// The matcher of the script that answered, if any.
    pub script: Option<String>,
    /// When it arrived.
    pub at: Instant,
    /// The HTTP status the fake answered with (before any scripted delay).
    pub status: u16,
    /// What the fake charged for it in its answer's `usage.cost` (USD): a priced model's
    /// tokens at its prices, [`CALL_COST`] for an unpriced one; 0 for an error (or an answer
    /// not made yet).
    pub charged: f64,
}

/// What the fake charges per answered call of a model the test gave no prices, in
/// `usage.cost` (USD), as OpenRouter reports a call's cost.
pub const CALL_COST: f64 = 0.0001;

/// A local fake of an OpenAI-compatible chat completions server. Cheap to clone; the server
/// stops when the last clone is dropped.
#[derive(Clone)]
pub struct FakeModel {
    inner: Arc<Inner>,
    _guard: Arc<ServerGuard>,
}

impl std::fmt::Debug for FakeModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeModel")
            .field("addr", &self.inner.addr)
            .finish_non_exhaustive()
    }
}

struct ServerGuard(tokio::task::JoinHandle<()>);

impl Drop for ServerGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct Inner {
    addr: SocketAddr,
    state: Mutex<ModelState>,
}

/// Computes a reply from the request's JSON body.
pub type Responder = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

/// What answers a script's requests.
enum Script {
    /// Replies taken in order, one per request, until they run out.
    Queue(VecDeque<Reply>),
    /// A reply computed from each request; it never runs out, and the same request always
    /// gets the same answer (a conversation retried after a crash is answered alike).
    Respond(Responder),
}

#[derive(Default)]
struct ModelState {
    /// Scripts in registration order: (matcher, what answers).
    scripts: Vec<(String, Script)>,
    requests: Vec<Recorded>,
    violations: Vec<String>,
    unscripted: Vec<String>,
    api_key: Option<String>,
    next_id: u64,
    /// Prompt prefixes written to the emulated prompt cache (hashes).
    cache: HashSet<u64>,
    /// The provider's models, in the order listed: `GET /models` lists them, and a request
    /// for any other is refused.
    listed: Vec<Listed>,
    /// `GET /models` answers this status (OpenRouter's error shape) instead of the list.
    list_failure: Option<u16>,
    /// The query strings `GET /models` was asked with, in order.
    list_queries: Vec<String>,
    /// Every `POST /audio/transcriptions`, in order.
    transcriptions: Vec<Transcription>,
    /// Transcriptions answer this status instead of a transcript.
    transcription_failure: Option<u16>,
    /// Every image generation request, in order.
    image_calls: Vec<crate::images::ImageCall>,
    /// What one image of a model costs, when the test set it.
    image_prices: HashMap<String, f64>,
}

/// A model of the fake provider.
#[derive(Clone)]
struct Listed {
    id: String,
    /// (prompt, completion, cache read) in USD per token; `None`: OpenRouter's `-1`
    /// ("varies"), read as no price.
    prices: Option<(f64, f64, Option<f64>)>,
    /// What it outputs: `["text"]`, or `["image"]` for an image model.
    output: &'static [&'static str],
    /// What it takes: `["text"]`, or `["text", "image"]` for a model that sees images.
    input: &'static [&'static str],
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, ModelState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl FakeModel {
    /// Starts the fake on `127.0.0.1:0`.
    pub async fn start() -> FakeModel {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("FakeModel: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("FakeModel: local_addr");
        let inner = Arc::new(Inner {
            addr,
            state: Mutex::new(ModelState::default()),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .route("/v1/models", axum::routing::get(models))
            .route("/v1/key", axum::routing::get(key))
            .route(
                "/v1/audio/transcriptions",
                post(transcriptions::transcriptions),
            )
            .fallback(not_found)
            .with_state(inner.clone());
        let server = tokio::spawn(async move {
            if let Err(err) = axum::serve(listener, app).await {
                tracing::error!("FakeModel server stopped: {err}");
            }
        });
        FakeModel {
            inner,
            _guard: Arc::new(ServerGuard(server)),
        }
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.inner.addr)
    }

    /// Adds replies to the script whose matcher is `matcher` (created if new). A request belongs
    /// to the script whose matcher occurs in its first user message (the longest such matcher
    /// wins, so `""` acts as a catch-all); each request takes the next reply.
    pub fn script(&self, matcher: &str, replies: Vec<Reply>) {
        let mut st = self.inner.lock();
        match st.scripts.iter_mut().find(|(m, _)| m == matcher) {
            Some((_, Script::Queue(queue))) => queue.extend(replies),
            Some((_, script)) => *script = Script::Queue(replies.into()),
            None => st
                .scripts
                .push((matcher.to_owned(), Script::Queue(replies.into()))),
        }
    }

    /// Answers every request of the conversations matching `matcher` (as for
    /// [`FakeModel::script`]) with what `respond` makes of the request's body.
    pub fn respond(
        &self,
        matcher: &str,
        respond: impl Fn(&Value) -> Reply + Send + Sync + 'static,
    ) {
        let mut st = self.inner.lock();
        let script = Script::Respond(Arc::new(respond));
        match st.scripts.iter_mut().find(|(m, _)| m == matcher) {
            Some((_, existing)) => *existing = script,
            None => st.scripts.push((matcher.to_owned(), script)),
        }
    }

    /// Lists `model` in `GET /models` with these prices (USD per token), as OpenRouter does
    /// (a model listed already gets these prices).
    pub fn price(&self, model: &str, prompt: f64, completion: f64, cache_read: Option<f64>) {
        self.add(Listed {
            id: model.to_owned(),
            prices: Some((prompt, completion, cache_read)),
            output: &["text"],
            input: &["text"],
        });
    }

    /// Makes `model` one of the provider's text models, listed in `GET /models` without a
    /// price (OpenRouter's `-1`, "varies"), so requests may name it.
    pub fn list(&self, model: &str) {
        self.add(Listed {
            id: model.to_owned(),
            prices: None,
            output: &["text"],
            input: &["text"],
        });
    }

    /// Makes `model` a text model that also takes images (`input_modalities` `text` and
    /// `image`): only such a model is sent image parts; another refuses them as OpenRouter
    /// does.
    pub fn list_vision_model(&self, model: &str) {
        self.add(Listed {
            id: model.to_owned(),
            prices: None,
            output: &["text"],
            input: &["text", "image"],
        });
    }

    /// Makes `model` one of the provider's image models (it takes text and images, and
    /// draws through chat completions, [`image_output`]): OpenRouter lists it only when
    /// `GET /models` asks for image outputs (`output_modalities=image` or `all`).
    pub fn list_image_model(&self, model: &str) {
        self.add(Listed {
            id: model.to_owned(),
            prices: None,
            output: &["image"],
            input: &["text", "image"],
        });
    }

    fn add(&self, model: Listed) {
        let mut st = self.inner.lock();
        match st.listed.iter_mut().find(|m| m.id == model.id) {
            Some(listed) => *listed = model,
            None => st.listed.push(model),
        }
    }

    /// Makes `GET /models` answer `status` in OpenRouter's error shape, as a provider that
    /// is failing does.
    pub fn fail_model_list(&self, status: u16) {
        self.inner.lock().list_failure = Some(status);
    }

    /// The query strings `GET /models` was asked with (`""` for none), in order.
    pub fn model_list_requests(&self) -> Vec<String> {
        self.inner.lock().list_queries.clone()
    }

    /// Makes the fake answer 401 unless the request carries `Authorization: Bearer <key>`.
    pub fn require_api_key(&self, key: &str) {
        self.inner.lock().api_key = Some(key.to_owned());
    }

    /// How many replies the script still holds (`usize::MAX` for a responder).
    pub fn remaining(&self, matcher: &str) -> usize {
        self.inner
            .lock()
            .scripts
            .iter()
            .find(|(m, _)| m == matcher)
            .map_or(0, |(_, script)| match script {
                Script::Queue(q) => q.len(),
                Script::Respond(_) => usize::MAX,
            })
    }

    /// Every request, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.lock().requests.clone()
    }

    /// The requests answered by the script `matcher`.
    pub fn requests_for(&self, matcher: &str) -> Vec<Recorded> {
        self.inner
            .lock()
            .requests
            .iter()
            .filter(|r| r.script.as_deref() == Some(matcher))
            .cloned()
            .collect()
    }

    /// Requests a real provider would have rejected, with the reason. Tests assert it is empty.
    pub fn violations(&self) -> Vec<String> {
        self.inner.lock().violations.clone()
    }

    /// Requests that matched no script, or whose script had run out of replies.
    pub fn unscripted(&self) -> Vec<String> {
        self.inner.lock().unscripted.clone()
    }
}

fn openrouter_error(status: u16, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = (
        code,
        json!({"error": {"code": status, "message": message}}).to_string(),
    )
        .into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

async fn not_found() -> Response {
    openrouter_error(404, "Not Found")
}

/// The text of a message's `content` (a string, or the text parts of an array).
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(1_700_000_000)
}

struct Prepared {
    request: Value,
    reply: Reply,
    delay: Duration,
    /// Gates the reply waits at, in order.
    gates: Vec<Gate>,
    gen_id: u64,
    call_ids: Vec<String>,
    /// Prompt characters served from the emulated prompt cache.
    cached_chars: usize,
    /// The requested model's prices, if the test priced it.
    prices: Option<(f64, f64, Option<f64>)>,
    /// Where the request is recorded, for what its answer charged.
    record_index: usize,
}

async fn completions(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(request) = image_output::image_request(&body) {
        return image_output::draw(&inner, &headers, &request);
    }
    let prepared = match prepare(&inner, &headers, &body) {
        Ok(p) => p,
        Err((status, message)) => return openrouter_error(status, &message),
    };
    answer(&inner, prepared).await
}

/// Checks, records and picks the scripted reply, all under the lock.
fn prepare(inner: &Inner, headers: &HeaderMap, body: &Bytes) -> Result<Prepared, (u16, String)> {
    let at = Instant::now();
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let body_value = parsed.clone().unwrap_or(Value::Null);

    let mut st = inner.lock();
    let record = |st: &mut ModelState, script: Option<String>, status: u16| {
        st.requests.push(Recorded {
            body: body_value.clone(),
            authorization: authorization.clone(),
            script,
            at,
            status,
            // Set when the answer is made: what its `usage.cost` says.
            charged: 0.0,
        });
    };

    // Authentication, as OpenRouter: 401 without a usable key.
    let auth_problem = auth_problem(authorization.as_deref(), st.api_key.as_deref());
    if let Some(problem) = auth_problem {
        st.violations
            .push(format!("401 {problem} (Authorization: {authorization:?})"));
        record(&mut st, None, 401);
        return Err((401, problem.to_string()));
    }

    let Some(request) = parsed else {
        let msg = "request body is not valid JSON".to_owned();
        st.violations.push(msg.clone());
        record(&mut st, None, 400);
        return Err((400, msg));
    };
    let problems = validate(&request);
    if !problems.is_empty() {
        let msg = problems.join("; ");
        st.violations.push(msg.clone());
        record(&mut st, None, 400);
        return Err((400, format!("Provider returned error: {msg}")));
    }
    // Like OpenRouter: a model it does not carry is refused, whatever the request holds.
    let model = request["model"].as_str().unwrap_or_default();
    if !st.listed.iter().any(|m| m.id == model) {
        let msg = format!("{model} is not a valid model ID");
        st.violations.push(msg.clone());
        record(&mut st, None, 400);
        return Err((400, msg));
    }
    // Like OpenRouter: image parts go only to a model that takes images.
    let has_image = request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .any(|part| part["type"] == "image_url");
    let sees_images = st
        .listed
        .iter()
        .any(|m| m.id == model && m.input.contains(&"image"));
    if has_image && !sees_images {
        let msg = "No endpoints found that support image input".to_owned();
        st.violations.push(format!("{model}: {msg}"));
        record(&mut st, None, 404);
        return Err((404, msg));
    }

    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    // Like a provider: a prompt longer than the model's context window is refused, not
    // answered.
    let prompt_tokens =
        (tools_chars(&request) + messages.iter().map(message_chars).sum::<usize>()) / 4;
    if prompt_tokens > CONTEXT_LENGTH {
        let msg = format!(
            "This endpoint's maximum context length is {CONTEXT_LENGTH} tokens. However, you requested about {prompt_tokens} tokens. Please reduce the length of the messages."
        );
        st.violations.push(msg.clone());
        record(&mut st, None, 400);
        return Err((400, msg));
    }
    let first_user = messages
        .iter()
        .find(|m| m["role"] == "user")
        .map(|m| content_text(m.get("content")))
        .unwrap_or_default();
    let script_idx = st
        .scripts
        .iter()
        .enumerate()
        .filter(|(_, (m, _))| first_user.contains(m.as_str()))
        .max_by_key(|(i, (m, _))| (m.len(), std::cmp::Reverse(*i)))
        .map(|(i, _)| i);
    let Some(script_idx) = script_idx else {
        let msg = format!(
            "fake model: no scripted reply for a conversation whose first user message is {first_user:?}"
        );
        st.unscripted.push(msg.clone());
        record(&mut st, None, 500);
        return Err((500, msg));
    };
    let matcher = st.scripts[script_idx].0.clone();
    let next = match &mut st.scripts[script_idx].1 {
        Script::Queue(queue) => queue.pop_front(),
        Script::Respond(respond) => Some(respond(&request)),
    };
    let Some(reply) = next else {
        let msg = format!(
            "fake model: no scripted reply for request #{} of script {matcher:?} (script exhausted)",
            st.requests
                .iter()
                .filter(|r| r.script.as_deref() == Some(&matcher))
                .count()
                + 1
        );
        st.unscripted.push(msg.clone());
        record(&mut st, None, 500);
        return Err((500, msg));
    };

    // Resolve delays and gates now (status known up front) and wait after releasing the
    // lock.
    let mut delay = Duration::ZERO;
    let mut gates = Vec::new();
    let mut reply = reply;
    let reply = loop {
        reply = match reply {
            Reply::Delayed(d, inner_reply) => {
                delay += d;
                *inner_reply
            }
            Reply::Held(gate, inner_reply) => {
                gates.push(gate);
                *inner_reply
            }
            other => break other,
        };
    };
    let status = match &reply {
        Reply::Error { status, .. } => *status,
        _ => 200,
    };
    record(&mut st, Some(matcher), status);
    let record_index = st.requests.len() - 1;
    let gen_id = {
        st.next_id += 1;
        st.next_id
    };
    let mut call_ids = Vec::new();
    if let Reply::ToolCalls(calls) = &reply {
        for _ in calls {
            st.next_id += 1;
            call_ids.push(format!("call_{}", st.next_id));
        }
    }
    let cached_chars = prompt_cache(&mut st.cache, &request);
    let prices = st
        .listed
        .iter()
        .find(|m| Some(m.id.as_str()) == request["model"].as_str())
        .and_then(|m| m.prices);
    drop(st);
    Ok(Prepared {
        request,
        reply,
        delay,
        gates,
        gen_id,
        call_ids,
        cached_chars,
        prices,
        record_index,
    })
}

/// The characters the request's tool definitions count for in the prompt: their JSON, as a
/// provider counts the definitions it is sent among the prompt's tokens (and caches them as
/// the start of every prefix).
fn tools_chars(request: &Value) -> usize {
    match &request["tools"] {
        Value::Array(tools) if !tools.is_empty() => request["tools"].to_string().chars().count(),
        _ => 0,
    }
}

/// The characters a message counts for in the prompt.
fn message_chars(m: &Value) -> usize {
    content_text(m.get("content")).chars().count()
        + m["tool_calls"].as_array().map_or(0, |calls| {
            calls
                .iter()
                .map(|c| {
                    c["function"]["arguments"]
                        .as_str()
                        .map_or(0, |a| a.chars().count())
                        + c["function"]["name"]
                            .as_str()
                            .map_or(0, |n| n.chars().count())
                })
                .sum()
        })
}

/// Emulates explicit prompt caching as Anthropic models do it through OpenRouter: a text
/// part with `cache_control` writes the prompt up to and including its message to the
/// cache; a later request whose messages start with a written prefix (same model, same
/// tools) reads that prefix, the tool definitions included, from the cache. Returns the
/// prompt characters read from the cache and records this request's breakpoints.
fn prompt_cache(cache: &mut HashSet<u64>, request: &Value) -> usize {
    use std::hash::{Hash, Hasher};
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    request["model"].to_string().hash(&mut hasher);
    request["tools"].to_string().hash(&mut hasher);
    let mut cached = 0;
    let mut chars = tools_chars(request);
    for m in &messages {
        // What the message says, whatever its breakpoints.
        m["role"].to_string().hash(&mut hasher);
        content_text(m.get("content")).hash(&mut hasher);
        m["tool_calls"].to_string().hash(&mut hasher);
        m["tool_call_id"].to_string().hash(&mut hasher);
        chars += message_chars(m);
        let prefix = hasher.finish();
        if cache.contains(&prefix) {
            cached = chars;
        }
        let breakpoint = m["content"].as_array().is_some_and(|parts| {
            parts
                .iter()
                .any(|p| p["cache_control"]["type"] == "ephemeral")
        });
        if breakpoint {
            cache.insert(prefix);
        }
    }
    cached
}

/// The context window of every model of the fake provider, in its tokens (four characters
/// of the prompt each): what `/models` advertises, and the longest prompt it answers.
pub const CONTEXT_LENGTH: usize = 200_000;

/// Why OpenRouter would answer 401 to a request with this `Authorization` header, when the
/// fake only takes `expected` (`None`: any key).
fn auth_problem(authorization: Option<&str>, expected: Option<&str>) -> Option<&'static str> {
    let key = authorization
        .and_then(|a| a.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|k| !k.is_empty());
    match (key, expected) {
        (None, _) => Some("No auth credentials found"),
        (Some(k), Some(expected)) if k != expected => Some("User not found."),
        _ => None,
    }
}

/// `GET /key`: the key's details, as OpenRouter gives them (a label showing only the key's
/// ends), or its 401 for a key it does not take. Asking is no protocol violation.
async fn key(State(inner): State<Arc<Inner>>, headers: HeaderMap) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let expected = inner.lock().api_key.clone();
    if let Some(problem) = auth_problem(authorization.as_deref(), expected.as_deref()) {
        return openrouter_error(401, problem);
    }
    let key = authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "))
        .unwrap_or_default()
        .trim();
    let ends = |k: &str| {
        let start: String = k.chars().take(9).collect();
        let end: String = k
            .chars()
            .rev()
            .take(3)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("{start}...{end}")
    };
    let body = json!({"data": {
        "label": ends(key),
        "limit": null,
        "usage": 0,
        "is_free_tier": false,
        "is_provisioning_key": false,
        "limit_remaining": null,
        "rate_limit": {"requests": 50, "interval": "10s"},
    }});
    let mut resp = (StatusCode::OK, body.to_string()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// `GET /models`: OpenRouter's model list, one entry per listed model whose outputs the
/// query's `output_modalities` asks for (text only when it does not say; `all`: every one),
/// prices as decimal strings of USD per token (`-1` where the test gave none), the other
/// fields as OpenRouter sends them. Asking needs no key, as with OpenRouter.
async fn models(State(inner): State<Arc<Inner>>, RawQuery(query): RawQuery) -> Response {
    let query = query.unwrap_or_default();
    let (listed, failure) = {
        let mut st = inner.lock();
        st.list_queries.push(query.clone());
        (st.listed.clone(), st.list_failure)
    };
    if let Some(status) = failure {
        return openrouter_error(status, "Internal Server Error");
    }
    let asked: Vec<String> = query
        .split('&')
        .filter_map(|pair| pair.strip_prefix("output_modalities="))
        .flat_map(|value| {
            value
                .replace("%2C", ",")
                .split(',')
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    let shown = |model: &Listed| {
        if asked.is_empty() {
            model.output.contains(&"text")
        } else {
            asked
                .iter()
                .any(|m| m == "all" || model.output.contains(&m.as_str()))
        }
    };
    let data: Vec<Value> = listed
        .into_iter()
        .filter(|m| shown(m))
        .map(|model| {
            let price = |p: Option<f64>| p.map_or_else(|| "-1".to_owned(), |p| format!("{p}"));
            let (prompt, completion, cache_read) = match model.prices {
                Some((prompt, completion, cache_read)) => (Some(prompt), Some(completion), cache_read),
                None => (None, None, None),
            };
            let mut pricing = json!({
                "prompt": price(prompt),
                "completion": price(completion),
                "request": "0",
                "image": "0",
            });
            if let Some(read) = cache_read {
                pricing["input_cache_read"] = json!(format!("{read}"));
            }
            let id = model.id;
            json!({
                "id": id,
                "canonical_slug": id,
                "name": id,
                "created": 1_750_000_000,
                "description": "a model of the fake provider",
                "context_length": CONTEXT_LENGTH,
                "architecture": {
                    "modality": format!("text->{}", model.output.join("+")),
                    "input_modalities": model.input,
                    "output_modalities": model.output,
                    "tokenizer": "Other",
                },
                "pricing": pricing,
                "top_provider": {"context_length": CONTEXT_LENGTH, "max_completion_tokens": 32_000, "is_moderated": false},
                "per_request_limits": null,
                "supported_parameters": ["tools", "tool_choice", "max_tokens"],
            })
        })
        .collect();
    let mut resp = (StatusCode::OK, json!({ "data": data }).to_string()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

async fn answer(inner: &Inner, prepared: Prepared) -> Response {
    let Prepared {
        request,
        reply,
        delay,
        gates,
        gen_id,
        call_ids,
        cached_chars,
        prices,
        record_index,
    } = prepared;
    let messages = request["messages"].as_array().cloned().unwrap_or_default();

    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    for gate in &gates {
        gate.pass().await;
    }

    let prompt_chars = tools_chars(&request) + messages.iter().map(message_chars).sum::<usize>();
    let prompt_tokens = prompt_chars / 4;
    let cached_tokens = cached_chars / 4;
    let model = request["model"].clone();

    let (message, finish_reason, reply_chars) = match reply {
        Reply::Error {
            status,
            retry_after,
            message,
        } => {
            let mut resp = openrouter_error(status, &message);
            if let Some(ra) = retry_after
                && let Ok(v) = HeaderValue::from_str(&ra)
            {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
            return resp;
        }
        Reply::Text(text) => {
            let chars = text.chars().count();
            (
                json!({"role": "assistant", "content": text, "refusal": null, "reasoning": null}),
                "stop",
                chars,
            )
        }
        Reply::ToolCalls(calls) => {
            let chars = calls
                .iter()
                .map(|(n, a)| n.chars().count() + a.chars().count())
                .sum();
            let tool_calls: Vec<Value> = calls
                .into_iter()
                .zip(call_ids)
                .map(|((name, arguments), id)| {
                    json!({
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    })
                })
                .collect();
            (
                json!({
                    "role": "assistant",
                    "content": null,
                    "refusal": null,
                    "reasoning": null,
                    "tool_calls": tool_calls,
                }),
                "tool_calls",
                chars,
            )
        }
        Reply::Delayed(..) | Reply::Held(..) => {
            unreachable!("delays and gates were unwrapped above")
        }
    };
    let completion_tokens = reply_chars / 4 + 1;
    // A priced model's call costs its tokens at its prices, as OpenRouter bills it (cached
    // prompt tokens at the cache-read price); an unpriced one a token amount.
    let cost = prices.map_or(CALL_COST, |(prompt, completion, cache_read)| {
        let fresh = prompt_tokens.saturating_sub(cached_tokens) as f64;
        let cached = cached_tokens as f64;
        fresh * prompt
            + cached * cache_read.unwrap_or(prompt)
            + completion_tokens as f64 * completion
    });
    if let Some(recorded) = inner.lock().requests.get_mut(record_index) {
        recorded.charged = cost;
    }
    let body = json!({
        "id": format!("gen-{gen_id}"),
        "object": "chat.completion",
        "created": unix_secs(),
        "model": model,
        "provider": "Fake",
        "system_fingerprint": null,
        "choices": [{
            "index": 0,
            "logprobs": null,
            "finish_reason": finish_reason,
            "native_finish_reason": finish_reason,
            "message": message,
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "cost": cost,
            "prompt_tokens_details": {"cached_tokens": cached_tokens},
        },
    });
    if request["stream"] == Value::Bool(true) {
        return event_stream(&body);
    }
    let mut resp = (StatusCode::OK, body.to_string()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// The completion `body` as OpenRouter streams it (`stream: true`): server-sent events, a
/// processing comment first, the text in pieces of a few characters, each tool call's id
/// and name then its arguments in two pieces, the finish reason with the usage last, then
/// `[DONE]`.
fn event_stream(body: &Value) -> Response {
    let message = &body["choices"][0]["message"];
    let chunk = |delta: Value, finish: Value, usage: Option<&Value>| {
        let mut chunk = json!({
            "id": body["id"],
            "object": "chat.completion.chunk",
            "created": body["created"],
            "model": body["model"],
            "provider": body["provider"],
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "native_finish_reason": finish}],
        });
        if let Some(usage) = usage {
            chunk["usage"] = usage.clone();
        }
        format!("data: {chunk}\n\n")
    };
    let mut events = vec![": OPENROUTER PROCESSING\n\n".to_owned()];
    events.push(chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
        None,
    ));
    if let Some(text) = message["content"].as_str() {
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(STREAM_PIECE_CHARS) {
            let piece: String = piece.iter().collect();
            events.push(chunk(json!({"content": piece}), Value::Null, None));
        }
    }
    for (index, call) in message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let arguments = call["function"]["arguments"].as_str().unwrap_or_default();
        let cut = arguments
            .char_indices()
            .nth(arguments.chars().count() / 2)
            .map_or(arguments.len(), |(i, _)| i);
        events.push(chunk(
            json!({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": &arguments[..cut]}}]}),
            Value::Null,
            None,
        ));
        events.push(chunk(
            json!({"tool_calls": [{"index": index, "function": {"arguments": &arguments[cut..]}}]}),
            Value::Null,
            None,
        ));
    }
    let finish = body["choices"][0]["finish_reason"].clone();
    events.push(chunk(json!({}), finish, Some(&body["usage"])));
    events.push("data: [DONE]\n\n".to_owned());
    let mut resp = (StatusCode::OK, events.concat()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    resp
}

/// How many characters of text one streamed chunk carries.
const STREAM_PIECE_CHARS: usize = 16;

fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Checks a chat completions request as a strict provider would; returns the problems.
pub(crate) fn validate(request: &Value) -> Vec<String> {
    let mut p = Vec::new();
    let Some(obj) = request.as_object() else {
        return vec!["request body is not a JSON object".into()];
    };
    match obj.get("model") {
        Some(Value::String(m)) if !m.is_empty() => {}
        _ => p.push("`model` must be a non-empty string".into()),
    }
    match obj.get("stream") {
        None | Some(Value::Bool(_)) => {}
        Some(other) => p.push(format!("`stream` must be a boolean, got {other}")),
    }
    for key in ["max_tokens", "max_completion_tokens"] {
        if let Some(v) = obj.get(key)
            && !v.is_null()
            && v.as_u64().is_none_or(|n| n == 0)
        {
            p.push(format!("`{key}` must be a positive integer, got {v}"));
        }
    }
    if let Some(t) = obj.get("temperature")
        && !t.is_null()
        && t.as_f64().is_none_or(|t| !(0.0..=2.0).contains(&t))
    {
        p.push(format!("`temperature` must be a number in [0, 2], got {t}"));
    }

    // tools
    let mut tool_names = HashSet::new();
    if let Some(tools) = obj.get("tools").filter(|t| !t.is_null()) {
        match tools.as_array() {
            None => p.push("`tools` must be an array".into()),
            Some(tools) if tools.is_empty() => {
                p.push("`tools` must not be an empty array (omit it instead)".into())
            }
            Some(tools) => {
                for (i, tool) in tools.iter().enumerate() {
                    if tool.get("type").and_then(Value::as_str) != Some("function") {
                        p.push(format!("tools[{i}].type must be \"function\""));
                    }
                    let Some(function) = tool.get("function").and_then(Value::as_object) else {
                        p.push(format!("tools[{i}].function must be an object"));
                        continue;
                    };
                    match function.get("name").and_then(Value::as_str) {
                        Some(name) if valid_tool_name(name) => {
                            if !tool_names.insert(name.to_owned()) {
                                p.push(format!("tools[{i}]: duplicate tool name {name:?}"));
                            }
                        }
                        other => p.push(format!(
                            "tools[{i}].function.name must match ^[a-zA-Z0-9_-]{{1,64}}$, got {other:?}"
                        )),
                    }
                    match function.get("parameters") {
                        Some(Value::Object(schema)) => {
                            if schema.get("type").and_then(Value::as_str) != Some("object") {
                                p.push(format!(
                                    "tools[{i}].function.parameters must be a JSON schema of type \"object\""
                                ));
                            }
                        }
                        _ => p.push(format!("tools[{i}].function.parameters must be an object")),
                    }
                    if let Some(d) = function.get("description")
                        && !d.is_string()
                    {
                        p.push(format!("tools[{i}].function.description must be a string"));
                    }
                }
            }
        }
    }
    if let Some(choice) = obj.get("tool_choice").filter(|c| !c.is_null()) {
        let ok = match choice {
            Value::String(s) => {
                s == "none" || ((s == "auto" || s == "required") && !tool_names.is_empty())
            }
            Value::Object(_) => {
                choice["type"] == "function"
                    && choice["function"]["name"]
                        .as_str()
                        .is_some_and(|n| tool_names.contains(n))
            }
            _ => false,
        };
        if !ok {
            p.push(format!(
                "invalid `tool_choice` {choice} for the given tools"
            ));
        }
    }

    // messages
    let Some(messages) = obj.get("messages").and_then(Value::as_array) else {
        p.push("`messages` must be an array".into());
        return p;
    };
    if messages.is_empty() {
        p.push("`messages` must not be empty".into());
    }
    let mut pending: Vec<String> = Vec::new();
    let mut all_ids: HashMap<String, usize> = HashMap::new();
    let check_content = |p: &mut Vec<String>, i: usize, m: &Value, role: &str| -> bool {
        match m.get("content") {
            Some(Value::String(_)) => true,
            Some(Value::Array(parts)) => {
                for (j, part) in parts.iter().enumerate() {
                    let ty = part.get("type").and_then(Value::as_str);
                    let ok = match ty {
                        Some("text") => {
                            part.get("text").is_some_and(Value::is_string)
                                && part
                                    .get("cache_control")
                                    .is_none_or(|c| c["type"] == "ephemeral")
                        }
                        Some("image_url") => part.get("image_url").is_some(),
                        Some("file" | "input_audio") => true,
                        _ => false,
                    };
                    if !ok {
                        p.push(format!(
                            "messages[{i}] ({role}) content[{j}] is not a valid part"
                        ));
                    }
                }
                true
            }
            Some(Value::Null) | None => false,
            Some(other) => {
                p.push(format!(
                    "messages[{i}] ({role}) content must be a string or an array of parts, got {other}"
                ));
                true
            }
        }
    };
    let breakpoints = messages
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|part| part.get("cache_control").is_some())
        .count();
    if breakpoints > 4 {
        p.push(format!(
            "{breakpoints} cache_control breakpoints (at most 4 are allowed)"
        ));
    }
    for (i, m) in messages.iter().enumerate() {
        if !m.is_object() {
            p.push(format!("messages[{i}] is not an object"));
            continue;
        }
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if matches!(role, "system" | "developer" | "user" | "assistant") && !pending.is_empty() {
            p.push(format!(
                "messages[{i}] ({role}) comes before the tool results for {pending:?}: every tool call of an assistant message must be answered by a tool message right after it"
            ));
            pending.clear();
        }
        match role {
            "system" | "developer" | "user" => {
                if !check_content(&mut p, i, m, role) {
                    p.push(format!("messages[{i}] ({role}) has no content"));
                } else if role == "user"
                    && content_text(m.get("content")).trim().is_empty()
                    && !m["content"]
                        .as_array()
                        .is_some_and(|a| a.iter().any(|part| part["type"] != "text"))
                {
                    p.push(format!(
                        "messages[{i}] (user) has empty text content (rejected by several providers)"
                    ));
                }
            }
            "assistant" => {
                let has_content = check_content(&mut p, i, m, role);
                let tool_calls = m.get("tool_calls").filter(|t| !t.is_null());
                match tool_calls {
                    None => {
                        if !has_content {
                            p.push(format!(
                                "messages[{i}] (assistant) needs `content` or `tool_calls`"
                            ));
                        }
                    }
                    Some(Value::Array(calls)) if !calls.is_empty() => {
                        for (j, call) in calls.iter().enumerate() {
                            let id = call.get("id").and_then(Value::as_str);
                            match id {
                                Some(id) if !id.is_empty() => {
                                    if let Some(prev) = all_ids.insert(id.to_owned(), i) {
                                        p.push(format!(
                                            "messages[{i}].tool_calls[{j}]: id {id:?} already used in messages[{prev}]"
                                        ));
                                    }
                                    pending.push(id.to_owned());
                                }
                                _ => p.push(format!(
                                    "messages[{i}].tool_calls[{j}].id must be a non-empty string"
                                )),
                            }
                            if call.get("type").and_then(Value::as_str) != Some("function") {
                                p.push(format!(
                                    "messages[{i}].tool_calls[{j}].type must be \"function\""
                                ));
                            }
                            if !call["function"]["name"]
                                .as_str()
                                .is_some_and(valid_tool_name)
                            {
                                p.push(format!(
                                    "messages[{i}].tool_calls[{j}].function.name must be a valid tool name"
                                ));
                            }
                            if !call["function"]["arguments"].is_string() {
                                p.push(format!(
                                    "messages[{i}].tool_calls[{j}].function.arguments must be a string (JSON text)"
                                ));
                            }
                        }
                    }
                    Some(_) => p.push(format!(
                        "messages[{i}].tool_calls must be a non-empty array (omit it instead)"
                    )),
                }
            }
            "tool" => {
                if !check_content(&mut p, i, m, role) {
                    p.push(format!("messages[{i}] (tool) has no content"));
                }
                match m.get("tool_call_id").and_then(Value::as_str) {
                    None => p.push(format!("messages[{i}] (tool) has no `tool_call_id`")),
                    Some(id) => match pending.iter().position(|x| x == id) {
                        Some(pos) => {
                            pending.remove(pos);
                        }
                        None => p.push(format!(
                            "messages[{i}] (tool) answers {id:?}, which is not an unanswered tool call of the preceding assistant message"
                        )),
                    },
                }
            }
            other => p.push(format!("messages[{i}] has invalid role {other:?}")),
        }
    }
    if !pending.is_empty() {
        p.push(format!(
            "tool calls {pending:?} of the last assistant message have no tool result"
        ));
    }
    p
}

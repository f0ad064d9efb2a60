//! The process's Prometheus metrics, served at the dashboard's `/metrics`: messages
//! received, the time to acknowledge an event, model calls with their tokens and cost by role
//! and model, runs by state, the runs queued for a slot, prepared worktrees, Slack API errors
//! and 429s, thread leases held.
//!
//! One registry for the process, reached through [`metrics()`] like `tracing`'s dispatcher:
//! each figure is bumped in one line where the thing happens (Slack intake, the socket's
//! ack, the gateway, the sender, the supervisor, the preparer, the leases), which passing a
//! handle through every constructor on the way would bury under plumbing. The figures are
//! atomics, so reading them never waits on the work they count; nothing here holds text from
//! outside beyond a role, a model id, a run state and a Slack method name.

use std::sync::LazyLock;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The content type of [`encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A model call's labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabels {
    /// `pm`, `coder`, …
    pub role: String,
    pub model: String,
}

/// A kind of token a model call counted.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    pub role: String,
    pub model: String,
    /// `prompt`, `completion` or `cached` (the part of `prompt` read from the cache).
    pub kind: &'static str,
}

/// A run state's label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// `started`, then the state it ended in.
    pub state: &'static str,
}

/// A Slack Web API method's label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    pub method: &'static str,
}

/// Every figure, each registered once.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// People's messages stored from Slack (each once, whatever Slack retried).
    pub messages_received: Counter,
    /// Seconds from a Socket Mode event's arrival to its acknowledgement.
    pub ack_seconds: Histogram,
    /// Model calls answered, by role and model.
    pub model_calls: Family<ModelLabels, Counter>,
    /// Their tokens, by role, model and kind.
    pub model_tokens: Family<TokenLabels, Counter>,
    /// Their cost in USD as the provider reported it, by role and model.
    pub model_cost: Family<ModelLabels, Counter<f64, AtomicU64>>,
    /// Coder runs started, and ended by the state they ended in.
    pub runs: Family<StateLabels, Counter>,
    /// Coder runs waiting for a slot (`access.maxConcurrentRuns`).
    pub queue_depth: Gauge,
    /// Worktrees prepared ahead of an approval (with their waiting runner), kept until the
    /// approval takes them or they are discarded.
    pub prepared_worktrees: Gauge,
    /// Slack Web API calls that failed, by method (429s included).
    pub slack_errors: Family<MethodLabels, Counter>,
    /// Slack Web API calls Slack refused with 429 (rate limited), by method.
    pub slack_rate_limited: Family<MethodLabels, Counter>,
    /// Thread leases this process holds (a store several instances share).
    pub leases_held: Gauge,
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("codebutler");
        let metrics = Self {
            messages_received: Counter::default(),
            // 1 ms to about 16 s.
            ack_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            model_calls: Family::default(),
            model_tokens: Family::default(),
            model_cost: Family::default(),
            runs: Family::default(),
            queue_depth: Gauge::default(),
            prepared_worktrees: Gauge::default(),
            slack_errors: Family::default(),
            slack_rate_limited: Family::default(),
            leases_held: Gauge::default(),
            registry: Registry::default(),
        };
        registry.register(
            "messages_received",
            "People's messages stored from Slack",
            metrics.messages_received.clone(),
        );
        registry.register(
            "ack_seconds",
            "Seconds from a Socket Mode event's arrival to its acknowledgement",
            metrics.ack_seconds.clone(),
        );
        registry.register(
            "model_calls",
            "Model calls answered, by role and model",
            metrics.model_calls.clone(),
        );
        registry.register(
            "model_tokens",
            "Tokens of model calls, by role, model and kind",
            metrics.model_tokens.clone(),
        );
        registry.register(
            "model_cost_usd",
            "Cost of model calls in USD as the provider reported it, by role and model",
            metrics.model_cost.clone(),
        );
        registry.register(
            "runs",
            "Coder runs started, and ended by their final state",
            metrics.runs.clone(),
        );
        registry.register(
            "run_queue_depth",
            "Coder runs waiting for a slot",
            metrics.queue_depth.clone(),
        );
        registry.register(
            "prepared_worktrees",
            "Worktrees prepared ahead of an approval, kept until taken or discarded",
            metrics.prepared_worktrees.clone(),
        );
        registry.register(
            "slack_api_errors",
            "Slack Web API calls that failed, by method",
            metrics.slack_errors.clone(),
        );
        registry.register(
            "slack_rate_limited",
            "Slack Web API calls refused with 429, by method",
            metrics.slack_rate_limited.clone(),
        );
        registry.register(
            "leases_held",
            "Thread leases this process holds",
            metrics.leases_held.clone(),
        );
        Self {
            registry,
            ..metrics
        }
    }

    /// Counts one answered model call of `role` on `model`.
    pub fn model_call(
        &self,
        role: &str,
        model: &str,
        prompt: u64,
        completion: u64,
        cached: u64,
        cost: Option<f64>,
    ) {
        let labels = ModelLabels {
            role: role.to_owned(),
            model: model.to_owned(),
        };
        self.model_calls.get_or_create(&labels).inc();
        for (kind, n) in [
            ("prompt", prompt),
            ("completion", completion),
            ("cached", cached),
        ] {
            self.model_tokens
                .get_or_create(&TokenLabels {
                    role: labels.role.clone(),
                    model: labels.model.clone(),
                    kind,
                })
                .inc_by(n);
        }
        if let Some(cost) = cost.filter(|c| c.is_finite() && *c >= 0.0) {
            self.model_cost.get_or_create(&labels).inc_by(cost);
        }
    }

    /// Counts a failed Slack Web API call of `method`; `rate_limited` when Slack said 429.
    pub fn slack_error(&self, method: &'static str, rate_limited: bool) {
        let labels = MethodLabels { method };
        self.slack_errors.get_or_create(&labels).inc();
        if rate_limited {
            self.slack_rate_limited.get_or_create(&labels).inc();
        }
    }

    /// Counts a run reaching `state` (`started`, or the state it ended in).
    pub fn run(&self, state: &'static str) {
        self.runs.get_or_create(&StateLabels { state }).inc();
    }
}

/// One unit of a gauge for as long as it lives: a run waiting for a slot, a preparation
/// kept ahead of its approval.
#[derive(Debug)]
pub struct Held(&'static Gauge);

impl Held {
    /// Adds one to `gauge` until dropped.
    pub fn new(gauge: &'static Gauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.dec();
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// Every figure in the OpenMetrics text format (which Prometheus reads), for `/metrics`.
pub fn encode() -> Result<String, std::fmt::Error> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &metrics().registry)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_names_each_figure_with_its_labels() {
        metrics().model_call("pm", "test/model", 10, 2, 1, Some(0.5));
        metrics().slack_error("chat.postMessage", true);
        let text = encode().unwrap();
        for expected in [
            "codebutler_messages_received_total",
            "codebutler_model_calls_total{role=\"pm\",model=\"test/model\"}",
            "codebutler_model_tokens_total{role=\"pm\",model=\"test/model\",kind=\"cached\"}",
            "codebutler_slack_rate_limited_total{method=\"chat.postMessage\"}",
            "codebutler_ack_seconds_bucket",
            "codebutler_run_queue_depth",
            "# EOF",
        ] {
            assert!(text.contains(expected), "{expected} missing from:\n{text}");
        }
    }
}

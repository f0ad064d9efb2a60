//! A circuit breaker per model id, shared by every thread of the service: after
//! `openrouter.breakerFailures` failures of a model in a row (server errors, timeouts, the
//! provider unreachable) the model is skipped for `openrouter.breakerCoolDownSecs`, and the
//! role's fallback answers meanwhile ([`super::Fallbacks`]). When every model a call could
//! use is skipped, the gateway tries the first all the same: the breaker routes calls to a
//! model that may answer, it never leaves a call with none. After the cool-down the next
//! call tries the model again: one success closes the breaker, one more failure opens it
//! for another cool-down.
//!
//! The state lives in this process's memory: a service on several hosts keeps one breaker
//! per host (each learns of a failing provider from its own calls), and a restart forgets
//! it. A rate limit (429) is not a failure here: the provider is up, only busy.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

/// The breaker's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerSettings {
    /// Failures in a row that open the breaker; 0 turns it off.
    pub failures: u32,
    /// How long an open breaker skips its model.
    pub cool_down: Duration,
}

/// One model's health.
#[derive(Clone, Copy, Debug, Default)]
struct Health {
    /// Failures since the last success.
    failures: u32,
    /// Until when the model is skipped.
    open_until: Option<Instant>,
}

/// Every model's breaker.
#[derive(Debug)]
pub struct Breakers {
    settings: BreakerSettings,
    models: Mutex<HashMap<String, Health>>,
}

impl Breakers {
    /// Breakers with `settings`, every model closed.
    pub fn new(settings: BreakerSettings) -> Self {
        Self {
            settings,
            models: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Health>> {
        // A panic while holding the map leaves plain counters: still usable.
        self.models.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `model` may be called now; `Err` with how long it stays skipped.
    pub fn check(&self, model: &str) -> Result<(), Duration> {
        let now = Instant::now();
        match self.lock().get(model).and_then(|h| h.open_until) {
            Some(until) if until > now => Err(until - now),
            _ => Ok(()),
        }
    }

    /// `model` answered: its breaker closes.
    pub fn succeeded(&self, model: &str) {
        self.lock().remove(model);
    }

    /// `model` failed; `true` when this failure opened its breaker (the caller stops trying
    /// it).
    pub fn failed(&self, model: &str) -> bool {
        if self.settings.failures == 0 {
            return false;
        }
        let mut models = self.lock();
        let health = models.entry(model.to_owned()).or_default();
        health.failures = health.failures.saturating_add(1);
        // A model tried again after its cool-down (half open) opens again at once.
        if health.failures >= self.settings.failures || health.open_until.is_some() {
            health.open_until = Some(Instant::now() + self.settings.cool_down);
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breakers(failures: u32) -> Breakers {
        Breakers::new(BreakerSettings {
            failures,
            cool_down: Duration::from_secs(300),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn opens_after_failures_in_a_row_and_closes_after_the_cool_down() {
        let b = breakers(3);
        assert!(!b.failed("m"));
        assert!(!b.failed("m"));
        assert!(b.check("m").is_ok());
        assert!(b.failed("m"), "the third failure opens it");
        assert_eq!(b.check("m"), Err(Duration::from_secs(300)));
        assert!(b.check("other").is_ok(), "one breaker per model");
        tokio::time::advance(Duration::from_secs(301)).await;
        assert!(b.check("m").is_ok(), "tried again after the cool-down");
        // One more failure after the cool-down opens it again; a success would close it.
        assert!(b.failed("m"));
        assert!(b.check("m").is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_success_resets_the_count() {
        let b = breakers(2);
        assert!(!b.failed("m"));
        b.succeeded("m");
        assert!(!b.failed("m"));
        assert!(b.check("m").is_ok());
    }

    #[test]
    fn zero_failures_turns_it_off() {
        let b = breakers(0);
        for _ in 0..10 {
            assert!(!b.failed("m"));
        }
        assert!(b.check("m").is_ok());
    }
}

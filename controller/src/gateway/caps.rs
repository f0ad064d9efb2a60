//! The caps that hold across threads and hosts, checked when a person starts a Coder run (an
//! approval, a follow-up, a review round's *yes*) and has an image drawn: what the whole repository may spend in a
//! day (`access.maxCostPerDay`), what one person may spend in a day
//! (`access.maxCostPerUserPerDay`: the runs one person starts, the images they have drawn and
//! the voice notes they send), and the Coder model calls one person's runs may make in
//! an hour (`access.maxClaudeCallsPerHour`, also enforced per call by the runners' hub); the
//! daily ones also switch the PM to `productManager.overBudget`'s model when it is set. The
//! figures come from the store at the moment of the check ([`crate::store::Store`]'s spend
//! queries), so every instance sharing a PostgreSQL store sees the same ones.
//!
//! A day is a UTC day: it resets at 00:00 UTC. The words people read are pure
//! ([`CapRefusal::markdown`]) and tested by equality.

use chrono::{DateTime, Duration, Utc};

use crate::store::Store;

/// The caps, as configured; 0 means no cap.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Caps {
    /// `access.maxCostPerDay`, USD.
    pub per_day: f64,
    /// `access.maxCostPerUserPerDay`, USD.
    pub per_user_per_day: f64,
    /// `access.maxClaudeCallsPerHour`: Coder model calls per person per hour.
    pub calls_per_hour: u32,
}

/// Which cap refused a start, with its figures.
#[derive(Clone, Debug, PartialEq)]
pub enum CapRefusal {
    /// The repository spent `spent` today, at or over `cap`.
    Repository { spent: f64, cap: f64 },
    /// `person` spent `spent` today (the runs they started, the images and transcriptions
    /// made for them), at or over `cap`.
    Person {
        person: String,
        spent: f64,
        cap: f64,
    },
    /// `person`'s runs made `calls` Coder calls in the last hour, at or over `cap`; the
    /// earliest of them leaves the hour at `frees_at`.
    Calls {
        person: String,
        calls: i64,
        cap: u32,
        frees_at: DateTime<Utc>,
    },
    /// The figures could not be read: the start is refused rather than let through.
    Unreadable(String),
}

impl CapRefusal {
    /// What the thread is told, at `now`: which cap, its figure, and when it resets.
    pub fn markdown(&self, now: DateTime<Utc>) -> String {
        self.markdown_as(
            now,
            "Not started",
            "The plan stays as it is: approve it again once the cap allows.",
        )
    }

    /// [`Self::markdown`] for another refused step: `verdict` first ("Not drawn"), `tail`
    /// last (what stays, and how to try again).
    pub fn markdown_as(&self, now: DateTime<Utc>, verdict: &str, tail: &str) -> String {
        let midnight = next_midnight(now);
        let day_resets = format!("It resets at 00:00 UTC (in {}).", until(now, midnight));
        match self {
            Self::Repository { spent, cap } => format!(
                "{verdict}: this repository's daily cap (`access.maxCostPerDay`, ${cap:.2}) is reached: ${spent:.2} spent today. {day_resets} {tail}"
            ),
            Self::Person { person, spent, cap } => format!(
                "{verdict}: <@{person}>'s daily cap (`access.maxCostPerUserPerDay`, ${cap:.2}) is reached: ${spent:.2} spent today on the runs they started and the images and voice notes they asked for. {day_resets} {tail}"
            ),
            Self::Calls {
                person,
                calls,
                cap,
                frees_at,
            } => format!(
                "{verdict}: <@{person}>'s runs made {calls} Coder model calls in the last hour, the hourly cap (`access.maxClaudeCallsPerHour`, {cap}). A call frees up at {} UTC (in {}). {tail}",
                frees_at.format("%H:%M"),
                until(now, *frees_at)
            ),
            Self::Unreadable(why) => {
                format!("{verdict}: the spending caps cannot be checked ({why}). {tail}")
            }
        }
    }
}

impl CapRefusal {
    /// The line under a PM answer given by `model` (`productManager.overBudget`) because this
    /// daily cap is reached; `None` for a refusal that is no spending cap.
    pub fn over_budget_note(&self, model: &str, now: DateTime<Utc>) -> Option<String> {
        let cap = match self {
            Self::Repository { spent, cap } => {
                format!(
                    "this repository's daily cap (`access.maxCostPerDay`, ${cap:.2}; ${spent:.2} spent today)"
                )
            }
            Self::Person { person, spent, cap } => format!(
                "<@{person}>'s daily cap (`access.maxCostPerUserPerDay`, ${cap:.2}; ${spent:.2} spent today)"
            ),
            Self::Calls { .. } | Self::Unreadable(_) => return None,
        };
        Some(format!(
            "_Answered by `{model}` (`productManager.overBudget`): {cap} is reached, until 00:00 UTC (in {})._",
            until(now, next_midnight(now))
        ))
    }
}

/// The next 00:00 UTC after `now`.
fn next_midnight(now: DateTime<Utc>) -> DateTime<Utc> {
    let today = now.date_naive();
    let tomorrow = today.succ_opt().unwrap_or(today);
    tomorrow.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc()
}

/// The time from `now` to `then`, in hours and minutes ("3 h 05 min", "12 min").
fn until(now: DateTime<Utc>, then: DateTime<Utc>) -> String {
    let minutes =
        (then - now).num_minutes().max(0) + i64::from((then - now).num_seconds() % 60 > 0);
    match (minutes / 60, minutes % 60) {
        (0, m) => format!("{m} min"),
        (h, m) => format!("{h} h {m:02} min"),
    }
}

/// The start of the UTC day of `now`, as the store writes times.
fn day_start(now: DateTime<Utc>) -> String {
    now.date_naive()
        .and_hms_opt(0, 0, 0)
        .unwrap_or_default()
        .and_utc()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// Why `person` may not start a Coder run now, if a cap says so; `None` lets it start.
pub async fn refusal(
    store: &Store,
    caps: Caps,
    person: &str,
    now: DateTime<Utc>,
) -> Option<CapRefusal> {
    if let Some(refused) = spend_refusal(store, caps, person, now).await {
        return Some(refused);
    }
    calls_refusal(store, caps, person, now).await
}

/// Which daily spending cap (the repository's, then `person`'s) is reached now, if one is:
/// what makes the PM answer with `productManager.overBudget`'s model.
pub async fn spend_refusal(
    store: &Store,
    caps: Caps,
    person: &str,
    now: DateTime<Utc>,
) -> Option<CapRefusal> {
    let since = day_start(now);
    if caps.per_day > 0.0 {
        match store.spend_since(&since).await {
            Ok(spent) if spent >= caps.per_day => {
                return Some(CapRefusal::Repository {
                    spent,
                    cap: caps.per_day,
                });
            }
            Ok(_) => {}
            Err(e) => return Some(CapRefusal::Unreadable(e.to_string())),
        }
    }
    if caps.per_user_per_day > 0.0 {
        match store.person_spend_since(person, &since).await {
            Ok(spent) if spent >= caps.per_user_per_day => {
                return Some(CapRefusal::Person {
                    person: person.to_owned(),
                    spent,
                    cap: caps.per_user_per_day,
                });
            }
            Ok(_) => {}
            Err(e) => return Some(CapRefusal::Unreadable(e.to_string())),
        }
    }
    None
}

/// Whether `person`'s runs made `access.maxClaudeCallsPerHour` Coder calls in the last hour.
async fn calls_refusal(
    store: &Store,
    caps: Caps,
    person: &str,
    now: DateTime<Utc>,
) -> Option<CapRefusal> {
    if caps.calls_per_hour > 0 {
        let hour_ago =
            (now - Duration::hours(1)).to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        match store.person_coder_calls_since(person, &hour_ago).await {
            Ok((calls, earliest)) if calls >= i64::from(caps.calls_per_hour) => {
                let earliest = earliest
                    .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
                    .map_or(now, |t| t.with_timezone(&Utc));
                return Some(CapRefusal::Calls {
                    person: person.to_owned(),
                    calls,
                    cap: caps.calls_per_hour,
                    frees_at: earliest + Duration::hours(1),
                });
            }
            Ok(_) => {}
            Err(e) => return Some(CapRefusal::Unreadable(e.to_string())),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn each_refusal_names_its_cap_its_figure_and_when_it_resets() {
        let now = at("2026-11-28T14:25:30Z");
        assert_eq!(
            CapRefusal::Repository {
                spent: 5.126,
                cap: 5.0
            }
            .markdown(now),
            "Not started: this repository's daily cap (`access.maxCostPerDay`, $5.00) is reached: $5.13 spent today. It resets at 00:00 UTC (in 9 h 35 min). The plan stays as it is: approve it again once the cap allows."
        );
        assert_eq!(
            CapRefusal::Person {
                person: "U1".into(),
                spent: 2.0,
                cap: 2.0
            }
            .markdown(now),
            "Not started: <@U1>'s daily cap (`access.maxCostPerUserPerDay`, $2.00) is reached: $2.00 spent today on the runs they started and the images and voice notes they asked for. It resets at 00:00 UTC (in 9 h 35 min). The plan stays as it is: approve it again once the cap allows."
        );
        assert_eq!(
            CapRefusal::Calls {
                person: "U1".into(),
                calls: 20,
                cap: 20,
                frees_at: at("2026-11-28T14:40:00Z"),
            }
            .markdown(now),
            "Not started: <@U1>'s runs made 20 Coder model calls in the last hour, the hourly cap (`access.maxClaudeCallsPerHour`, 20). A call frees up at 14:40 UTC (in 15 min). The plan stays as it is: approve it again once the cap allows."
        );
    }

    #[test]
    fn an_over_budget_answer_names_its_model_and_the_cap() {
        let now = at("2026-11-28T22:30:00Z");
        let over = CapRefusal::Repository {
            spent: 5.5,
            cap: 5.0,
        };
        assert_eq!(
            over.over_budget_note("cheap/model", now).as_deref(),
            Some(
                "_Answered by `cheap/model` (`productManager.overBudget`): this repository's daily cap (`access.maxCostPerDay`, $5.00; $5.50 spent today) is reached, until 00:00 UTC (in 1 h 30 min)._"
            )
        );
        let unreadable = CapRefusal::Unreadable("store down".into());
        assert_eq!(unreadable.over_budget_note("cheap/model", now), None);
    }

    #[test]
    fn the_day_starts_and_ends_at_midnight_utc() {
        let now = at("2026-12-31T23:59:00Z");
        assert_eq!(next_midnight(now), at("2027-01-01T00:00:00Z"));
        assert_eq!(day_start(now), "2026-12-31T00:00:00.000000Z");
        assert_eq!(until(now, next_midnight(now)), "1 min");
    }
}

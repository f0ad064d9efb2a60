//! The weekly cost summary (`reports.weekly`): once the week's Monday 09:00 UTC has passed,
//! the last full week's spend (Monday to Sunday, UTC) is posted in the repository's channel
//! — per person (who started the thread), per model, and the most expensive threads. A
//! week without model calls posts nothing.
//!
//! Exactly once: the post is recorded through the outbox together with a step of the
//! channel's top level (`weekly-report <Monday>`), which [`crate::store::Change::StepDone`]
//! records only once, so a restart, a second look or a second instance on a shared store
//! never posts it again. The service looks when it starts and then every hour; a service
//! that was down on Monday posts the week when it comes back, later that week.

use std::fmt::Write;
use std::time::Duration;

use chrono::{DateTime, Datelike, Days, NaiveDate, NaiveTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::domain::{Costs, Line, ThreadKey, ThreadSpend, thread_title};
use crate::slack::effects::Effects;
use crate::slack::outbox::Outbox;
use crate::store::{Change, Store, StoreError};

/// How often the service looks whether a report is due.
pub const LOOK_EVERY: Duration = Duration::from_secs(3600);

/// The hour (UTC) on Monday from which last week's report is due.
const DUE_HOUR: u32 = 9;

/// How many of the week's most expensive threads the report names.
const TOP_THREADS: i64 = 5;

/// The Monday (UTC) of the week whose report is due at `now`: the last full week once this
/// week's Monday 09:00 has passed, else the one before it.
pub fn week_due(now: DateTime<Utc>) -> NaiveDate {
    let today = now.date_naive();
    let this_monday = today - Days::new(u64::from(today.weekday().num_days_from_monday()));
    let due_at = this_monday.and_time(NaiveTime::MIN) + chrono::Duration::hours(DUE_HOUR.into());
    if now.naive_utc() >= due_at {
        this_monday - Days::new(7)
    } else {
        this_monday - Days::new(14)
    }
}

/// The week starting `monday` as the store's bounds: RFC 3339 times, the end exclusive.
pub fn bounds(monday: NaiveDate) -> (String, String) {
    let at = |day: NaiveDate| format!("{day}T00:00:00Z");
    (at(monday), at(monday + Days::new(7)))
}

/// The report's text for the week starting `monday`: its totals (`costs`, of this
/// repository's calls that week) and its most expensive `threads`; `None` without calls.
pub fn render(monday: NaiveDate, costs: &Costs, threads: &[ThreadSpend]) -> Option<String> {
    if costs.total.calls == 0 {
        return None;
    }
    let sunday = monday + Days::new(6);
    let mut text = format!(
        "**Weekly costs, {monday} to {sunday} (UTC):** {} in {} model call{}.\n",
        dollars(costs.total.cost_usd),
        costs.total.calls,
        if costs.total.calls == 1 { "" } else { "s" }
    );
    section(
        &mut text,
        "Per person (who started the thread)",
        &costs.by_person,
    );
    section(&mut text, "Per model", &costs.by_model);
    if !threads.is_empty() {
        text.push_str("\n**Most expensive threads**\n");
        for thread in threads {
            let title = thread_title(thread.first_message.as_deref());
            let _ = writeln!(
                text,
                "• `{}` {}{}: {} ({} call{})",
                thread.key.thread_ts,
                if title.is_empty() {
                    String::new()
                } else {
                    format!("“{title}” ")
                },
                thread
                    .started_by
                    .as_deref()
                    .map(|who| format!("by `{who}`"))
                    .unwrap_or_default(),
                dollars(thread.cost),
                thread.calls,
                if thread.calls == 1 { "" } else { "s" }
            );
        }
    }
    Some(text)
}

fn section(text: &mut String, heading: &str, lines: &[Line]) {
    let _ = write!(text, "\n**{heading}**\n");
    for line in lines {
        let _ = writeln!(
            text,
            "• `{}`: {} ({} call{})",
            line.key,
            dollars(line.cost_usd),
            line.calls,
            if line.calls == 1 { "" } else { "s" }
        );
    }
}

fn dollars(cost: f64) -> String {
    format!("${cost:.2}")
}

/// The weekly report of one repository's channel.
#[derive(Clone, Debug)]
pub struct WeeklyReport {
    pub store: Store,
    pub outbox: Outbox,
    pub channel: String,
    /// The repository's name, for its line in the totals.
    pub repository: String,
}

impl WeeklyReport {
    /// Looks now and then every [`LOOK_EVERY`] until `stop`.
    pub async fn run(self, stop: CancellationToken) {
        loop {
            match self.post_due(Utc::now()).await {
                Ok(Some(week)) => {
                    tracing::info!("weekly report: posted the week of {week}");
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("weekly report: {e}"),
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(LOOK_EVERY) => {}
            }
        }
    }

    /// Posts the report due at `now` unless it was posted already or the week had no
    /// calls; returns the week's Monday when it posted it.
    pub async fn post_due(&self, now: DateTime<Utc>) -> Result<Option<NaiveDate>, StoreError> {
        let top = ThreadKey {
            channel: self.channel.clone(),
            thread_ts: String::new(),
        };
        // What a stop cut off before it reached Slack goes first.
        if !self.store.unsent(&top).await?.is_empty() {
            self.outbox.deliver(&top).await;
        }
        let week = week_due(now);
        let step = format!("weekly-report {week}");
        if self.store.step_done(&top, &step).await? {
            return Ok(None);
        }
        let (from, to) = bounds(week);
        let rows = self.store.spend_between(&from, &to).await?;
        let costs = Costs::of(&[(self.repository.clone(), rows)]);
        let threads = self
            .store
            .costliest_threads(&from, &to, TOP_THREADS)
            .await?;
        let Some(text) = render(week, &costs, &threads) else {
            return Ok(None);
        };
        let effects = Effects::new(&top).reply(&text, "");
        let changes = [Change::StepDone {
            thread: &top,
            step: &step,
        }];
        if !self.store.commit(&changes, &effects.intents()).await? {
            return Ok(None);
        }
        self.outbox.deliver(&top).await;
        Ok(Some(week))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::SpendRow;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    fn day(text: &str) -> NaiveDate {
        text.parse().unwrap()
    }

    #[test]
    fn last_weeks_report_is_due_from_monday_nine_utc() {
        // 2026-11-23 is a Monday.
        assert_eq!(week_due(at("2026-11-23T08:59:59Z")), day("2026-11-09"));
        assert_eq!(week_due(at("2026-11-23T09:00:00Z")), day("2026-11-16"));
        assert_eq!(week_due(at("2026-11-29T23:59:59Z")), day("2026-11-16"));
        assert_eq!(week_due(at("2026-11-30T10:00:00Z")), day("2026-11-23"));
        assert_eq!(
            bounds(day("2026-11-16")),
            (
                "2026-11-16T00:00:00Z".to_owned(),
                "2026-11-23T00:00:00Z".to_owned()
            )
        );
    }

    #[test]
    fn the_report_names_people_models_and_the_costliest_threads() {
        let row = |model: &str, person: Option<&str>, cost: f64| SpendRow {
            day: "2026-11-17".into(),
            model: model.into(),
            role: "pm".into(),
            person: person.map(str::to_owned),
            calls: 2,
            tokens: 100,
            cost,
        };
        let costs = Costs::of(&[(
            "api".into(),
            vec![
                row("m/big", Some("U0ALICE"), 3.0),
                row("m/cheap", None, 0.5),
            ],
        )]);
        let threads = [ThreadSpend {
            key: ThreadKey {
                channel: "C1".into(),
                thread_ts: "1.1".into(),
            },
            started_by: Some("U0ALICE".into()),
            first_message: Some("fix the login\nmore".into()),
            calls: 2,
            cost: 3.0,
        }];
        let text = render(day("2026-11-16"), &costs, &threads).unwrap();
        assert_eq!(
            text,
            "**Weekly costs, 2026-11-16 to 2026-11-22 (UTC):** $3.50 in 4 model calls.\n\
             \n**Per person (who started the thread)**\n\
             • `U0ALICE`: $3.00 (2 calls)\n\
             • `unknown`: $0.50 (2 calls)\n\
             \n**Per model**\n\
             • `m/big`: $3.00 (2 calls)\n\
             • `m/cheap`: $0.50 (2 calls)\n\
             \n**Most expensive threads**\n\
             • `1.1` “fix the login” by `U0ALICE`: $3.00 (2 calls)\n"
        );
        assert_eq!(
            render(day("2026-11-16"), &Costs::of(&[]), &[]),
            None,
            "a week without calls says nothing"
        );
    }
}

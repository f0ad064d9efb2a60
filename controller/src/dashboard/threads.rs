//! The threads page: each repository's threads, newest change first — state, who started
//! it, its title, pull request, cost and age. The title is the first line of the thread's
//! first message, cut ([`crate::domain::thread_title`]): enough to tell threads apart,
//! and no more of what people wrote in Slack than a glance needs (the rest, and every
//! prompt, stays off the dashboard).

use std::fmt::Write;

use chrono::{DateTime, Utc};

use super::html::{dollars, escape, table};
use crate::domain::{ThreadOverview, thread_title};

/// The most threads listed per repository.
pub const THREADS_LISTED: i64 = 200;

/// How long ago `since` (RFC 3339) was at `now`: `42s`, `5m`, `3h`, `2d`; `?` when it does
/// not parse.
pub fn age(since: &str, now: DateTime<Utc>) -> String {
    let Ok(since) = DateTime::parse_from_rfc3339(since) else {
        return "?".into();
    };
    let secs = (now - since.with_timezone(&Utc)).num_seconds().max(0);
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// One repository's section of the threads page.
pub fn section(
    name: &str,
    channel: &str,
    threads: &[ThreadOverview],
    now: DateTime<Utc>,
) -> String {
    let mut html = String::new();
    let _ = write!(
        html,
        "<h2>{} <small>({} thread{}, channel {})</small></h2>",
        escape(name),
        threads.len(),
        if threads.len() == 1 { "" } else { "s" },
        escape(channel)
    );
    let rows: Vec<Vec<String>> = threads
        .iter()
        .map(|t| {
            let pr = t.pull_request.as_ref().map_or_else(String::new, |pr| {
                format!(
                    "<a href=\"{}\">#{}</a>",
                    escape(&safe_link(&pr.url)),
                    pr.number
                )
            });
            vec![
                escape(&t.key.thread_ts),
                escape(t.stage.as_str()),
                escape(t.started_by.as_deref().unwrap_or("")),
                escape(&thread_title(t.first_message.as_deref())),
                pr,
                dollars(t.cost),
                escape(&age(&t.created_at, now)),
            ]
        })
        .collect();
    html.push_str(&table(
        &["thread", "state", "who", "title", "PR", "cost", "age"],
        &rows,
        &[5, 6],
    ));
    html
}

/// `url` when it is a web address, else `#`: a stored link never becomes `javascript:`.
fn safe_link(url: &str) -> String {
    if url.starts_with("https://") || url.starts_with("http://") {
        url.to_owned()
    } else {
        "#".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_in_the_largest_unit() {
        let now = DateTime::parse_from_rfc3339("2026-11-28T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(age("2026-11-28T11:59:30Z", now), "30s");
        assert_eq!(age("2026-11-28T09:00:00Z", now), "3h");
        assert_eq!(age("2026-11-25T12:00:00Z", now), "3d");
        assert_eq!(age("garbage", now), "?");
        assert_eq!(safe_link("javascript:alert(1)"), "#");
    }
}

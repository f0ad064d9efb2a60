//! Costs per day, model, role, repository and person: spend rows summed along each, for the
//! dashboard's costs page and `/api/costs` and the weekly report. Pure: rows in, totals out.

use std::collections::BTreeMap;

use serde::Serialize;

use super::SpendRow;

/// What a person is called when the thread's first message is not stored.
pub const UNKNOWN_PERSON: &str = "unknown";

/// Model calls summed along one key.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Line {
    /// The day, model, role, repository or person.
    pub key: String,
    pub calls: i64,
    pub tokens: i64,
    /// USD.
    pub cost_usd: f64,
}

/// Every total the costs page shows (`/api/costs` is this as JSON).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Costs {
    pub total: Line,
    /// Oldest day first.
    pub by_day: Vec<Line>,
    /// The others most expensive first.
    pub by_model: Vec<Line>,
    pub by_role: Vec<Line>,
    pub by_repository: Vec<Line>,
    pub by_person: Vec<Line>,
}

impl Costs {
    /// The totals of `repos`' spend rows (repository name, its rows).
    pub fn of(repos: &[(String, Vec<SpendRow>)]) -> Costs {
        sum(repos)
    }
}

fn sum(repos: &[(String, Vec<SpendRow>)]) -> Costs {
    let mut day = BTreeMap::new();
    let mut model = BTreeMap::new();
    let mut role = BTreeMap::new();
    let mut repository = BTreeMap::new();
    let mut person = BTreeMap::new();
    let mut total = Line {
        key: "all".into(),
        ..Line::default()
    };
    for (name, rows) in repos {
        // A repository with no calls still has its line.
        repository.entry(name.clone()).or_insert_with(Line::default);
        for row in rows {
            for (map, key) in [
                (&mut day, row.day.as_str()),
                (&mut model, row.model.as_str()),
                (&mut role, row.role.as_str()),
                (&mut repository, name.as_str()),
                (&mut person, row.person.as_deref().unwrap_or(UNKNOWN_PERSON)),
            ] {
                add(map.entry(key.to_owned()).or_default(), row);
            }
            add(&mut total, row);
        }
    }
    Costs {
        total,
        by_day: lines(day),
        by_model: most_expensive_first(lines(model)),
        by_role: most_expensive_first(lines(role)),
        by_repository: most_expensive_first(lines(repository)),
        by_person: most_expensive_first(lines(person)),
    }
}

fn add(line: &mut Line, row: &SpendRow) {
    line.calls += row.calls;
    line.tokens += row.tokens;
    line.cost_usd += row.cost;
}

/// The map's lines in key order, each named by its key.
fn lines(map: BTreeMap<String, Line>) -> Vec<Line> {
    map.into_iter()
        .map(|(key, line)| Line { key, ..line })
        .collect()
}

fn most_expensive_first(mut lines: Vec<Line>) -> Vec<Line> {
    lines.sort_by(|a, b| b.cost_usd.total_cmp(&a.cost_usd).then(a.key.cmp(&b.key)));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(day: &str, model: &str, role: &str, person: Option<&str>, cost: f64) -> SpendRow {
        SpendRow {
            day: day.into(),
            model: model.into(),
            role: role.into(),
            person: person.map(str::to_owned),
            calls: 2,
            tokens: 10,
            cost,
        }
    }

    #[test]
    fn sums_along_each_key() {
        let costs = Costs::of(&[
            (
                "api".into(),
                vec![
                    row("2026-11-27", "m/big", "coder", Some("U1"), 2.0),
                    row("2026-11-28", "m/cheap", "pm", Some("U2"), 0.5),
                ],
            ),
            (
                "web".into(),
                vec![row("2026-11-28", "m/cheap", "pm", None, 0.25)],
            ),
            ("idle".into(), vec![]),
        ]);
        assert_eq!(costs.total.cost_usd, 2.75);
        assert_eq!(costs.total.calls, 6);
        let keys = |lines: &[Line]| lines.iter().map(|l| l.key.clone()).collect::<Vec<_>>();
        assert_eq!(keys(&costs.by_day), ["2026-11-27", "2026-11-28"]);
        assert_eq!(costs.by_day[1].cost_usd, 0.75);
        assert_eq!(keys(&costs.by_model), ["m/big", "m/cheap"]);
        assert_eq!(keys(&costs.by_repository), ["api", "web", "idle"]);
        assert_eq!(keys(&costs.by_person), ["U1", "U2", UNKNOWN_PERSON]);
        assert_eq!(keys(&costs.by_role), ["coder", "pm"]);
    }
}

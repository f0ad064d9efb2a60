//! A thread's Coder budget: the cap its Coder runs under (`coder.maxCostPerThread`, or what
//! someone typed in the thread with "budget $N"), the estimate shown with a plan, and the
//! refusal the hub gives once the cap is reached.
//!
//! Pure where it can be (parsing, the median, the words people read); the two functions that
//! read the store are thin. The cap is kept in the store, not in the hub, so a budget raised
//! while a Coder runs applies to its next model call.

use super::Gateway;
use crate::domain::ThreadKey;
use crate::store::Store;

/// The words that start a budget refusal; [`plain_ending`] finds them in a run's ending.
pub const BUDGET_REACHED: &str = "Budget reached:";

/// A typed budget command: "budget $5", "budget: 5", "set budget to $7.50", "budget 0" (no
/// cap). Mentions, case and a trailing full stop are ignored; anything else is not one.
pub fn parse_budget_command(text: &str) -> Option<f64> {
    let words: Vec<String> = text
        .split_whitespace()
        .filter(|w| !(w.starts_with("<@") && w.ends_with('>')))
        .filter(|w| !w.to_lowercase().starts_with("@codebutler"))
        .map(str::to_lowercase)
        .collect();
    let text = words.join(" ");
    let text = text.trim_end_matches(['.', '!']);
    let rest = text
        .strip_prefix("set the budget")
        .or_else(|| text.strip_prefix("set budget"))
        .or_else(|| text.strip_prefix("budget"))?;
    let rest = rest.trim_start();
    let rest = rest
        .strip_prefix("to ")
        .or_else(|| rest.strip_prefix(':'))
        .or_else(|| rest.strip_prefix('='))
        .unwrap_or(rest)
        .trim();
    let rest = rest
        .strip_suffix("usd")
        .or_else(|| rest.strip_suffix("dollars"))
        .unwrap_or(rest)
        .trim();
    let amount = rest.strip_prefix('$').unwrap_or(rest).trim_start();
    if amount.is_empty()
        || !amount.chars().all(|c| c.is_ascii_digit() || c == '.')
        || amount.matches('.').count() > 1
        || !amount.chars().any(|c| c.is_ascii_digit())
    {
        return None;
    }
    let value: f64 = amount.parse().ok()?;
    value.is_finite().then_some(value)
}

/// Dollars as people read them: cents for amounts of a cent or more, else as many decimals
/// as it takes (up to six), so a tiny budget is not shown as $0.00.
pub fn usd(amount: f64) -> String {
    if amount >= 0.01 || amount == 0.0 {
        return format!("${amount:.2}");
    }
    let text = format!("{amount:.6}");
    let text = text.trim_end_matches('0');
    format!("${text}")
}

/// The cap in words: "$10.00", or "no cap" for 0.
pub fn cap_text(cap: f64) -> String {
    if cap > 0.0 {
        usd(cap)
    } else {
        "no cap".to_owned()
    }
}

/// What a run will probably cost, from this repository's earlier completed runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Estimate {
    /// The median cost of `runs` earlier completed runs.
    Median { usd: f64, runs: usize },
    /// No completed run yet: a typical run at the Coder model's prices.
    Typical { usd: f64 },
    /// No completed run yet to go by, and no price for the model.
    NoHistory,
}

impl Estimate {
    /// The median of `costs` (the latest completed runs' costs).
    pub fn from_costs(costs: &[f64]) -> Self {
        let mut sorted: Vec<f64> = costs.iter().copied().filter(|c| c.is_finite()).collect();
        if sorted.is_empty() {
            return Self::NoHistory;
        }
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        let median = if sorted.len() % 2 == 0 {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        } else {
            sorted[mid]
        };
        Self::Median {
            usd: median,
            runs: sorted.len(),
        }
    }
}

/// The cost lines of a plan message (Markdown): the estimate and the cap it will run under.
pub fn cost_markdown(estimate: &Estimate, cap: f64) -> String {
    let estimate = match estimate {
        Estimate::Median { usd: cost, runs: 1 } => {
            format!(
                "about {} (the cost of the one earlier run here)",
                usd(*cost)
            )
        }
        Estimate::Median { usd: cost, runs } => {
            format!("about {} (median of the last {runs} runs here)", usd(*cost))
        }
        Estimate::Typical { usd: cost } => format!(
            "about {} (a typical run at this model's prices; no earlier runs here yet)",
            usd(*cost)
        ),
        Estimate::NoHistory => "no estimate yet (no earlier runs in this repository)".to_owned(),
    };
    format!(
        "💰 **Estimate:** {estimate} · **Budget:** {} for this thread (type `budget $N` to change it)",
        cap_text(cap)
    )
}

/// The reply to a typed budget command.
pub fn budget_set_reply(cap: f64, coder_running: bool) -> String {
    let applies = if coder_running {
        "It applies to the running Coder from its next step."
    } else {
        "Approving the plan approves this budget too."
    };
    format!("Budget for this thread set to {}. {applies}", cap_text(cap))
}

/// The refusal once the thread's Coder has spent its cap.
pub fn reached_text(spent: f64, cap: f64) -> String {
    format!(
        "{BUDGET_REACHED} this thread's Coder has spent {} of its {} budget, so it stopped. \
         To go on, raise the budget by typing `budget $N` in this thread (new threads start \
         with coder.maxCostPerThread).",
        usd(spent),
        usd(cap)
    )
}

/// A run's ending as the thread should read it: a budget refusal without the runner's
/// "model failed: the controller refused the model call:" in front; `None` for other endings.
pub fn plain_ending(ending: &str) -> Option<String> {
    ending
        .find(BUDGET_REACHED)
        .map(|at| ending[at..].to_owned())
}

/// Why the thread's next Coder model call must not be made, if its budget is spent. Fails
/// closed: a budget that cannot be checked refuses.
pub async fn refusal(store: &Store, thread: &ThreadKey) -> Option<String> {
    let cap = match store.thread_budget(thread).await {
        Ok(Some(cap)) if cap > 0.0 => cap,
        Ok(_) => return None,
        Err(e) => return Some(format!("cannot check this thread's budget: {e}")),
    };
    match store.thread_coder_cost(thread).await {
        Ok(spent) if spent >= cap => Some(reached_text(spent, cap)),
        Ok(_) => None,
        Err(e) => Some(format!("cannot check this thread's spending: {e}")),
    }
}

/// The estimate for a new plan: from this repository's earlier runs in the store, else a
/// typical run at the Coder `model`'s prices. Errors are logged and shown as no estimate
/// rather than failing the plan.
pub async fn estimate(store: &Store, gateway: &Gateway, model: &str) -> Estimate {
    let from_history = match store.completed_run_costs().await {
        Ok(costs) => Estimate::from_costs(&costs),
        Err(e) => {
            tracing::warn!("read earlier run costs for an estimate: {e}");
            Estimate::NoHistory
        }
    };
    if from_history != Estimate::NoHistory {
        return from_history;
    }
    match gateway.pricing(model).await {
        Ok(Some(pricing)) => Estimate::Typical {
            usd: crate::gateway::pricing::typical_run_cost(&pricing),
        },
        Ok(None) => Estimate::NoHistory,
        Err(e) => {
            tracing::warn!("read {model}'s prices for an estimate: {e}");
            Estimate::NoHistory
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_commands_in_their_usual_forms() {
        for (text, cap) in [
            ("budget $5", 5.0),
            ("Budget: 5", 5.0),
            ("set budget to $7.50", 7.5),
            ("set the budget to 7.5 USD.", 7.5),
            ("<@U0BOT> budget $0.00015", 0.00015),
            ("budget = 12", 12.0),
            ("budget 0", 0.0),
        ] {
            assert_eq!(parse_budget_command(text), Some(cap), "{text:?}");
        }
        for text in [
            "budget",
            "budget $",
            "budget -5",
            "budget $5 and fix the tests",
            "what is the budget?",
            "the budget is 5",
            "budget 1.2.3",
            "yes",
        ] {
            assert_eq!(parse_budget_command(text), None, "{text:?}");
        }
    }

    #[test]
    fn money_is_shown_in_cents_unless_it_is_less_than_one() {
        assert_eq!(usd(10.0), "$10.00");
        assert_eq!(usd(7.5), "$7.50");
        assert_eq!(usd(0.00015), "$0.00015");
        assert_eq!(usd(0.0), "$0.00");
        assert_eq!(cap_text(0.0), "no cap");
    }

    #[test]
    fn the_estimate_is_the_median_of_earlier_runs() {
        assert_eq!(Estimate::from_costs(&[]), Estimate::NoHistory);
        assert_eq!(
            Estimate::from_costs(&[3.0, 1.0, 2.0]),
            Estimate::Median { usd: 2.0, runs: 3 }
        );
        assert_eq!(
            Estimate::from_costs(&[4.0, 1.0, 2.0, 3.0]),
            Estimate::Median { usd: 2.5, runs: 4 }
        );
    }

    #[test]
    fn cost_lines_say_what_is_known_and_the_cap() {
        assert_eq!(
            cost_markdown(&Estimate::NoHistory, 10.0),
            "💰 **Estimate:** no estimate yet (no earlier runs in this repository) · **Budget:** $10.00 for this thread (type `budget $N` to change it)"
        );
        assert!(
            cost_markdown(&Estimate::Median { usd: 0.84, runs: 3 }, 0.0)
                .contains("about $0.84 (median of the last 3 runs here) · **Budget:** no cap")
        );
    }

    #[test]
    fn a_budget_refusal_reads_plainly_in_the_thread() {
        let reason = reached_text(5.02, 5.0);
        let ending = format!("model failed: the controller refused the model call: {reason}");
        let plain = plain_ending(&ending).unwrap();
        assert!(plain.starts_with(
            "Budget reached: this thread's Coder has spent $5.02 of its $5.00 budget"
        ));
        assert!(plain.contains("`budget $N`"));
        assert_eq!(plain_ending("stopped at the turn limit"), None);
    }
}

//! The usage report a thread gets when it closes (`plan-v2-long.md` §24.6): per role its
//! calls, turns, tokens, cached tokens, cost and wall time; the PM's tool counts; "behind
//! the scenes", every Coder question numbered with how it was answered and by whom; and the
//! PM's tips for next time. Plain Markdown from plain data, so it is tested by snapshot.

use crate::domain::duration_text;

use super::usage::{RoleLine, ThreadUsage};

/// The PM's tips for next time.
#[derive(Clone, Debug, PartialEq)]
pub enum Tips {
    /// One to three tips.
    Some(Vec<String>),
    /// The PM found nothing to improve.
    Efficient,
    /// The PM's call failed or answered nonsense (logged); the report says so.
    Unavailable,
}

/// The report's Markdown: `title` is the thread's plan summary (or its first message).
pub fn render(title: &str, usage: &ThreadUsage, tips: &Tips) -> String {
    let mut text = format!("📊 **Thread summary: {}**\n", one_line(title));
    if usage.roles.is_empty() {
        text.push_str("\nNo model calls were made in this thread.\n");
    }
    for role in &usage.roles {
        text.push('\n');
        text.push_str(&role_block(role));
        if role.label == "PM" && !usage.pm_tools.is_empty() {
            let tools: Vec<String> = usage
                .pm_tools
                .iter()
                .map(|(name, n)| format!("{name} ×{n}"))
                .collect();
            text.push_str(&format!("- Tools used: {}\n", tools.join(", ")));
        }
    }
    text.push_str(&format!("\n**Total: {}**\n", cost(usage.total_cost())));
    if !usage.questions.is_empty() {
        text.push_str("\n**Behind the scenes: the Coder's questions**\n");
        for (n, q) in usage.questions.iter().enumerate() {
            let answer = match (&q.answer, q.answered_by.as_deref()) {
                (Some(answer), Some("pm")) => {
                    format!("{} (answered by the PM)", quoted(answer))
                }
                (Some(answer), Some(user)) => format!("{} (answered by <@{user}>)", quoted(answer)),
                (Some(answer), None) => quoted(answer),
                (None, _) => "not answered".into(),
            };
            text.push_str(&format!("{}. {} → {answer}\n", n + 1, quoted(&q.question)));
        }
        text.push_str("\nReply `correct N: <answer>` to fix a wrong answer.\n");
    }
    match tips {
        Tips::Some(tips) => {
            text.push_str("\n💡 **Tips for next time:**\n");
            for tip in tips {
                text.push_str(&format!("- {}\n", one_line(tip)));
            }
        }
        Tips::Efficient => text.push_str("\n✅ Efficient thread\n"),
        Tips::Unavailable => text.push_str("\n(tips unavailable)\n"),
    }
    text
}

/// One role's lines.
fn role_block(role: &RoleLine) -> String {
    let t = &role.totals;
    let calls = match role.turns {
        Some(turns) => format!("{} ({} turns)", t.calls, thousands(turns)),
        None => t.calls.to_string(),
    };
    let mut text = format!("**{}**\n- Calls: {calls}\n", role.label);
    text.push_str(&format!(
        "- Tokens: {} in → {} out ({} cached)\n",
        thousands(t.prompt_tokens),
        thousands(t.completion_tokens),
        thousands(t.cached_tokens)
    ));
    text.push_str(&format!("- Cost: {}\n", cost(t.cost)));
    if let Some(wall) = role.wall {
        text.push_str(&format!("- Wall time: {}\n", duration_text(wall)));
    }
    text
}

/// A dollar amount: three decimals under a dollar, two above.
pub fn cost(usd: f64) -> String {
    if usd < 1.0 {
        format!("${usd:.3}")
    } else {
        format!("${usd:.2}")
    }
}

/// `12,345`.
pub fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// `text` on one line, cut at 200 characters.
fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= 200 {
        return line;
    }
    let cut: String = line.chars().take(200).collect();
    format!("{cut}…")
}

/// `text` on one line, in quotes.
fn quoted(text: &str) -> String {
    format!("“{}”", one_line(text))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::domain::UsageTotals;
    use crate::journal::usage::AnsweredQuestion;

    fn totals(calls: i64, tokens: i64, cost: f64) -> UsageTotals {
        UsageTotals {
            calls,
            prompt_tokens: tokens,
            cached_tokens: tokens / 4,
            completion_tokens: tokens / 10,
            cost,
        }
    }

    fn usage() -> ThreadUsage {
        ThreadUsage {
            roles: vec![
                RoleLine {
                    label: "PM".into(),
                    totals: totals(4, 2340, 0.004),
                    turns: None,
                    wall: None,
                },
                RoleLine {
                    label: "Coder".into(),
                    totals: totals(5, 18_400, 0.62),
                    turns: Some(5),
                    wall: Some(Duration::from_secs(95)),
                },
                RoleLine {
                    label: "Memory extraction".into(),
                    totals: totals(1, 900, 0.0012),
                    turns: None,
                    wall: None,
                },
            ],
            pm_tools: vec![("ReadFile".into(), 3), ("Grep".into(), 2)],
            questions: vec![
                AnsweredQuestion {
                    question: "JWT or cookies?".into(),
                    answer: Some("JWT, as `docs/auth.md` says".into()),
                    answered_by: Some("pm".into()),
                },
                AnsweredQuestion {
                    question: "Keep the old endpoint?".into(),
                    answer: Some("no".into()),
                    answered_by: Some("U0ALICE".into()),
                },
            ],
        }
    }

    #[test]
    fn the_report_of_a_thread_with_questions_and_tips() {
        let tips = Tips::Some(vec![
            "Name the file when you know it: the PM read 3 files to find it.".into(),
        ]);
        insta::assert_snapshot!(render("Fix the login bug", &usage(), &tips));
    }

    #[test]
    fn an_efficient_thread_says_so_and_lists_no_questions() {
        let mut usage = usage();
        usage.questions.clear();
        usage.pm_tools.clear();
        usage.roles.truncate(2);
        insta::assert_snapshot!(render("Fix the login bug", &usage, &Tips::Efficient));
    }

    #[test]
    fn numbers_read_like_numbers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(-1000), "-1,000");
        assert_eq!(cost(0.0042), "$0.004");
        assert_eq!(cost(12.345), "$12.35");
    }
}

//! Attacks on the renderer's inertness, by equality: model text that tries to make Slack
//! markup (special mentions, links whose label shows another address) out of the
//! renderer's own machinery. Each of these once rendered live markup.

use super::test_support::{check_inert, snippets, texts};
use super::{MAX_MESSAGE_CHARS, Outgoing, markdown_to_mrkdwn, render_reply, split_message};

/// The renderer's former placeholder characters for reference brackets.
const OPEN: char = '\u{E000}';
const CLOSE: char = '\u{E001}';

#[test]
fn placeholder_characters_around_special_mentions_stay_text() {
    for mention in [
        "!channel",
        "!here",
        "!everyone",
        "!subteam^S123",
        "@U0ALICE",
    ] {
        let md = format!("hi {OPEN}{mention}{CLOSE} there");
        assert_eq!(markdown_to_mrkdwn(&md), md, "{mention}");
    }
}

#[test]
fn placeholder_characters_cannot_forge_a_link() {
    let md = format!("{OPEN}https://evil.example/x|https://good.example{CLOSE}");
    assert_eq!(markdown_to_mrkdwn(&md), md);
    // Inside a real reference's brackets, too.
    let md = format!("<@U0ALICE{CLOSE} {OPEN}!channel> ok");
    assert_eq!(
        markdown_to_mrkdwn(&md),
        format!("&lt;@U0ALICE{CLOSE} {OPEN}!channel&gt; ok")
    );
}

#[test]
fn placeholder_characters_in_every_place_a_model_writes() {
    let forged = format!("{OPEN}!channel{CLOSE}");
    let md = format!(
        "# {forged}\n\n> {forged}\n\n- {forged}\n\n| a |\n|---|\n| {forged} |\n\n`{forged}`\n\n\
         [{forged}](https://x.example/{forged})\n\n```\n{forged}\n```\n\n<div>{forged}</div>\n"
    );
    let out = markdown_to_mrkdwn(&md);
    check_inert(&out, &md);
    assert_eq!(out.matches('<').count(), 1, "only the link: {out}");
    for text in texts(&render_reply(&md, "*Coder:* ")) {
        check_inert(&text, &md);
        assert!(!text.contains("<!"), "{text}");
    }
}

#[test]
fn placeholder_characters_survive_in_snippets_verbatim() {
    let line = format!("let s = \"{OPEN}!here{CLOSE} <@U0ALICE>\";\n");
    let md = format!("```rust\n{}```\n", line.repeat(20));
    let out = render_reply(&md, "");
    let content = out.iter().find_map(|p| match p {
        Outgoing::Snippet { content, .. } => Some(content.clone()),
        Outgoing::Text(_) => None,
    });
    assert_eq!(content, Some(line.repeat(20)));
}

#[test]
fn references_are_live_only_in_prose() {
    assert_eq!(
        markdown_to_mrkdwn("ask <@U0ALICE>, `<@U0ALICE>` and [<@U0ALICE>](https://x.example)"),
        "ask <@U0ALICE>, `&lt;@U0ALICE&gt;` and <https://x.example|&lt;@U0ALICE&gt;>"
    );
    assert_eq!(
        markdown_to_mrkdwn("| who |\n|---|\n| <@U0ALICE> |\n"),
        "```\nwho\n----------\n&lt;@U0ALICE&gt;\n```"
    );
    assert_eq!(
        markdown_to_mrkdwn("[x](<@U0ALICE>)"),
        "x (&lt;@U0ALICE&gt;)"
    );
}

#[test]
fn a_label_showing_another_address_is_not_a_link_label() {
    assert_eq!(
        markdown_to_mrkdwn("[https://good.example/login](https://evil.example/login)"),
        "https://good.example/login (<https://evil.example/login>)"
    );
    assert_eq!(
        markdown_to_mrkdwn("log in at [good.example](https://evil.example)"),
        "log in at good.example (<https://evil.example>)"
    );
    assert_eq!(
        markdown_to_mrkdwn("[www.good.example](https://good.example.evil.example/)"),
        "www.good.example (<https://good.example.evil.example/>)"
    );
    assert_eq!(
        markdown_to_mrkdwn("[admin@good.example](mailto:admin@evil.example)"),
        "admin@good.example (<mailto:admin@evil.example>)"
    );
    assert_eq!(
        markdown_to_mrkdwn("![https://good.example](https://evil.example/a.png)"),
        "https://good.example (<https://evil.example/a.png>)"
    );
    // Full-width dots read as dots in a browser.
    assert_eq!(
        markdown_to_mrkdwn("[good。example](https://evil.example)"),
        "good。example (<https://evil.example>)"
    );
    // Found by the render fuzz target: characters a person cannot see do not hide an address.
    assert_eq!(
        markdown_to_mrkdwn("[www.good.exa\u{200B}mple](https://evil.example)"),
        "www.good.exa\u{200B}mple (<https://evil.example>)"
    );
    assert_eq!(
        markdown_to_mrkdwn("![www.good.exam\0\u{1}ple](https://evil.example/i.png)"),
        "www.good.exam\u{FFFD}\u{1}ple (<https://evil.example/i.png>)"
    );
    assert_eq!(
        markdown_to_mrkdwn("[http'://good.example/login](https://evil.example/login)"),
        "http'://good.example/login (<https://evil.example/login>)"
    );
    // Found by the render fuzz target: formatting marks split words as Slack shows them.
    assert_eq!(
        markdown_to_mrkdwn("[see`www.good.example`](https://evil.example)"),
        "see`www.good.example` (<https://evil.example>)"
    );
    // The user part of a URL is not its host.
    assert_eq!(
        markdown_to_mrkdwn("[good.example](https://good.example@evil.example/)"),
        "good.example (<https://good.example@evil.example/>)"
    );
}

#[test]
fn links_inside_link_labels_are_their_labels() {
    // Found by the render fuzz target: an autolink inside a link's label made a link inside
    // a link.
    assert_eq!(
        markdown_to_mrkdwn("[write <me@x.example> now](https://x.example/contact)"),
        "<https://x.example/contact|write me@x.example now>"
    );
    // What an inner link or image shows counts as the outer label's text.
    assert_eq!(
        markdown_to_mrkdwn("[see <https://good.example> now](https://evil.example)"),
        "see https://good.example now (<https://evil.example>)"
    );
    assert_eq!(
        markdown_to_mrkdwn("[![good.example](https://x.example/i.png)](https://evil.example)"),
        "good.example (<https://evil.example>)"
    );
}

#[test]
fn a_label_showing_its_own_address_stays_a_link_label() {
    assert_eq!(
        markdown_to_mrkdwn("[example.com](https://www.example.com/docs)"),
        "<https://www.example.com/docs|example.com>"
    );
    assert_eq!(
        markdown_to_mrkdwn("[the docs at docs.rs](https://docs.rs/tokio)"),
        "<https://docs.rs/tokio|the docs at docs.rs>"
    );
    assert_eq!(
        markdown_to_mrkdwn("[the docs](https://docs.rs/tokio)"),
        "<https://docs.rs/tokio|the docs>"
    );
}

#[test]
fn only_web_and_mail_links_are_links() {
    assert_eq!(
        markdown_to_mrkdwn("[open](javascript:alert(1))"),
        "open (javascript:alert(1))"
    );
    assert_eq!(
        markdown_to_mrkdwn("[call](slack://app?id=1)"),
        "call (slack://app?id=1)"
    );
}

#[test]
fn link_targets_cannot_open_a_code_fence() {
    let out = markdown_to_mrkdwn("[x](https://x.example/```)\n\nafter");
    assert_eq!(out, "<https://x.example/%60%60%60|x>\n\nafter");
}

#[test]
fn overlong_references_are_text() {
    let id = "A".repeat(40);
    assert_eq!(
        markdown_to_mrkdwn(&format!("<@U{id}>")),
        format!("&lt;@U{id}&gt;")
    );
    let name = "n".repeat(100);
    assert_eq!(
        markdown_to_mrkdwn(&format!("<#C1|{name}>")),
        format!("&lt;#C1|{name}&gt;")
    );
    assert_eq!(markdown_to_mrkdwn("<#C1|a\nb>"), "&lt;#C1|a\nb&gt;");
}

#[test]
fn a_long_line_is_never_cut_inside_a_link() {
    let link = "<https://example.com/a/b|the docs on how we deploy to staging>";
    let mention = "<@U0ALICE>";
    let line = format!(
        "{} {link} and {mention} then {}",
        "word ".repeat(12),
        "more ".repeat(12)
    );
    // Room for the markup and what a cut keeps in reserve (a fence and its quote prefix).
    for max in link.chars().count() + 12..line.chars().count() {
        let chunks = split_message(&line, max);
        for markup in [link, mention] {
            assert!(
                chunks.iter().any(|c| c.contains(markup)),
                "max {max}: {markup} was cut: {chunks:?}"
            );
        }
    }
}

#[test]
fn every_rendered_chunk_of_a_hostile_answer_is_inert() {
    let hostile = format!(
        "{OPEN}!channel{CLOSE} <!here> &lt;!everyone&gt; <@U0ALICE> <#C0DEV|dev>\n\n\
         [https://good.example]({OPEN}https://evil.example{CLOSE})\n\n\
         <https://evil.example|https://good.example>\n\n{}",
        format!("[a{OPEN}](https://x.example/{CLOSE}) ").repeat(400)
    );
    let out = render_reply(&hostile, "*PM:* ");
    for text in texts(&out) {
        assert!(text.chars().count() <= MAX_MESSAGE_CHARS);
        check_inert(&text, &hostile);
    }
    assert!(snippets(&out).is_empty());
}

/// Small deterministic PRNG for the property test.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Pieces of hostile and ordinary Markdown, glued at random.
const PIECES: &[&str] = &[
    "\u{E000}",
    "\u{E001}",
    "\u{E000}!channel\u{E001}",
    "\u{E000}0\u{E001}",
    "<!here>",
    "<!everyone>",
    "<@U0ALICE>",
    "<#C0DEV|dev>",
    "<@U0ALICE",
    "&lt;!channel&gt;",
    "[https://good.example](https://evil.example)",
    "[docs](https://docs.example/a b)",
    "[x](<@U0ALICE>)",
    "![good.example](https://evil.example/i.png)",
    "<https://evil.example|https://good.example>",
    "<me@example.com>",
    "`<@U0ALICE>`",
    "```\n",
    "```rust\n",
    "\n",
    "\n\n",
    "> ",
    "- ",
    "1. ",
    "| a | b |\n|---|---|\n| <@U0ALICE> | \u{E000}!here\u{E001} |\n",
    "**bold** ",
    "_it_ ",
    "word ",
    "a very long line of prose that goes on ",
    "<div>\u{E000}!channel\u{E001}</div>",
    "\0",
    "é",
];

#[test]
fn property_every_chunk_of_any_answer_is_inert_and_fits() {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    for round in 0..400 {
        let mut md = String::new();
        for _ in 0..rng.below(300) + 1 {
            md.push_str(PIECES[rng.below(PIECES.len())]);
            if rng.below(40) == 0 {
                md.push_str(&"x".repeat(rng.below(5000)));
            }
        }
        let out = render_reply(&md, "*PM:* ");
        for text in texts(&out) {
            assert!(text.chars().count() <= MAX_MESSAGE_CHARS, "round {round}");
            assert_eq!(
                text.matches("```").count() % 2,
                0,
                "round {round}: {text:?}"
            );
            check_inert(&text, &md);
        }
        for (name, filetype) in snippets(&out) {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-+@".contains(c)),
                "round {round}: {name:?}"
            );
            assert!(!filetype.is_empty());
        }
        check_inert(&markdown_to_mrkdwn(&md), &md);
    }
}

//! The pages' HTML: text escaped (thread titles, user ids, run summaries are data from
//! Slack, a model or a repository, never markup), the page frame with its navigation, and
//! the one style sheet, inline (the dashboard loads nothing from elsewhere).

use std::fmt::Write;

/// `text` with `&`, `<`, `>`, `"` and `'` escaped, safe in an element or a quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The pages, in the navigation's order: (path, title).
const PAGES: [(&str, &str); 4] = [
    ("/", "Threads"),
    ("/runs", "Live runs"),
    ("/logs", "Log"),
    ("/costs", "Costs"),
];

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
nav a{margin-right:1em}table{border-collapse:collapse;margin:.5em 0 1.5em}\
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}\
td.n{text-align:right}pre,ol{font-family:ui-monospace,monospace;font-size:.85em}\
h2{margin-top:1.5em}";

/// A whole page: `title`, the navigation, `body` (already HTML), and `script` (inline
/// JavaScript, or empty).
pub fn page(title: &str, body: &str, script: &str) -> String {
    let mut nav = String::new();
    for (path, name) in PAGES {
        let _ = write!(nav, "<a href=\"{path}\">{name}</a>");
    }
    let script = if script.is_empty() {
        String::new()
    } else {
        format!("<script>{script}</script>")
    };
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{title} · CodeButler</title><style>{STYLE}</style></head>\
         <body><nav>{nav}</nav><h1>{title}</h1>{body}{script}</body></html>",
        title = escape(title)
    )
}

/// A table: `headers`, then `rows` of cells that are already HTML; `numeric` columns are
/// aligned right.
pub fn table(headers: &[&str], rows: &[Vec<String>], numeric: &[usize]) -> String {
    let mut html = String::from("<table><thead><tr>");
    for h in headers {
        let _ = write!(html, "<th>{}</th>", escape(h));
    }
    html.push_str("</tr></thead><tbody>");
    for row in rows {
        html.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            if numeric.contains(&i) {
                let _ = write!(html, "<td class=\"n\">{cell}</td>");
            } else {
                let _ = write!(html, "<td>{cell}</td>");
            }
        }
        html.push_str("</tr>");
    }
    html.push_str("</tbody></table>");
    html
}

/// A cost in USD as the pages show it.
pub fn dollars(cost: f64) -> String {
    format!("${cost:.4}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_text_is_escaped() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        let page = page("<b>", "", "");
        assert!(page.contains("<title>&lt;b&gt; · CodeButler</title>"));
    }
}

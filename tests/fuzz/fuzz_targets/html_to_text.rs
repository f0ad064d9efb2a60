//! WebFetch's HTML → text under its bounds: never a panic, and every bound holds whatever
//! the page (small limits here, so the fuzzer reaches them).
#![no_main]

use std::time::Duration;

use codebutler_runner::tools::html::{Limits, html_to_text};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|page: &[u8]| {
    let limits = Limits {
        max_bytes: 2048,
        max_depth: 24,
        max_attrs: 4,
        max_text_chars: 300,
        max_nodes: 200,
        deadline: Duration::from_secs(30),
    };
    let converted = match html_to_text(page, &limits) {
        Ok(converted) => converted,
        Err(e) => {
            assert!(
                e.to_string()
                    .starts_with("could not convert the HTML to text: ")
            );
            return;
        }
    };
    let (cuts, work) = (&converted.cuts, &converted.work);
    assert_eq!(cuts.bytes.is_some(), page.len() > limits.max_bytes);
    assert!(work.max_attrs <= limits.max_attrs, "{work:?}");
    // Checked before every start tag; one token (a text reopening formatting elements)
    // can add at most as many again.
    assert!(work.max_depth <= 2 * limits.max_depth + 8, "{work:?}");
    assert!(
        work.nodes <= limits.max_nodes + 2 * limits.max_depth as u64 + 8,
        "{work:?}"
    );
    assert!(work.tokens <= 2 * limits.max_bytes as u64 + 16, "{work:?}");
    assert!(!cuts.time, "a small page took {:?}", limits.deadline);
    assert_eq!(cuts.notes(&limits).is_empty(), *cuts == Default::default());
});

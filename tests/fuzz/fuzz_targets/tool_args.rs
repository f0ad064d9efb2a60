//! Tool arguments as the model sends them: a tool name on the first line, its arguments
//! (JSON text) after it, through the real tool registry, every PM and Coder tool over a
//! scratch worktree (see the crate's documentation for how the writing tools are confined).
//! Bash is never run: its arguments are checked as a call checks them.
//!
//! Whatever the model sends: no panic, a result within the registry's cap, nothing written
//! outside the worktree or into `.git`, and what reaches the controller's fakes is what the
//! tools promise to send (URLs that are absolute http(s) without whitespace, non-empty
//! commit messages and pull request titles).
#![no_main]

use std::sync::OnceLock;

use codebutler_agent::conversation::{FunctionCall, ToolCall};
use codebutler_fuzz::Workbench;
use libfuzzer_sys::fuzz_target;

fn bench() -> &'static Workbench {
    static BENCH: OnceLock<Workbench> = OnceLock::new();
    BENCH.get_or_init(Workbench::new)
}

fuzz_target!(|input: &str| {
    let bench = bench();
    let (name, arguments) = input.split_once('\n').unwrap_or((input, ""));
    if name == "Bash" {
        let args = serde_json::from_str(arguments).unwrap_or(serde_json::Value::Null);
        if let Ok((args, timeout)) = bench.bash.check_args(args) {
            assert!(!args.command.trim().is_empty());
            assert!(timeout.as_secs_f64() >= 1.0);
        }
        return;
    }
    bench.reset();
    let call = ToolCall {
        id: "call_1".into(),
        kind: "function".into(),
        function: FunctionCall {
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        },
    };
    let output = bench.runtime.block_on(bench.registry.execute(&call));
    assert!(
        output.len() <= 33 * 1024,
        "output of {} bytes",
        output.len()
    );
    bench.check_confined(name);
    for url in bench.web.asked.lock().unwrap().drain(..) {
        let lower = url.to_ascii_lowercase();
        assert!(
            lower.starts_with("http://") || lower.starts_with("https://"),
            "{url:?}"
        );
        assert!(!url.chars().any(char::is_whitespace) && url.chars().count() <= 2048);
    }
    for message in bench.forge.commits.lock().unwrap().drain(..) {
        assert!(!message.trim().is_empty(), "empty commit message");
    }
    for (title, _) in bench.forge.pulls.lock().unwrap().drain(..) {
        assert!(!title.trim().is_empty(), "empty pull request title");
    }
    if name == "ProposePlan" && !output.starts_with("error:") {
        let stored = bench
            .runtime
            .block_on(bench.store.plan(&bench.thread))
            .unwrap();
        let plan: serde_json::Value = serde_json::from_str(&stored.unwrap()).unwrap();
        assert!(!plan["summary"].as_str().unwrap().trim().is_empty());
    }
});

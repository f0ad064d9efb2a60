//! A repository's declarations (`workspace/python_deps.rs`, `platform.rs`,
//! `test_command.rs`, `ci_workflow.rs`, `ini.rs`): whatever `pyproject.toml`, `setup.cfg`,
//! `tox.ini`, `uv.lock`, a requirements file, `package.json`, a `Makefile`, a CI workflow
//! and a test file say, the preparation's shell command is the template's, with the
//! repository's words only ever as quoted or plain words, and the test command is one line.
#![no_main]

use codebutler_controller::workspace::platform::{Platform, init_plan, shell_word};
use codebutler_controller::workspace::project_files::ProjectFiles;
use codebutler_controller::workspace::test_command::{detect, is_test_command};
use libfuzzer_sys::fuzz_target;

/// The files the input's NUL-separated parts become, in order.
const PATHS: [&str; 9] = [
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
    "uv.lock",
    "requirements-dev.txt",
    "package.json",
    "Makefile",
    ".github/workflows/ci.yml",
    "tests/test_app.py",
];

/// The command with its single-quoted spans and escaped quotes (`\'`) taken out, or `None`
/// when a quote is not closed. Written apart from `shell_word`, as a POSIX shell reads
/// them: a single-quoted span ends at the next `'`, whatever comes before it; outside one,
/// a backslash makes the next character literal.
fn outside_quotes(command: &str) -> Option<String> {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (false, '\'') => quoted = true,
            (true, '\'') => quoted = false,
            (false, '\\') => match chars.next() {
                Some('\'') => {}
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            (false, c) => out.push(c),
            (true, _) => {}
        }
    }
    (!quoted).then_some(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let parts: Vec<&str> = text.split('\0').collect();
    let files: Vec<(&str, &str)> = PATHS.iter().copied().zip(parts).collect();
    let project = ProjectFiles::from_files(&files);
    let has_uv = flags & 1 == 1;

    for step in init_plan(&[Platform::Python], &project, &|p| has_uv && p == "uv") {
        let bare = outside_quotes(&step.command)
            .unwrap_or_else(|| panic!("an unclosed quote: {:?}", step.command));
        // Outside quotes, only the template's syntax: words, `&&` between its commands,
        // one redirection into the pins file.
        for forbidden in [
            ';', '|', '$', '`', '(', ')', '<', '\n', '\\', '*', '?', '[', '#', '~', '"',
        ] {
            assert!(
                !bare.contains(forbidden),
                "{forbidden:?} outside quotes: {:?}",
                step.command
            );
        }
        assert!(bare.matches('>').count() <= 1, "{:?}", step.command);
        assert!(bare.matches("&&").count() <= 3, "{:?}", step.command);
        assert_eq!(
            bare.matches('&').count() % 2,
            0,
            "a lone &: {:?}",
            step.command
        );
        for note in &step.notes {
            assert!(!note.is_empty());
        }
    }
    // Any text is one shell word once quoted.
    let quoted = shell_word(&text);
    let bare = outside_quotes(&quoted).expect("a quoted word closes its quotes");
    assert!(
        bare.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./=:@,+%-".contains(c)),
        "{quoted:?}"
    );

    if let Some(command) = detect(&project, None) {
        assert!(!command.trim().is_empty(), "{files:?}");
        assert!(!command.contains('\n'), "{command:?}");
    }
    // Recognising a test command in what was typed never panics, and the project's own
    // command is one.
    let _ = is_test_command(&text, None);
    if !text.trim().is_empty() {
        assert!(is_test_command(&text, Some(&text)));
    }
});

//! The configuration files through the real loader and validator: the input is the global
//! file, then a NUL, then the repository file (either may be missing). Whatever they hold,
//! the loader returns a configuration that passed its checks or one error that names the
//! file or field, and no error shows a secret.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use codebutler_controller::config::{ConfigError, ConfigSources, SandboxMode, load};
use libfuzzer_sys::fuzz_target;

/// Two config paths in a scratch directory, made once per process.
fn sources() -> &'static (tempfile::TempDir, ConfigSources) {
    static SOURCES: OnceLock<(tempfile::TempDir, ConfigSources)> = OnceLock::new();
    SOURCES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let sources = ConfigSources {
            global: dir.path().join("global.json"),
            repo: dir.path().join("repo.json"),
        };
        (dir, sources)
    })
}

fn put(path: &PathBuf, text: Option<&[u8]>) {
    match text {
        Some(text) => std::fs::write(path, text).unwrap(),
        None => match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("remove {}: {e}", path.display()),
        },
    }
}

/// The secrets the files hold that appear nowhere else in them, so an error that shows
/// one can only have taken it from its secret field.
fn secrets(text: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    for file in text.split(|&b| b == 0) {
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(file) else {
            continue;
        };
        for pointer in [
            "/slack/botToken",
            "/slack/appToken",
            "/openrouter/apiKey",
            "/openai/apiKey",
        ] {
            if let Some(secret) = value.pointer(pointer).and_then(|v| v.as_str())
                && secret.len() >= 8
            {
                found.push(secret.to_owned());
            }
        }
    }
    let whole = String::from_utf8_lossy(text);
    found.retain(|s| whole.matches(s.as_str()).count() == 1);
    found
}

fuzz_target!(|data: &[u8]| {
    let (_, sources) = sources();
    let (global, repo) = match data.iter().position(|&b| b == 0) {
        Some(at) => (Some(&data[..at]), Some(&data[at + 1..])),
        None => (Some(data), None),
    };
    put(&sources.global, global.filter(|g| !g.is_empty()));
    put(&sources.repo, repo.filter(|r| !r.is_empty()));
    match load(sources, |_| None) {
        Ok(config) => {
            assert!(config.slack.bot_token.expose().starts_with("xoxb-"));
            assert!(config.slack.app_token.expose().starts_with("xapp-"));
            assert!(!config.slack.channel_id.trim().is_empty());
            let pm = &config.product_manager;
            assert!(pm.models.contains_key(&pm.default));
            assert!(pm.models.contains_key(&pm.memory_extraction));
            assert!(
                config
                    .access
                    .allowed_users
                    .iter()
                    .all(|u| u.starts_with(['U', 'W']))
            );
            assert!(matches!(
                config.sandbox.mode,
                SandboxMode::Enforce | SandboxMode::None
            ));
        }
        Err(e) => {
            let message = e.to_string();
            assert!(!message.trim().is_empty());
            for secret in secrets(data) {
                assert!(
                    !message.contains(&secret),
                    "the error shows a secret: {message}"
                );
            }
            let names_a_file = message.contains(&*sources.global.to_string_lossy())
                || message.contains(&*sources.repo.to_string_lossy());
            match e {
                ConfigError::Missing { .. } => assert!(message.starts_with("missing `")),
                _ => assert!(names_a_file, "which file? {message}"),
            }
        }
    }
});

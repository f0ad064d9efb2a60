//! How `codebutler init` gets its answers: asked in a terminal ([`Terminal`]: prompts with
//! defaults, secrets typed hidden, a list to pick from) or not at all ([`Scripted`]: every
//! answer must come from a flag, the environment or the files, and a missing one ends the
//! set-up with a line naming the flag and the variable). The wizard's steps ask through
//! [`Asker`] and never know which.

use std::io::Write;

use dialoguer::console::Term;

use super::InitError;

/// Asks the operator, or says why it cannot.
pub trait Asker {
    /// Whether questions reach a person (`false`: the answers must all be given).
    fn interactive(&self) -> bool;

    /// A secret, typed hidden; an empty answer is `None` (keep what `keep` describes, when
    /// there is something to keep).
    fn secret(&mut self, prompt: &str, keep: Option<&str>) -> Result<Option<String>, InitError>;

    /// A line of text, `default` on an empty answer.
    fn text(&mut self, prompt: &str, default: &str) -> Result<String, InitError>;

    /// One of `items`, by index.
    fn choose(
        &mut self,
        prompt: &str,
        items: &[String],
        default: usize,
    ) -> Result<usize, InitError>;

    /// Yes or no.
    fn confirm(&mut self, prompt: &str, default: bool) -> Result<bool, InitError>;

    /// A line of progress for the operator.
    fn say(&mut self, line: &str);
}

/// Questions in the terminal, on standard error (standard output stays for the results).
#[derive(Debug)]
pub struct Terminal {
    term: Term,
}

impl Terminal {
    /// The terminal on standard error.
    pub fn new() -> Self {
        Self {
            term: Term::stderr(),
        }
    }
}

impl Default for Terminal {
    fn default() -> Self {
        Self::new()
    }
}

impl Asker for Terminal {
    fn interactive(&self) -> bool {
        true
    }

    fn secret(&mut self, prompt: &str, keep: Option<&str>) -> Result<Option<String>, InitError> {
        let prompt = match keep {
            Some(keep) => format!("{prompt} (hidden; Enter keeps {keep})"),
            None => format!("{prompt} (hidden)"),
        };
        let answer = dialoguer::Password::new()
            .with_prompt(prompt)
            .allow_empty_password(true)
            .interact_on(&self.term)?;
        let answer = answer.trim().to_owned();
        Ok((!answer.is_empty()).then_some(answer))
    }

    fn text(&mut self, prompt: &str, default: &str) -> Result<String, InitError> {
        dialoguer::Input::<String>::new()
            .with_prompt(prompt)
            .default(default.to_owned())
            .interact_text_on(&self.term)
            .map(|a| a.trim().to_owned())
            .map_err(InitError::from)
    }

    fn choose(
        &mut self,
        prompt: &str,
        items: &[String],
        default: usize,
    ) -> Result<usize, InitError> {
        dialoguer::Select::new()
            .with_prompt(prompt)
            .items(items)
            .default(default.min(items.len().saturating_sub(1)))
            .interact_on(&self.term)
            .map_err(InitError::from)
    }

    fn confirm(&mut self, prompt: &str, default: bool) -> Result<bool, InitError> {
        dialoguer::Confirm::new()
            .with_prompt(prompt)
            .default(default)
            .interact_on(&self.term)
            .map_err(InitError::from)
    }

    fn say(&mut self, line: &str) {
        let _ = writeln!(std::io::stdout(), "{line}");
    }
}

/// No questions: `--yes`, or no terminal to ask in.
#[derive(Debug, Default)]
pub struct Scripted;

impl Asker for Scripted {
    fn interactive(&self) -> bool {
        false
    }

    fn secret(&mut self, _prompt: &str, _keep: Option<&str>) -> Result<Option<String>, InitError> {
        Ok(None)
    }

    fn text(&mut self, _prompt: &str, default: &str) -> Result<String, InitError> {
        Ok(default.to_owned())
    }

    fn choose(
        &mut self,
        _prompt: &str,
        _items: &[String],
        default: usize,
    ) -> Result<usize, InitError> {
        Ok(default)
    }

    fn confirm(&mut self, _prompt: &str, default: bool) -> Result<bool, InitError> {
        Ok(default)
    }

    fn say(&mut self, line: &str) {
        let _ = writeln!(std::io::stdout(), "{line}");
    }
}

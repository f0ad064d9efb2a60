//! Where an image may go in the repository: a path the Artist proposes or a person types
//! ("use it at docs/logo.png") is text from outside, so it is checked before anything is
//! committed at it: relative, inside the repository (no `..`, no `.`), nothing under `.git`
//! or the daemon's own `.codebutler/`, plain characters, and a `.png` name (the image is a
//! PNG).

/// The longest asset path accepted.
pub const MAX_PATH_CHARS: usize = 200;

/// Why a path was refused, as the thread is told.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathRefused {
    #[error("the path is empty")]
    Empty,
    #[error("the path is longer than {MAX_PATH_CHARS} characters")]
    TooLong,
    #[error("the path must be relative to the repository's root")]
    Absolute,
    #[error("the path may not leave the repository or hold `.` or `..` parts")]
    OutsideRepository,
    #[error("nothing goes under `.git` or `.codebutler`")]
    Reserved,
    #[error("the path may hold only letters, digits, `-`, `_`, `.` and `/`")]
    Characters,
    #[error("the image is a PNG: its name must end in `.png`")]
    NotPng,
}

/// `text` as a checked asset path (surrounding spaces and backticks dropped), or why not.
pub fn check_asset_path(text: &str) -> Result<String, PathRefused> {
    let path = text.trim().trim_matches('`').trim();
    if path.is_empty() {
        return Err(PathRefused::Empty);
    }
    if path.chars().count() > MAX_PATH_CHARS {
        return Err(PathRefused::TooLong);
    }
    if path.starts_with('/') || path.starts_with('~') {
        return Err(PathRefused::Absolute);
    }
    if !path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
    {
        return Err(PathRefused::Characters);
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || *p == "." || *p == "..")
    {
        return Err(PathRefused::OutsideRepository);
    }
    if parts.iter().any(|p| {
        let lower = p.to_ascii_lowercase();
        lower == ".git" || lower == ".codebutler"
    }) {
        return Err(PathRefused::Reserved);
    }
    if !path.to_ascii_lowercase().ends_with(".png") || path.len() <= ".png".len() {
        return Err(PathRefused::NotPng);
    }
    Ok(path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_relative_png_paths_pass() {
        assert_eq!(
            check_asset_path(" `assets/logo.png` "),
            Ok("assets/logo.png".into())
        );
        assert_eq!(
            check_asset_path("docs/img/a_b-1.PNG"),
            Ok("docs/img/a_b-1.PNG".into())
        );
    }

    #[test]
    fn paths_out_of_the_repository_or_into_git_are_refused() {
        for (path, refused) in [
            ("", PathRefused::Empty),
            ("../x.png", PathRefused::OutsideRepository),
            ("assets/../../x.png", PathRefused::OutsideRepository),
            ("./x.png", PathRefused::OutsideRepository),
            ("assets//x.png", PathRefused::OutsideRepository),
            ("/etc/x.png", PathRefused::Absolute),
            ("~/x.png", PathRefused::Absolute),
            (".git/hooks/x", PathRefused::Reserved),
            (".GIT/x.png", PathRefused::Reserved),
            ("a/.git/x.png", PathRefused::Reserved),
            (".codebutler/memory/x.png", PathRefused::Reserved),
            ("assets/logo.svg", PathRefused::NotPng),
            (".png", PathRefused::NotPng),
            ("assets/lo go.png", PathRefused::Characters),
            ("assets\\x.png", PathRefused::Characters),
            ("assets/\u{202e}gnp.png", PathRefused::Characters),
        ] {
            assert_eq!(check_asset_path(path), Err(refused), "{path:?}");
        }
        assert_eq!(
            check_asset_path(&format!("{}.png", "a".repeat(200))),
            Err(PathRefused::TooLong)
        );
    }
}

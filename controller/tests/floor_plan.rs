//! The controller's floor plan, kept: its top-level modules are floors, listed from the top
//! down in one place, the "Floors" list of `src/lib.rs`'s doc, and a module imports only from
//! the floors below its own. This test reads that list and every path in `src/` that leaves
//! its top-level module — `crate::<module>…` (groups such as `crate::{a, b}` included) and
//! `super::…` chains that reach the crate's root — and fails naming the file, the line and
//! the two modules of each import that climbs.
//!
//! Tests are held to the same plan: a test lives on its module's floor and imports only
//! from below it, so a test that needs a producer from a floor above belongs with that
//! producer (a store test of what the runner module saves sits in the runner module).
//!
//! It reads the source as text: comments, strings and character literals are blanked first
//! (a path in a doc comment or a message is no import), then inline
//! `mod name { … }` blocks are followed so `super::` resolves from the module it is written
//! in. The binaries in `src/bin/` sit above every floor and reach the library through its
//! name, so they are not read.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The controller crate's `src/`.
fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The floors of `lib.rs`'s doc, top first: its lines `//! N. [`module`] …`.
fn floors(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|line| line.strip_prefix("//! "))
        .filter_map(|line| {
            let (number, rest) = line.split_once(". [`")?;
            number.trim().parse::<u32>().ok()?;
            let (module, _) = rest.split_once("`]")?;
            Some(module.to_owned())
        })
        .collect()
}

/// The modules `lib.rs` declares (`pub mod x;`, `mod x;`).
fn declared_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .map(str::trim)
        .filter_map(|line| {
            let line = line.strip_prefix("pub ").unwrap_or(line);
            let name = line.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.trim().to_owned())
        })
        .collect()
}

/// `code` with comments, string literals and character literals replaced by spaces (line
/// breaks kept, so line numbers stay true).
fn blank_non_code(code: &str) -> String {
    let chars: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(&chars, i) {
            // r"…", r#"…"#, br#"…"#: ends at a quote followed by as many hashes.
            let open = chars[i..].iter().position(|&c| c == '"').unwrap_or(0) + i;
            for _ in i..=open {
                out.push(' ');
            }
            i = open + 1;
            while i < chars.len() {
                if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    i += hashes + 1;
                    break;
                }
                out.push(blank(chars[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && char_literal_len(&chars, i).is_some() {
            let len = char_literal_len(&chars, i).unwrap_or(1);
            for _ in 0..len {
                out.push(' ');
            }
            i += len;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The number of `#` of a raw string literal starting at `i`, if one does.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    let previous = i.checked_sub(1).map(|p| chars[p]);
    if previous.is_some_and(|p| p.is_alphanumeric() || p == '_') {
        return None;
    }
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some(hashes)
}

/// The length of the character literal starting at `i` (`'a'`, `'\n'`, `'\u{1F600}'`), or
/// `None` for a lifetime or a label.
fn char_literal_len(chars: &[char], i: usize) -> Option<usize> {
    match chars.get(i + 1)? {
        '\\' => {
            let close = chars[i + 2..].iter().position(|&c| c == '\'')?;
            Some(close + 3)
        }
        _ => (chars.get(i + 2) == Some(&'\'')).then_some(3),
    }
}

/// One path that names a top-level module of the crate.
#[derive(Debug, PartialEq)]
struct Reference {
    line: usize,
    module: String,
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The identifier starting at `i` (after spaces), and where it ends.
fn ident_at(chars: &[char], mut i: usize) -> Option<(String, usize)> {
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    let start = i;
    while chars.get(i).copied().is_some_and(is_ident) {
        i += 1;
    }
    (i > start).then(|| (chars[start..i].iter().collect(), i))
}

/// Whether `word` stands at `i` as a whole path segment followed by `::`.
fn segment_at(chars: &[char], i: usize, word: &str) -> bool {
    let before = i.checked_sub(1).map(|p| chars[p]);
    if before.is_some_and(|p| is_ident(p) || p == '$') {
        return false;
    }
    let word: Vec<char> = word.chars().collect();
    chars[i..].starts_with(&word) && chars[i + word.len()..].starts_with(&[':', ':'])
}

/// The first segment of each entry of the group whose `{` is at `open`: `{a::b, c}` → a, c.
fn group_heads(chars: &[char], open: usize) -> Vec<(String, usize)> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut expect_head = true;
    let mut i = open;
    while i < chars.len() {
        match chars[i] {
            '{' => {
                depth += 1;
                if depth == 1 {
                    expect_head = true;
                }
                i += 1;
            }
            '}' => {
                depth -= 1;
                i += 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => {
                expect_head = true;
                i += 1;
            }
            c if depth == 1 && expect_head && is_ident(c) => {
                let (name, end) = ident_at(chars, i).unwrap_or_default();
                heads.push((name, i));
                expect_head = false;
                i = end;
            }
            c => {
                if !c.is_whitespace() {
                    expect_head = false;
                }
                i += 1;
            }
        }
    }
    heads
}

/// Every reference to a top-level module in `code` (already blanked), written in the module
/// `module_path` (its path from the crate's root, e.g. `["thread", "handler"]`).
fn references(code: &str, module_path: &[String]) -> Vec<Reference> {
    let chars: Vec<char> = code.chars().collect();
    let line_of = |at: usize| chars[..at].iter().filter(|&&c| c == '\n').count() + 1;
    let mut found = Vec::new();
    // Inline modules open around the current position: (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut pending_mod: Option<String> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '{' {
            depth += 1;
            if let Some(name) = pending_mod.take() {
                inline.push((name, depth));
            }
            i += 1;
            continue;
        }
        if c == '}' {
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
            }
            depth -= 1;
            i += 1;
            continue;
        }
        if c == ';' {
            pending_mod = None;
        }
        let starts_word = i == 0 || !is_ident(chars[i - 1]);
        if starts_word && chars[i..].starts_with(&['m', 'o', 'd', ' ']) {
            if let Some((name, end)) = ident_at(&chars, i + 3) {
                pending_mod = Some(name);
                i = end;
                continue;
            }
        }
        // Where a path starts from the crate's root, and where its next segment begins.
        let from_root = if segment_at(&chars, i, "crate") {
            Some(i + "crate::".len())
        } else if segment_at(&chars, i, "super") {
            let mut j = i;
            let mut ups = 0;
            while segment_at(&chars, j, "super") {
                ups += 1;
                j += "super::".len();
            }
            let here = module_path.len() + inline.len();
            if ups >= here {
                Some(j)
            } else {
                i = j;
                continue;
            }
        } else {
            None
        };
        let Some(next) = from_root else {
            i += 1;
            continue;
        };
        let mut k = next;
        while chars.get(k).is_some_and(|c| c.is_whitespace()) {
            k += 1;
        }
        if chars.get(k) == Some(&'{') {
            for (module, at) in group_heads(&chars, k) {
                if module != "self" {
                    found.push(Reference {
                        line: line_of(at),
                        module,
                    });
                }
            }
        } else if let Some((module, _)) = ident_at(&chars, k) {
            found.push(Reference {
                line: line_of(i),
                module,
            });
        }
        i = next;
    }
    found
}

/// The module path of a file of `src/`: `thread/handler.rs` → thread, handler;
/// `thread/mod.rs` → thread.
fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.strip_suffix(".rs").unwrap_or(&last).to_owned();
        if stem != "mod" {
            parts.push(stem);
        }
    }
    parts
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_import_between_the_controllers_modules_points_down() {
    let src = src();
    let lib = fs::read_to_string(src.join("lib.rs")).unwrap();
    let floors = floors(&lib);
    let listed: BTreeSet<String> = floors.iter().cloned().collect();
    assert_eq!(
        listed.len(),
        floors.len(),
        "a module is on two floors: {floors:?}"
    );
    assert_eq!(
        listed,
        declared_modules(&lib),
        "lib.rs's floor list must name every module lib.rs declares, once"
    );
    let floor_of = |module: &str| floors.iter().position(|f| f == module);

    // The code of each file, tests included.
    let mut product = Vec::new();
    for file in rust_files(&src) {
        let relative = file.strip_prefix(&src).unwrap().to_path_buf();
        if relative.starts_with("bin") {
            continue;
        }
        let code = blank_non_code(&fs::read_to_string(&file).unwrap());
        product.push((relative, code));
    }

    let mut climbs = Vec::new();
    let mut seen = 0;
    for (relative, code) in product {
        if relative == Path::new("lib.rs") {
            continue;
        }
        let path = module_path(&relative);
        let own = &path[0];
        let own_floor = floor_of(own)
            .unwrap_or_else(|| panic!("src/{}: module {own} is on no floor", relative.display()));
        for reference in references(&code, &path) {
            seen += 1;
            if &reference.module == own {
                continue;
            }
            match floor_of(&reference.module) {
                None => climbs.push(format!(
                    "src/{}:{}: {own} names `{}`, which is no module on a floor",
                    relative.display(),
                    reference.line,
                    reference.module
                )),
                Some(floor) if floor < own_floor => climbs.push(format!(
                    "src/{}:{}: {own} imports from {}, a floor above it",
                    relative.display(),
                    reference.line,
                    reference.module
                )),
                Some(_) => {}
            }
        }
    }
    // A reader that found nothing would pass anything.
    assert!(
        seen > 500,
        "only {seen} crate paths found: the reader is broken"
    );
    assert!(
        climbs.is_empty(),
        "{} imports climb a floor (the floors are listed in src/lib.rs, top first):\n{}",
        climbs.len(),
        climbs.join("\n")
    );
}

#[test]
fn the_reader_finds_groups_and_super_paths_and_skips_comments_and_strings() {
    let code = r##"
use crate::{store::Store, thread::{a, b}, self};
// use crate::commented;
let s = "crate::quoted";
let r = r#"crate::raw"#;
let c = '{';
fn f<'a>(x: &'a str) { crate::config::load(x) }
mod tests {
    use super::*;
    use super::super::usage::Report;
    use super::super::super::domain::Plan;
}
use super::super::layout;
"##;
    let found = references(
        &blank_non_code(code),
        &["journal".to_owned(), "usage".to_owned()],
    );
    let pairs: Vec<(usize, &str)> = found.iter().map(|r| (r.line, r.module.as_str())).collect();
    assert_eq!(
        pairs,
        [
            (2, "store"),
            (2, "thread"),
            (7, "config"),
            (11, "domain"),
            (13, "layout")
        ]
    );
}

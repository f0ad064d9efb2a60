//! A large repository for the benchmarks: `files` source files of realistic sizes and
//! directory depth, written and committed by the real `git` and packed, as a repository
//! people clone is. The same `files` always give the same tree.
//!
//! Shape: crates of modules of sub-modules (depths 2 to 5 below the root), about 20 files a
//! directory; sizes mostly 1–8 KB with one file in 16 of 16–64 KB (source-code-like lines,
//! so it compresses like code); one file in 500 a small binary; one in 200 an executable
//! script; a few symlinks; a `.gitignore`. Needles for searches: [`RARE`] appears in three
//! files, [`COMMON`] on many lines of every file, and lines matching [`REGEX`] in about one
//! file in ten.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// A literal in exactly three files (one line each).
pub const RARE: &str = "rare_needle_7f3a";
/// A literal on many lines of every source file.
pub const COMMON: &str = "return";
/// A regex matching a test function's signature, in about one file in ten.
pub const REGEX: &str = r"fn \w+_test\(";

/// Deterministic pseudo-random numbers (xorshift64*), so the fixture is the same every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const WORDS: &[&str] = &[
    "value", "count", "buffer", "index", "config", "state", "request", "reply", "thread", "store",
    "token", "offset", "length", "cache", "entry", "parser", "writer", "reader", "handle",
    "session", "worker", "queue", "event", "message", "error",
];

/// The repository-relative path of file `i`.
fn path_of(i: usize) -> String {
    let dir = i / 20;
    let depth = 2 + dir % 4;
    let mut parts = vec![format!("crate{}", dir % 40), "src".to_owned()];
    let mut rest = dir / 40;
    for level in 2..depth {
        parts.push(format!("m{}_{level}", rest % 7));
        rest /= 7;
    }
    parts.push(format!("file{i}.rs"));
    parts.join("/")
}

/// Source-code-like text of about `bytes` bytes for file `i`, with [`RARE`] when `rare`.
fn source(rng: &mut Rng, i: usize, bytes: usize, rare: bool) -> String {
    let mut text = format!("//! Module {i}.\n\nuse std::collections::HashMap;\n\n");
    let mut f = 0;
    while text.len() < bytes {
        let (a, b) = (
            WORDS[rng.below(WORDS.len() as u64) as usize],
            WORDS[rng.below(WORDS.len() as u64) as usize],
        );
        let name = if f == 0 && i % 10 == 3 {
            format!("{a}_test")
        } else {
            format!("{a}_{b}_{f}")
        };
        text.push_str(&format!(
            "/// Computes the {a} of a {b}.\npub fn {name}({a}: u64, {b}: &mut HashMap<u64, u64>) -> u64 {{\n    \
             let {a}_{b} = {a}.wrapping_mul({});\n    if {b}.contains_key(&{a}_{b}) {{\n        \
             return {b}[&{a}_{b}];\n    }}\n    {b}.insert({a}, {a}_{b});\n    return {a}_{b} + {};\n}}\n\n",
            rng.below(1 << 20),
            rng.below(1000),
        ));
        f += 1;
    }
    if rare {
        text.push_str(&format!("// {RARE}: the one place this is handled\n"));
    }
    text
}

/// Writes the repository of `files` files at `root` (an empty directory), commits it on
/// `main` and packs it (`git repack -adq`). Returns the commit id.
pub fn build(root: &Path, files: usize) -> String {
    assert!(files >= 1_000, "a large repository");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ files as u64);
    for i in 0..files {
        let rel = path_of(i);
        let path = root.join(&rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        if i % 500 == 499 {
            let blob: Vec<u8> = (0..4096).map(|_| rng.next() as u8).collect();
            std::fs::write(path.with_extension("bin"), blob).unwrap();
            continue;
        }
        if i % 200 == 199 {
            let script = path.with_extension("sh");
            std::fs::write(&script, format!("#!/bin/sh\necho script {i}\n")).unwrap();
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
            continue;
        }
        let bytes = if rng.below(16) == 0 {
            16_384 + rng.below(49_152) as usize
        } else {
            1_024 + rng.below(7_168) as usize
        };
        let rare = [7, files / 2 + 1, files - 5].contains(&i);
        std::fs::write(&path, source(&mut rng, i, bytes, rare)).unwrap();
        if i % 1_000 == 1 {
            std::os::unix::fs::symlink(
                format!("file{i}.rs"),
                path.with_file_name(format!("link{i}.rs")),
            )
            .unwrap();
        }
    }
    std::fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=Bench",
                "-c",
                "user.email=bench@example.com",
            ])
            .args(args)
            .current_dir(root)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "a large repository"]);
    git(&["repack", "-adq"]);
    git(&["rev-parse", "HEAD"]).trim().to_owned()
}

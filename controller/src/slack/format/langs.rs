//! The fence languages we know: the aliases a fence may use, the file
//! extension a snippet of that language gets, and the Slack file type that
//! highlights it.
//!
//! One table serves both directions, fence tag → file name and file name →
//! file type, so a file mentioned in the prose can be checked against the
//! fence it is supposed to name.

/// A fence language: its aliases, default file extension and Slack type.
pub(super) struct Lang {
    aliases: &'static [&'static str],
    ext: &'static str,
    /// Slack file type, e.g. `rust`; `text` for plain text.
    pub(super) filetype: &'static str,
}

impl Lang {
    /// Name for a snippet of this language when the prose names no file.
    pub(super) fn default_name(&self) -> String {
        if self.ext == "Dockerfile" {
            self.ext.to_string()
        } else {
            format!("snippet.{}", self.ext)
        }
    }
}

/// Fence languages; the aliases double as the file extensions recognised for
/// each type.
const LANGS: &[Lang] = &[
    Lang {
        aliases: &["rust", "rs"],
        ext: "rs",
        filetype: "rust",
    },
    Lang {
        aliases: &["python", "py", "python3", "pyi"],
        ext: "py",
        filetype: "python",
    },
    Lang {
        aliases: &["go", "golang"],
        ext: "go",
        filetype: "go",
    },
    Lang {
        aliases: &["javascript", "js", "jsx", "mjs", "cjs", "node"],
        ext: "js",
        filetype: "javascript",
    },
    Lang {
        aliases: &["typescript", "ts", "tsx", "mts", "cts"],
        ext: "ts",
        filetype: "typescript",
    },
    Lang {
        aliases: &["bash", "sh", "shell", "zsh", "console", "shell-session"],
        ext: "sh",
        filetype: "shell",
    },
    Lang {
        aliases: &["json", "jsonc", "json5"],
        ext: "json",
        filetype: "json",
    },
    Lang {
        aliases: &["yaml", "yml"],
        ext: "yaml",
        filetype: "yaml",
    },
    Lang {
        aliases: &["toml"],
        ext: "toml",
        filetype: "toml",
    },
    Lang {
        aliases: &["sql", "postgresql", "postgres", "psql", "mysql", "sqlite"],
        ext: "sql",
        filetype: "sql",
    },
    Lang {
        aliases: &["html", "htm", "xhtml"],
        ext: "html",
        filetype: "html",
    },
    Lang {
        aliases: &["css"],
        ext: "css",
        filetype: "css",
    },
    Lang {
        aliases: &["java"],
        ext: "java",
        filetype: "java",
    },
    Lang {
        aliases: &["c", "h"],
        ext: "c",
        filetype: "c",
    },
    Lang {
        aliases: &["cpp", "c++", "cxx", "cc", "hpp", "hh", "hxx"],
        ext: "cpp",
        filetype: "cpp",
    },
    Lang {
        aliases: &["ruby", "rb"],
        ext: "rb",
        filetype: "ruby",
    },
    Lang {
        aliases: &["swift"],
        ext: "swift",
        filetype: "swift",
    },
    Lang {
        aliases: &["kotlin", "kt", "kts"],
        ext: "kt",
        filetype: "kotlin",
    },
    Lang {
        aliases: &["markdown", "md"],
        ext: "md",
        filetype: "markdown",
    },
    Lang {
        aliases: &["dockerfile", "docker", "containerfile"],
        ext: "Dockerfile",
        filetype: "dockerfile",
    },
    Lang {
        aliases: &["text", "txt", "plain", "plaintext"],
        ext: "txt",
        filetype: "text",
    },
];

/// The language a fence tag or file extension stands for, in any case.
pub(super) fn lookup_lang(tag: &str) -> Option<&'static Lang> {
    let tag = tag.to_ascii_lowercase();
    LANGS.iter().find(|l| l.aliases.contains(&tag.as_str()))
}

/// Slack file type implied by a file name, `None` when unknown.
pub(super) fn filetype_for_name(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    if lower == "dockerfile" || lower == "containerfile" || lower.starts_with("dockerfile.") {
        return Some("dockerfile");
    }
    let (stem, ext) = lower.rsplit_once('.')?;
    if stem.is_empty() {
        return None;
    }
    lookup_lang(ext).map(|l| l.filetype)
}

#[cfg(test)]
mod tests {
    use crate::slack::format::render_reply;
    use crate::slack::format::test_support::{code_block, snippets};

    #[test]
    fn filename_from_language() {
        let cases = [
            ("python", "snippet.py", "python"),
            ("js", "snippet.js", "javascript"),
            ("TypeScript", "snippet.ts", "typescript"),
            ("shell", "snippet.sh", "shell"),
            ("yml", "snippet.yaml", "yaml"),
            ("c++", "snippet.cpp", "cpp"),
            ("kotlin", "snippet.kt", "kotlin"),
            ("dockerfile", "Dockerfile", "dockerfile"),
            ("brainfuck", "snippet.txt", "text"),
            ("", "snippet.txt", "text"),
        ];
        for (lang, name, filetype) in cases {
            let md = format!("Here you go.\n\n{}", code_block(lang, 20));
            assert_eq!(
                snippets(&render_reply(&md, "")),
                vec![(name.to_string(), filetype.to_string())],
                "language {lang:?}"
            );
        }
    }
}

//! The service's definition as text, rendered from the templates in `deploy/` (one source
//! for `--install` and for installing by hand): the systemd unit `codebutler.service` and
//! the launchd agent `com.codebutler.agent.plist`. Pure: what to run in, what is written.
//!
//! A value is quoted for the file it goes into — a unit's `ExecStart=` and `Environment=`
//! (double quotes, `\`, `%` specifiers and `$` expansion escaped; a path setting such as
//! `WorkingDirectory=` as it is, `%` doubled), the plist's XML — and a value with a control
//! character (a newline would start a new setting) is refused. `systemd-analyze verify`
//! checks the result in the end-to-end tests.

use std::path::{Path, PathBuf};

/// The systemd unit template (`deploy/codebutler.service`).
pub const UNIT_TEMPLATE: &str = include_str!("../../../../deploy/codebutler.service");
/// The launchd agent template (`deploy/com.codebutler.agent.plist`).
pub const PLIST_TEMPLATE: &str = include_str!("../../../../deploy/com.codebutler.agent.plist");
/// The unit's name.
pub const UNIT_NAME: &str = "codebutler.service";
/// The launchd agent's label (and the plist's name without `.plist`).
pub const AGENT_LABEL: &str = "com.codebutler.agent";
/// The first line of every unit `--install` writes: `--uninstall` removes only such a file,
/// and `--install` overwrites only such a file.
pub const MARKER: &str = "Written by `codebutler --install`; `codebutler --uninstall` removes it.";
/// The same mark in a plist (an XML comment cannot hold `--`).
pub const PLIST_MARKER: &str =
    "Written by the install option of codebutler; its uninstall option removes it.";

/// Which service manager's scope: the user's, or the system's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A user unit (`systemctl --user`), the default.
    User,
    /// A system unit (`--system`), running as root.
    System,
}

/// What the service runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceSpec {
    /// The `codebutler` binary.
    pub binary: PathBuf,
    /// Its arguments: none (the repositories the global config lists) or `--repo DIR`.
    pub args: Vec<String>,
    /// Where it runs.
    pub working_directory: PathBuf,
    /// The global config directory (`CODEBUTLER_HOME`), spelled out so the service reads the
    /// config `codebutler init` wrote, whoever runs it.
    pub home: PathBuf,
    /// `PATH` as the operator has it, so the service finds `gh`, `git` and the toolchains.
    pub path: String,
    /// What it serves, in the unit's description.
    pub description: String,
}

/// A value that cannot be written into the file.
#[derive(Debug, thiserror::Error)]
#[error(
    "{what} {value:?} holds a control character (a newline, say), which the service file cannot hold"
)]
pub struct UnwritableValue {
    pub what: &'static str,
    pub value: String,
}

/// The systemd unit for `spec` in `scope`: the template with its fields filled in, its
/// manual-install comment replaced by [`MARKER`].
pub fn systemd_unit(spec: &ServiceSpec, scope: Scope) -> Result<String, UnwritableValue> {
    let mut exec = vec![unit_quote("the binary", &path_text(&spec.binary), true)?];
    for arg in &spec.args {
        exec.push(unit_quote("an argument", arg, true)?);
    }
    let home = path_text(&spec.home);
    let fields = [
        (
            "@DESCRIPTION@",
            checked("the description", &spec.description)?.replace('%', "%%"),
        ),
        ("@EXEC_START@", exec.join(" ")),
        // A path setting takes the rest of the line as it is: no quotes, `%` doubled.
        (
            "@WORKING_DIRECTORY@",
            checked("the working directory", &path_text(&spec.working_directory))?
                .replace('%', "%%"),
        ),
        (
            "@ENV_HOME@",
            unit_quote(
                "the config directory",
                &format!("CODEBUTLER_HOME={home}"),
                false,
            )?,
        ),
        (
            "@ENV_PATH@",
            unit_quote("PATH", &format!("PATH={}", spec.path), false)?,
        ),
        (
            "@ENV_FILE@",
            checked("the config directory", &format!("{home}/env"))?.replace('%', "%%"),
        ),
        (
            "@WANTED_BY@",
            match scope {
                Scope::User => "default.target".to_owned(),
                Scope::System => "multi-user.target".to_owned(),
            },
        ),
    ];
    let body = UNIT_TEMPLATE
        .lines()
        .skip_while(|l| l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    Ok(format!("# {MARKER}\n{}\n", fill(&body, &fields)))
}

/// The launchd agent for `spec`, logging to `log`.
pub fn launchd_plist(spec: &ServiceSpec, log: &Path) -> Result<String, UnwritableValue> {
    let mut args = vec![xml_string("the binary", &path_text(&spec.binary))?];
    for arg in &spec.args {
        args.push(xml_string("an argument", arg)?);
    }
    let arguments = args
        .iter()
        .map(|a| format!("    {a}"))
        .collect::<Vec<_>>()
        .join("\n");
    let fields = [
        ("@LABEL@", AGENT_LABEL.to_owned()),
        ("@PROGRAM_ARGUMENTS@", arguments),
        (
            "@WORKING_DIRECTORY@",
            xml_text("the working directory", &path_text(&spec.working_directory))?,
        ),
        (
            "@CODEBUTLER_HOME@",
            xml_text("the config directory", &path_text(&spec.home))?,
        ),
        ("@PATH@", xml_text("PATH", &spec.path)?),
        ("@LOG@", xml_text("the log file", &path_text(log))?),
    ];
    // The XML declaration stays first; the marker replaces the manual-install comment.
    let mut out = String::new();
    let mut in_comment = false;
    for line in PLIST_TEMPLATE.lines() {
        if line
            .trim_start()
            .starts_with("<!-- CodeButler's launchd agent")
        {
            in_comment = true;
            out.push_str(&format!("<!-- {PLIST_MARKER} -->\n"));
        }
        if in_comment {
            in_comment = !line.trim_end().ends_with("-->");
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(fill(&out, &fields))
}

/// Whether `text` (a file found where the service's definition goes) was written by
/// `--install`.
pub fn is_ours(text: &str) -> bool {
    text.lines()
        .take(2)
        .any(|l| l.contains(MARKER) || l.contains(PLIST_MARKER))
}

fn fill(template: &str, fields: &[(&str, String)]) -> String {
    fields
        .iter()
        .fold(template.to_owned(), |text, (field, value)| {
            text.replace(field, value)
        })
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn checked<'a>(what: &'static str, value: &'a str) -> Result<&'a str, UnwritableValue> {
    if value.chars().any(char::is_control) {
        return Err(UnwritableValue {
            what,
            value: value.to_owned(),
        });
    }
    Ok(value)
}

/// `value` as one double-quoted word of a unit file: `\` and `"` escaped, `%` doubled (a
/// specifier otherwise), and in a command line `$` doubled (variable expansion otherwise).
fn unit_quote(what: &'static str, value: &str, command: bool) -> Result<String, UnwritableValue> {
    let value = checked(what, value)?;
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' if command => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(out)
}

fn xml_text(what: &'static str, value: &str) -> Result<String, UnwritableValue> {
    let value = checked(what, value)?;
    Ok(value
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;"))
}

fn xml_string(what: &'static str, value: &str) -> Result<String, UnwritableValue> {
    Ok(format!("<string>{}</string>", xml_text(what, value)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(args: &[&str]) -> ServiceSpec {
        ServiceSpec {
            binary: "/usr/local/bin/codebutler".into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            working_directory: "/srv/repos/api".into(),
            home: "/home/ops/.codebutler".into(),
            path: "/home/ops/.cargo/bin:/usr/bin:/bin".into(),
            description: "repository /srv/repos/api".into(),
        }
    }

    #[test]
    fn the_user_unit_is_the_template_filled_in() {
        let unit = systemd_unit(&spec(&["--repo", "/srv/repos/api"]), Scope::User).unwrap();
        assert!(unit.starts_with(&format!("# {MARKER}\n[Unit]\n")), "{unit}");
        assert!(is_ours(&unit));
        for line in [
            "Type=notify",
            "NotifyAccess=main",
            "WatchdogSec=60",
            r#"ExecStart="/usr/local/bin/codebutler" "--repo" "/srv/repos/api""#,
            "WorkingDirectory=/srv/repos/api",
            r#"Environment="CODEBUTLER_HOME=/home/ops/.codebutler""#,
            r#"Environment="PATH=/home/ops/.cargo/bin:/usr/bin:/bin""#,
            "EnvironmentFile=-/home/ops/.codebutler/env",
            "RestartPreventExitStatus=2 4 5",
            "WantedBy=default.target",
        ] {
            assert!(unit.lines().any(|l| l == line), "{line:?} in:\n{unit}");
        }
        assert!(!unit.contains('@'), "{unit}");
        // The manual-install comment is the template's, not the installed file's.
        assert!(!unit.contains("By hand"), "{unit}");
    }

    #[test]
    fn the_system_unit_is_wanted_by_the_multi_user_target() {
        let unit = systemd_unit(&spec(&[]), Scope::System).unwrap();
        assert!(unit.lines().any(|l| l == "WantedBy=multi-user.target"));
        assert!(
            unit.lines()
                .any(|l| l == r#"ExecStart="/usr/local/bin/codebutler""#)
        );
    }

    #[test]
    fn values_are_quoted_for_the_unit_and_newlines_refused() {
        let mut odd = spec(&["--repo", "/srv/100% \"odd\" $HOME\\x"]);
        odd.description = "50% of it".into();
        let unit = systemd_unit(&odd, Scope::User).unwrap();
        assert!(
            unit.contains(r#""--repo" "/srv/100%% \"odd\" $$HOME\\x""#),
            "{unit}"
        );
        assert!(unit.contains("(50%% of it)"), "{unit}");
        let bad = spec(&["--repo", "/srv/a\nExecStartPre=/bin/evil"]);
        assert!(systemd_unit(&bad, Scope::User).is_err());
    }

    #[test]
    fn the_launchd_agent_is_the_template_filled_in() {
        let plist = launchd_plist(
            &spec(&["--repo", "/srv/a&b"]),
            Path::new("/Users/ops/Library/Logs/codebutler.log"),
        )
        .unwrap();
        assert!(plist.starts_with("<?xml version=\"1.0\""), "{plist}");
        assert!(is_ours(&plist), "{plist}");
        for line in [
            "  <key>Label</key><string>com.codebutler.agent</string>",
            "    <string>/usr/local/bin/codebutler</string>",
            "    <string>--repo</string>",
            "    <string>/srv/a&amp;b</string>",
            "    <key>CODEBUTLER_HOME</key><string>/home/ops/.codebutler</string>",
            "  <key>StandardErrorPath</key><string>/Users/ops/Library/Logs/codebutler.log</string>",
        ] {
            assert!(plist.lines().any(|l| l == line), "{line:?} in:\n{plist}");
        }
        assert!(!plist.contains('@'), "{plist}");
        assert!(!plist.contains("By hand"), "{plist}");
    }
}

//! A stand-in for systemd's `systemctl` and `journalctl`, for tests of `codebutler
//! --install`/`--uninstall`/`--status`/`--logs` on hosts where no systemd runs (PID 1 is not
//! systemd in a container, and a test must not touch the host's real services anyway). Put
//! its directory first on `PATH`.
//!
//! It answers from the files as systemd would: `is-system-running` says `running`;
//! `enable` needs the unit file in the unit directory of its scope (`--user`:
//! `$XDG_CONFIG_HOME/systemd/user`, else `$HOME/.config/systemd/user`; the system's:
//! `$FAKE_SYSTEMD_SYSTEM_DIR`, else `/etc/systemd/system`) and links it into
//! `<WantedBy>.wants/` beside it, as `systemctl enable` does; `disable` removes that link;
//! `is-enabled` reads it (`enabled`, or `disabled` and exit 1); `--now`, `start`, `stop`
//! and `restart` keep whether the unit runs, which `is-active` answers (`active`, or
//! `inactive` and exit 3). Every invocation is logged, one line each, in `systemctl.log`
//! (and `journalctl.log`) beside the scripts. It does not run the unit.

use std::path::{Path, PathBuf};

const SYSTEMCTL: &str = r#"#!/bin/sh
# Stand-in systemctl written by codebutler-test-support.
here="$(dirname "$0")"
printf '%s\n' "$*" >> "$here/systemctl.log"
scope=system
if [ "$1" = "--user" ]; then scope=user; shift; fi
if [ "$scope" = user ]; then
  if [ -n "$XDG_CONFIG_HOME" ]; then dir="$XDG_CONFIG_HOME/systemd/user"; else dir="$HOME/.config/systemd/user"; fi
else
  dir="${FAKE_SYSTEMD_SYSTEM_DIR:-/etc/systemd/system}"
fi
command="$1"; shift
now=no
if [ "$1" = "--now" ]; then now=yes; shift; fi
unit="$1"
state="$here/$scope-$unit.active"
wants() { sed -n 's/^WantedBy=//p' "$dir/$unit" | head -n 1; }
case "$command" in
  is-system-running) echo running ;;
  daemon-reload) ;;
  enable)
    if [ ! -f "$dir/$unit" ]; then
      echo "Failed to enable unit: Unit file $unit does not exist." >&2; exit 1
    fi
    target="$(wants)"
    mkdir -p "$dir/$target.wants"
    ln -sf "$dir/$unit" "$dir/$target.wants/$unit"
    echo "Created symlink $dir/$target.wants/$unit → $dir/$unit." >&2
    if [ "$now" = yes ]; then echo active > "$state"; fi ;;
  disable)
    for link in "$dir"/*.wants/"$unit"; do
      if [ -L "$link" ]; then rm -f "$link"; echo "Removed \"$link\"." >&2; fi
    done
    if [ "$now" = yes ]; then rm -f "$state"; fi ;;
  start|restart) echo active > "$state" ;;
  stop) rm -f "$state" ;;
  is-enabled)
    for link in "$dir"/*.wants/"$unit"; do
      if [ -L "$link" ]; then echo enabled; exit 0; fi
    done
    if [ -f "$dir/$unit" ]; then echo disabled; exit 1; fi
    echo "Failed to get unit file state for $unit: No such file or directory" >&2; exit 1 ;;
  is-active)
    if [ -f "$state" ]; then echo active; exit 0; fi
    echo inactive; exit 3 ;;
  *) echo "Unknown command verb $command." >&2; exit 1 ;;
esac
"#;

const JOURNALCTL: &str = r#"#!/bin/sh
# Stand-in journalctl written by codebutler-test-support.
here="$(dirname "$0")"
printf '%s\n' "$*" >> "$here/journalctl.log"
echo "-- No entries --"
"#;

/// Writes the stand-in `systemctl` and `journalctl` into `dir`; returns `dir`.
pub fn install_fake_systemd(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).expect("fake systemd: create dir");
    for (name, script) in [("systemctl", SYSTEMCTL), ("journalctl", JOURNALCTL)] {
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, script).expect("fake systemd: write script");
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
            .expect("fake systemd: chmod");
        std::fs::rename(&tmp, dir.join(name)).expect("fake systemd: rename");
    }
    dir.to_owned()
}

/// The `systemctl` invocations logged in `dir`, one per element.
pub fn systemctl_log(dir: &Path) -> Vec<String> {
    read_lines(&dir.join("systemctl.log"))
}

/// The `journalctl` invocations logged in `dir`, one per element.
pub fn journalctl_log(dir: &Path) -> Vec<String> {
    read_lines(&dir.join("journalctl.log"))
}

fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

//! A file-based Go module proxy (`GOPROXY=file:///…`), standing in for proxy.golang.org,
//! which the machines these tests run on cannot reach. It serves real modules: the source
//! Debian packages under `/usr/share/gocode/src` (`golang-github-google-go-cmp-dev` …),
//! laid out as the GOPROXY protocol says — `<module>/@v/list`, `<version>.info`,
//! `<version>.mod` and `<version>.zip` — the zip holding every regular file of the module
//! under `<module>@<version>/`, without directory entries, links or nested modules, as Go's
//! module zips do (made with the `zip` program).
//!
//! What it does not reproduce: the public checksum database (a module's zip is made from
//! Debian's copy of the source, so its hash is not the one sum.golang.org knows: tests
//! commit a `go.sum` made from this proxy, and name the module in `GONOSUMDB` as an
//! operator with a private proxy would); `@latest`, pseudo-versions and case-encoded
//! module paths (only a given module at a given version is served).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where Debian keeps Go libraries' source.
pub const DEBIAN_GOCODE: &str = "/usr/share/gocode/src";

/// Makes a proxy under `root` serving `module` at `version` from Debian's source of it;
/// returns the proxy's directory (`GOPROXY=file://<it>`). Panics, saying what to install,
/// when the source or `zip` is missing.
pub fn serve_debian_module(root: &Path, module: &str, version: &str) -> PathBuf {
    let source = Path::new(DEBIAN_GOCODE).join(module);
    assert!(
        source.join("go.mod").is_file(),
        "{} is missing: apt-get install golang-go golang-github-google-go-cmp-dev zip",
        source.display()
    );
    let proxy = root.join("goproxy");
    let at = proxy.join(module).join("@v");
    std::fs::create_dir_all(&at).unwrap();
    std::fs::write(at.join("list"), format!("{version}\n")).unwrap();
    std::fs::write(
        at.join(format!("{version}.info")),
        serde_json::json!({"Version": version, "Time": "2022-08-02T00:00:00Z"}).to_string(),
    )
    .unwrap();
    std::fs::copy(source.join("go.mod"), at.join(format!("{version}.mod"))).unwrap();
    let staging = root.join("goproxy-staging");
    let prefix = format!("{module}@{version}");
    copy_module_files(&source, &staging.join(&prefix));
    let zipped = Command::new("zip")
        .current_dir(&staging)
        .args(["-q", "-r", "-X", "-D"])
        .arg(at.join(format!("{version}.zip")))
        .arg(&prefix)
        .status()
        .expect("zip is installed (apt-get install zip)");
    assert!(zipped.success(), "zip the module {prefix}");
    std::fs::remove_dir_all(&staging).unwrap();
    proxy
}

/// Copies the regular files under `from` to `to`, leaving out links and directories that
/// are modules of their own (a `go.mod` of their own).
fn copy_module_files(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        let target = to.join(entry.file_name());
        if kind.is_dir() && !entry.path().join("go.mod").exists() {
            copy_module_files(&entry.path(), &target);
        } else if kind.is_file() {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

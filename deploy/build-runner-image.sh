#!/usr/bin/env bash
# Builds the runner's container image (deploy/runner.Containerfile) from a built
# codebutler-runner binary and programs of this host, without the internet.
#
#   deploy/build-runner-image.sh RUNNER_BIN [IMAGE] [ENGINE]
#
# IMAGE defaults to localhost/codebutler-runner:latest, ENGINE to podman (or docker).
# CODEBUTLER_IMAGE_PROGRAMS adds programs (names on PATH or absolute paths) to the default
# set: what the Coder's Bash tool needs (bash, coreutils, grep, sed, git, …). Each program
# is copied at its resolved path with the shared libraries `ldd` lists for it.
set -euo pipefail

runner_bin=${1:?usage: build-runner-image.sh RUNNER_BIN [IMAGE] [ENGINE]}
image=${2:-localhost/codebutler-runner:latest}
engine=${3:-podman}
here=$(cd "$(dirname "$0")" && pwd)

programs=(bash sh cat ls echo env head tail wc sort uniq cut tr tee mkdir rm rmdir mv cp ln
  touch chmod stat printf test true false sleep pwd dirname basename readlink realpath date
  id uname grep sed find xargs diff cmp git seq mktemp du df awk tar gzip od expr)
# shellcheck disable=SC2206
programs+=(${CODEBUTLER_IMAGE_PROGRAMS:-})

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
root=$context/rootfs
mkdir -p "$root/usr/local/bin" "$root/usr/bin" "$root/usr/lib" "$root/etc" "$root/tmp" \
  "$root/proc" "$root/dev" "$root/sys" "$root/workspace"
chmod 1777 "$root/tmp"
# The merged /usr layout of current distributions: /bin and /lib* are links into /usr.
ln -s usr/bin "$root/bin"
ln -s usr/sbin "$root/sbin"
mkdir -p "$root/usr/sbin"

# Copies a host file to the same path in the image, resolving every link on the way (a
# merged-/usr host names the same file through /lib and /usr/lib).
copy_file() {
  local source=$1 real
  real=$(realpath "$source")
  case "$real" in
    /lib/* | /lib64/* | /lib32/* | /libx32/* | /bin/* | /sbin/*) real=/usr$real ;;
  esac
  mkdir -p "$root$(dirname "$real")"
  cp -L "$source" "$root$real"
  # The name the loader or PATH uses, when it differs from the real file's.
  local named=$source
  case "$named" in
    /lib/* | /lib64/* | /lib32/* | /libx32/* | /bin/* | /sbin/*) named=/usr$named ;;
  esac
  if [ "$named" != "$real" ] && [ ! -e "$root$named" ]; then
    mkdir -p "$root$(dirname "$named")"
    ln -s "$real" "$root$named"
  fi
}

# Copies a program and every shared library it links.
copy_program() {
  local program=$1 lib
  copy_file "$program"
  # `ldd` prints "name => /path (addr)" or "/path (addr)" for the loader.
  while read -r lib; do
    [ -n "$lib" ] && copy_file "$lib"
  done < <(ldd "$program" 2>/dev/null | sed -nE 's/.*=> (\/[^ ]+) .*/\1/p; s/^[[:space:]]*(\/[^ ]+) .*/\1/p')
}

cp "$runner_bin" "$root/usr/local/bin/codebutler-runner"
chmod 0755 "$root/usr/local/bin/codebutler-runner"
for lib in $(ldd "$runner_bin" | sed -nE 's/.*=> (\/[^ ]+) .*/\1/p; s/^[[:space:]]*(\/[^ ]+) .*/\1/p'); do
  copy_file "$lib"
done
for name in "${programs[@]}"; do
  path=$(type -P "$name" || true)
  case "$path" in
    /*) copy_program "$path" ;;
    *) echo "build-runner-image.sh: $name is not a program on this host" >&2; exit 1 ;;
  esac
done
# The loader's link names (/lib64/ld-linux-x86-64.so.2) must resolve through /lib64 too.
for dir in lib lib64 lib32 libx32; do
  if [ -d "$root/usr/$dir" ] && [ ! -e "$root/$dir" ]; then
    ln -s "usr/$dir" "$root/$dir"
  fi
done

# Who the runner is inside, for programs that ask (git, id); no passwords.
printf 'root:x:0:0:root:/tmp/home:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' \
  >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
printf 'codebutler\n' >"$root/etc/hostname"
# What this image is, for an operator (and the tests) looking from inside a run.
"$runner_bin" --version >"$root/etc/codebutler-runner-image"

cp "$here/runner.Containerfile" "$context/Containerfile"
"$engine" build --quiet --file "$context/Containerfile" --tag "$image" "$context" >/dev/null
echo "$image"

//! The worktree helper's wire format: the frames `codebutler-runner worktree-io` writes on
//! its stdout and the controller reads.
//!
//! The helper runs in the sandbox, so everything it says is untrusted: the decoder bounds
//! every length before allocating, and [`check_path`] refuses any path the controller could
//! not safely put in a git tree (absolute, `..`, empty components, `.git` in any case).
//!
//! ```text
//! frame   = 'E' path mode stat body          one file of the worktree
//!         | 'S' path size:u64                a file left out (larger than the limit)
//!         | 'I' path                         a file or directory git ignores (asked for only)
//!         | 'D' entries:u64                  the end: that many 'E' frames were sent
//!         | 'F' len:u32 utf-8                the helper failed; nothing it sent counts
//! path    = len:u32 bytes                    relative, '/'-separated
//! mode    = u32                              0o100644, 0o100755, 0o120000 or 0o160000
//! stat    = 8 × u32                          ctime s, ns, mtime s, ns, dev, ino, uid, gid,
//!           size:u32                         as git's index keeps them (truncated to 32 bits)
//! body    = 'K' oid:20                       content unchanged: the blob is already stored
//!         | 'C' len:u64 bytes                the content (a symlink's target for 0o120000)
//! ```
//!
//! Integers are little-endian.

use std::io::{self, Read, Write};

/// Longest path accepted (bytes).
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest failure message accepted (bytes).
const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// A regular file.
pub const MODE_FILE: u32 = 0o100_644;
/// An executable regular file.
pub const MODE_EXECUTABLE: u32 = 0o100_755;
/// A symbolic link (the content is its target).
pub const MODE_SYMLINK: u32 = 0o120_000;
/// A submodule's commit (always [`Body::Known`]: it names a commit of another repository).
pub const MODE_GITLINK: u32 = 0o160_000;

/// A file's metadata as git's index keeps it, for the index's stat cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    pub ctime_secs: u32,
    pub ctime_nanos: u32,
    pub mtime_secs: u32,
    pub mtime_nanos: u32,
    pub dev: u32,
    pub ino: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u32,
}

/// What the helper sends of a file's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// Unchanged since the index recorded it: the blob with this id is already stored.
    Known([u8; 20]),
    /// The content itself.
    Content(Vec<u8>),
}

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A file of the worktree.
    Entry {
        path: Vec<u8>,
        mode: u32,
        stat: Stat,
        body: Body,
    },
    /// A file left out because it is larger than the limit.
    Skipped { path: Vec<u8>, size: u64 },
    /// A file or directory git ignores (a directory stands for everything in it), listed
    /// only when the controller asks, so it can say what a commit left out.
    Ignored { path: Vec<u8> },
    /// The end; `entries` entries were sent.
    Done { entries: u64 },
    /// The helper failed.
    Failed { message: String },
}

/// A malformed frame.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("read the helper's output: {0}")]
    Io(#[from] io::Error),
    #[error("the helper's output is malformed: {0}")]
    Malformed(String),
    #[error("the helper sent {path} with {size} bytes, more than the {limit} allowed")]
    TooLarge { path: String, size: u64, limit: u64 },
}

fn malformed(what: impl Into<String>) -> WireError {
    WireError::Malformed(what.into())
}

/// Writes one frame.
pub fn write_frame(out: &mut impl Write, frame: &Frame) -> io::Result<()> {
    match frame {
        Frame::Entry {
            path,
            mode,
            stat,
            body,
        } => {
            out.write_all(b"E")?;
            write_bytes32(out, path)?;
            out.write_all(&mode.to_le_bytes())?;
            for n in [
                stat.ctime_secs,
                stat.ctime_nanos,
                stat.mtime_secs,
                stat.mtime_nanos,
                stat.dev,
                stat.ino,
                stat.uid,
                stat.gid,
                stat.size,
            ] {
                out.write_all(&n.to_le_bytes())?;
            }
            match body {
                Body::Known(oid) => {
                    out.write_all(b"K")?;
                    out.write_all(oid)?;
                }
                Body::Content(bytes) => {
                    out.write_all(b"C")?;
                    out.write_all(&(bytes.len() as u64).to_le_bytes())?;
                    out.write_all(bytes)?;
                }
            }
        }
        Frame::Skipped { path, size } => {
            out.write_all(b"S")?;
            write_bytes32(out, path)?;
            out.write_all(&size.to_le_bytes())?;
        }
        Frame::Ignored { path } => {
            out.write_all(b"I")?;
            write_bytes32(out, path)?;
        }
        Frame::Done { entries } => {
            out.write_all(b"D")?;
            out.write_all(&entries.to_le_bytes())?;
        }
        Frame::Failed { message } => {
            out.write_all(b"F")?;
            let bytes = message.as_bytes();
            let cut = &bytes[..bytes.len().min(MAX_MESSAGE_BYTES)];
            write_bytes32(out, cut)?;
        }
    }
    Ok(())
}

fn write_bytes32(out: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "field longer than 4 GiB"))?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(bytes)
}

/// Reads one frame; `None` at the end of the stream before a frame starts. Content longer
/// than `max_content` bytes is refused before it is read.
pub fn read_frame(input: &mut impl Read, max_content: u64) -> Result<Option<Frame>, WireError> {
    let mut tag = [0u8; 1];
    if input.read(&mut tag)? == 0 {
        return Ok(None);
    }
    let frame = match tag[0] {
        b'E' => {
            let path = read_path(input)?;
            let mode = read_u32(input)?;
            if ![MODE_FILE, MODE_EXECUTABLE, MODE_SYMLINK, MODE_GITLINK].contains(&mode) {
                return Err(malformed(format!("mode {mode:o} of {}", show(&path))));
            }
            let mut n = [0u32; 9];
            for slot in &mut n {
                *slot = read_u32(input)?;
            }
            let stat = Stat {
                ctime_secs: n[0],
                ctime_nanos: n[1],
                mtime_secs: n[2],
                mtime_nanos: n[3],
                dev: n[4],
                ino: n[5],
                uid: n[6],
                gid: n[7],
                size: n[8],
            };
            let mut kind = [0u8; 1];
            input.read_exact(&mut kind)?;
            let body = match kind[0] {
                b'K' => {
                    let mut oid = [0u8; 20];
                    input.read_exact(&mut oid)?;
                    Body::Known(oid)
                }
                b'C' => {
                    let len = read_u64(input)?;
                    if len > max_content {
                        return Err(WireError::TooLarge {
                            path: show(&path),
                            size: len,
                            limit: max_content,
                        });
                    }
                    let mut bytes = Vec::new();
                    input.take(len).read_to_end(&mut bytes)?;
                    if bytes.len() as u64 != len {
                        return Err(malformed(format!("content of {} cut short", show(&path))));
                    }
                    Body::Content(bytes)
                }
                other => return Err(malformed(format!("body kind {other:#x}"))),
            };
            if mode == MODE_GITLINK && !matches!(body, Body::Known(_)) {
                return Err(malformed(format!(
                    "content for the submodule {}",
                    show(&path)
                )));
            }
            Frame::Entry {
                path,
                mode,
                stat,
                body,
            }
        }
        b'S' => {
            let path = read_path(input)?;
            let size = read_u64(input)?;
            Frame::Skipped { path, size }
        }
        b'I' => Frame::Ignored {
            path: read_path(input)?,
        },
        b'D' => Frame::Done {
            entries: read_u64(input)?,
        },
        b'F' => {
            let bytes = read_bytes32(input, MAX_MESSAGE_BYTES)?;
            Frame::Failed {
                message: String::from_utf8_lossy(&bytes).into_owned(),
            }
        }
        other => return Err(malformed(format!("frame tag {other:#x}"))),
    };
    Ok(Some(frame))
}

fn read_u32(input: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    input.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn read_u64(input: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    input.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

fn read_bytes32(input: &mut impl Read, max: usize) -> Result<Vec<u8>, WireError> {
    let len = read_u32(input)? as usize;
    if len > max {
        return Err(malformed(format!("a field of {len} bytes (at most {max})")));
    }
    let mut bytes = vec![0u8; len];
    input.read_exact(&mut bytes)?;
    Ok(bytes)
}

fn read_path(input: &mut impl Read) -> Result<Vec<u8>, WireError> {
    let path = read_bytes32(input, MAX_PATH_BYTES)?;
    check_path(&path).map_err(|reason| malformed(format!("path {}: {reason}", show(&path))))?;
    Ok(path)
}

/// Why `path` cannot name a file of a git tree, if it cannot: it must be relative and
/// `/`-separated, without empty, `.` or `..` components, NUL bytes or a `.git` component
/// (in any letter case, as git itself refuses).
pub fn check_path(path: &[u8]) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("empty");
    }
    if path.contains(&0) {
        return Err("contains a NUL byte");
    }
    for component in path.split(|b| *b == b'/') {
        match component {
            b"" => return Err("has an empty component or is absolute"),
            b"." | b".." => return Err("has a `.` or `..` component"),
            c if c.eq_ignore_ascii_case(b".git") => return Err("has a `.git` component"),
            _ => {}
        }
    }
    Ok(())
}

/// A path for messages.
pub fn show(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(frame: Frame) {
        let mut bytes = Vec::new();
        write_frame(&mut bytes, &frame).unwrap();
        let mut input = bytes.as_slice();
        assert_eq!(read_frame(&mut input, 1 << 20).unwrap(), Some(frame));
        assert_eq!(read_frame(&mut input, 1 << 20).unwrap(), None);
    }

    #[test]
    fn frames_round_trip() {
        let stat = Stat {
            ctime_secs: 1,
            ctime_nanos: 2,
            mtime_secs: 3,
            mtime_nanos: 4,
            dev: 5,
            ino: 6,
            uid: 7,
            gid: 8,
            size: 9,
        };
        round_trip(Frame::Entry {
            path: b"src/main.rs".to_vec(),
            mode: MODE_FILE,
            stat,
            body: Body::Content(b"fn main() {}\n".to_vec()),
        });
        round_trip(Frame::Entry {
            path: b"link".to_vec(),
            mode: MODE_SYMLINK,
            stat,
            body: Body::Known([7; 20]),
        });
        round_trip(Frame::Skipped {
            path: b"big.bin".to_vec(),
            size: 1 << 40,
        });
        round_trip(Frame::Ignored {
            path: b"pkg/__pycache__".to_vec(),
        });
        round_trip(Frame::Done { entries: 3 });
        round_trip(Frame::Failed {
            message: "it broke".into(),
        });
    }

    #[test]
    fn hostile_paths_are_refused() {
        for bad in [
            &b""[..],
            b"/etc/passwd",
            b"a//b",
            b"a/../../b",
            b"./a",
            b".git/config",
            b"sub/.GIT/hooks/x",
            b"a\0b",
            b"trailing/",
        ] {
            assert!(check_path(bad).is_err(), "{}", show(bad));
        }
        for good in [
            &b"a"[..],
            b".gitignore",
            b"dir/.github/x",
            b"a/..b",
            b"\xff\xfe",
        ] {
            assert!(check_path(good).is_ok(), "{}", show(good));
        }
        let mut bytes = Vec::new();
        write_frame(
            &mut bytes,
            &Frame::Skipped {
                path: b"../x".to_vec(),
                size: 1,
            },
        )
        .unwrap();
        let e = read_frame(&mut bytes.as_slice(), 10).unwrap_err();
        assert!(e.to_string().contains("`.` or `..`"), "{e}");
    }

    #[test]
    fn lengths_are_bounded_before_allocating() {
        // A content length of 2^60 is refused without reading (or allocating) it.
        let mut bytes = b"E".to_vec();
        bytes.extend(1u32.to_le_bytes());
        bytes.extend(b"a");
        bytes.extend(MODE_FILE.to_le_bytes());
        bytes.extend([0u8; 36]);
        bytes.extend(b"C");
        bytes.extend((1u64 << 60).to_le_bytes());
        let e = read_frame(&mut bytes.as_slice(), 1 << 20).unwrap_err();
        assert!(matches!(e, WireError::TooLarge { .. }), "{e}");
        // A path length past the maximum.
        let mut bytes = b"S".to_vec();
        bytes.extend(u32::MAX.to_le_bytes());
        assert!(read_frame(&mut bytes.as_slice(), 10).is_err());
        // Truncated input and unknown tags are errors, not panics.
        for cut in [
            &b"E"[..],
            b"E\x01\x00\x00\x00",
            b"D\x01",
            b"Z",
            b"F\x05\x00\x00\x00ab",
        ] {
            assert!(read_frame(&mut &cut[..], 10).is_err(), "{cut:?}");
        }
        // A bad mode.
        let mut bytes = b"E".to_vec();
        bytes.extend(1u32.to_le_bytes());
        bytes.extend(b"a");
        bytes.extend(0o40000u32.to_le_bytes());
        assert!(read_frame(&mut bytes.as_slice(), 10).is_err());
    }
}

//! Logging: `tracing` events printed in the plain tagged format of the spec
//! (`2026-02-14 15:04:05 INF  slack connected`), or as JSON lines, on stderr and, once the
//! configuration says where, in the service's log file ([`file`]); the last lines are also
//! kept in memory for the dashboard ([`ring`]).
//!
//! An event picks its tag with a `tag` field (`info!(tag = "MSG", …)`); without one the level
//! decides (INF, WRN, ERR, DBG). Tags in use: INF, WRN, ERR, DBG, MSG (user message), PM
//! (PM activity), RSP (response sent), CLD (Coder), IMG (images), MEM (memory).

pub mod file;
pub mod ring;

use std::fmt;
use std::io::{self, Write};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

/// How log lines are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// `2026-02-14 15:04:05 INF  message`.
    Plain,
    /// One JSON object per line.
    Json,
}

pub use file::{LogFile, LogFileSettings};
pub use ring::LogRing;

/// Where the log lines go besides stderr: the log file (opened once the configuration is
/// read) and the ring of recent lines the dashboard reads.
#[derive(Clone, Debug, Default)]
pub struct Logs {
    pub file: LogFile,
    pub ring: LogRing,
}

/// Installs the global subscriber writing to stderr, to the log file the returned handle
/// opens once the configuration is read, and to the ring of recent lines. `RUST_LOG`
/// overrides the filter.
pub fn init(format: LogFormat, verbose: bool) -> Logs {
    let default = if verbose {
        "warn,codebutler_controller=debug,codebutler_agent=debug,codebutler=debug"
    } else {
        "warn,codebutler_controller=info,codebutler_agent=info,codebutler=info"
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let logs = Logs::default();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(Tee { logs: logs.clone() });
    let installed = match format {
        LogFormat::Plain => builder.event_format(TaggedFormat).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    // A second init (tests) is harmless: the first subscriber stays, and says so.
    if let Err(e) = installed {
        tracing::debug!("logging was set up already: {e}");
    }
    logs
}

/// Each log line to stderr, to the log file and to the ring.
#[derive(Clone, Debug)]
struct Tee {
    logs: Logs,
}

impl<'a> MakeWriter<'a> for Tee {
    type Writer = Tee;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Write for Tee {
    /// One whole formatted event per call (the formatter buffers the line first).
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.logs.file.write(buf);
        self.logs.ring.push(buf);
        io::stderr().write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

/// The plain tagged line format.
#[derive(Debug, Clone, Copy)]
pub struct TaggedFormat;

impl<S, N> FormatEvent<S, N> for TaggedFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let tag = fields
            .tag
            .unwrap_or_else(|| level_tag(*event.metadata().level()).to_owned());
        let time = chrono::Local::now().format("%Y-%m-%d %H:%M:%S");
        writeln!(
            writer,
            "{}",
            render_line(&time.to_string(), &tag, &fields.message, &fields.rest)
        )
    }
}

fn level_tag(level: Level) -> &'static str {
    match level {
        Level::ERROR => "ERR",
        Level::WARN => "WRN",
        Level::INFO => "INF",
        Level::DEBUG | Level::TRACE => "DBG",
    }
}

/// One plain line: time, tag padded to three, two spaces, message, then other fields.
fn render_line(time: &str, tag: &str, message: &str, rest: &[(String, String)]) -> String {
    let mut line = format!("{time} {tag:<3}  {message}");
    for (key, value) in rest {
        line.push_str(&format!(" {key}={value}"));
    }
    line
}

#[derive(Default)]
struct Fields {
    tag: Option<String>,
    message: String,
    rest: Vec<(String, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "tag" => self.tag = Some(value.to_owned()),
            "message" => self.message = value.to_owned(),
            name => self.rest.push((name.to_owned(), value.to_owned())),
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "tag" => self.tag = Some(format!("{value:?}").trim_matches('"').to_owned()),
            "message" => self.message = format!("{value:?}"),
            name => self.rest.push((name.to_owned(), format!("{value:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_follow_the_spec_format() {
        assert_eq!(
            render_line("2026-02-14 15:04:05", "INF", "slack connected", &[]),
            "2026-02-14 15:04:05 INF  slack connected"
        );
        assert_eq!(
            render_line(
                "2026-02-14 15:04:09",
                "PM",
                "thread 1707.123 → pm responding",
                &[]
            ),
            "2026-02-14 15:04:09 PM   thread 1707.123 → pm responding"
        );
        assert_eq!(
            render_line("t", "ERR", "x", &[("error".into(), "boom".into())]),
            "t ERR  x error=boom"
        );
    }
}

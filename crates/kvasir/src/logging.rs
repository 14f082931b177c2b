//! The server's log as redis-server writes it: one line per event,
//! `pid:M 28 Nov 2026 12:21:49.402 * message`, on stdout or appended to
//! `logfile`. Tools and test harnesses made for Redis (redigo's, Redis's
//! own, log shippers' parsers) read these lines by that shape.

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

/// Redis's line prefix: pid, role, local time with milliseconds, and the
/// level's mark (`.` debug, `-` verbose, `*` notice, `#` warning).
struct RedisLine;

impl<S, N> FormatEvent<S, N> for RedisLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mark = match *event.metadata().level() {
            Level::TRACE => '.',
            Level::DEBUG => '-',
            Level::INFO => '*',
            Level::WARN | Level::ERROR => '#',
        };
        // A server process is always a master to Redis's tools (Kvasir's
        // forked children do not log).
        write!(writer, "{}:M {} {mark} ", std::process::id(), local_time())?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// `28 Nov 2026 12:21:49.402` in the local time zone, as Redis's log.
fn local_time() -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    // SAFETY: localtime_r writes only into the tm it is given.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&secs, &mut tm).is_null() {
            return format!("{}.{:03}", now.as_secs(), now.subsec_millis());
        }
        tm
    };
    format!(
        "{:02} {} {} {:02}:{:02}:{:02}.{:03}",
        tm.tm_mday,
        MONTHS[tm.tm_mon.clamp(0, 11) as usize],
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        now.subsec_millis()
    )
}

/// Where lines go: stdout, or the `logfile` opened for each line in
/// append mode as Redis does, so a log rotated away (renamed) is followed
/// by a new file at the next line.
#[derive(Clone)]
enum Destination {
    Stdout,
    File(String),
}

impl<'a> MakeWriter<'a> for Destination {
    type Writer = Box<dyn Write + 'a>;

    fn make_writer(&'a self) -> Self::Writer {
        match self {
            Destination::Stdout => Box::new(io::stdout()),
            Destination::File(path) => match File::options().append(true).create(true).open(path) {
                Ok(file) => Box::new(file),
                // Redis drops a line it cannot write too.
                Err(_) => Box::new(io::sink()),
            },
        }
    }
}

/// Checks that `logfile` can be written, as redis-server does at start.
pub fn check_logfile(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Ok(());
    }
    File::options()
        .append(true)
        .create(true)
        .open(path)
        .map(drop)
        .map_err(|e| format!("Can't open the log file: {}", os_text(&e)))
}

/// An io error's text without Rust's " (os error N)" suffix, as strerror.
pub fn os_text(e: &io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// `loglevel` and `logfile` (empty: stdout).
pub fn init(level: &str, logfile: &str) {
    let filter = match level {
        "debug" | "verbose" => "debug",
        "warning" => "warn",
        "nothing" => "off",
        _ => "info",
    };
    let destination = if logfile.is_empty() {
        Destination::Stdout
    } else {
        Destination::File(logfile.to_string())
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_ansi(false)
        .event_format(RedisLine)
        .with_writer(destination)
        .init();
}

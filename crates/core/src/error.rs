//! Typed command errors. Inside the command layer errors are values of
//! [`CmdError`]; they become Redis error strings only in [`CmdError::to_reply`].

use kvasir_resp::Reply;
use std::borrow::Cow;

pub type CmdResult = Result<Reply, CmdError>;

#[derive(Debug, Clone, PartialEq)]
pub enum CmdError {
    WrongType,
    NotInteger,
    NotFloat,
    Syntax,
    Overflow,
    NoSuchKey,
    IndexOutOfRange,
    DbIndexOutOfRange,
    /// `ERR invalid expire time in 'set' command`
    InvalidExpire(&'static str),
    /// `ERR wrong number of arguments for 'get' command`
    WrongArity(String),
    UnknownCommand(String),
    /// `ERR unknown subcommand 'x'. Try CLIENT HELP.`
    UnknownSubcommand {
        container: String,
        sub: String,
    },
    /// Any other error: the full text, error code included (`ERR ...`).
    Other(Cow<'static, str>),
    /// Not a failure: a blocking command (BLPOP, BZPOPMIN...) found nothing
    /// to serve. The server parks the client on the keys and runs the
    /// command again when one is written; inside MULTI, or at the timeout,
    /// the client gets `on_timeout` instead.
    WouldBlock(Box<BlockOn>),
    /// Not a failure: a script ran past `busy-reply-threshold` and paused
    /// (standalone only, see `Store::script_pause_after`); the server
    /// resumes it with `Store::resume_script` until it ends.
    ScriptPaused,
}

/// What a blocked command waits for.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockOn {
    /// The keys whose writes may unblock the command.
    pub keys: Vec<bytes::Bytes>,
    /// Milliseconds to wait; 0 means forever.
    pub timeout_ms: u64,
    /// The reply at the timeout (a nil array for BLPOP, a nil for BLMOVE).
    pub on_timeout: Reply,
    /// The arguments to run on the next try, when they differ from the
    /// original ones: a blocking XREAD resolves `$` to the stream's last
    /// id when it first blocks, so a re-run sees what came after.
    pub rerun: Option<Vec<bytes::Bytes>>,
}

impl CmdError {
    pub fn other(text: impl Into<Cow<'static, str>>) -> CmdError {
        CmdError::Other(text.into())
    }

    /// The Redis error text, without the leading dash.
    pub fn text(&self) -> Cow<'static, str> {
        match self {
            CmdError::WrongType => {
                "WRONGTYPE Operation against a key holding the wrong kind of value".into()
            }
            CmdError::NotInteger => "ERR value is not an integer or out of range".into(),
            CmdError::NotFloat => "ERR value is not a valid float".into(),
            CmdError::Syntax => "ERR syntax error".into(),
            CmdError::Overflow => "ERR increment or decrement would overflow".into(),
            CmdError::NoSuchKey => "ERR no such key".into(),
            CmdError::IndexOutOfRange => "ERR index out of range".into(),
            CmdError::DbIndexOutOfRange => "ERR DB index is out of range".into(),
            CmdError::InvalidExpire(cmd) => {
                format!("ERR invalid expire time in '{cmd}' command").into()
            }
            CmdError::WrongArity(cmd) => {
                format!("ERR wrong number of arguments for '{cmd}' command").into()
            }
            CmdError::UnknownCommand(text) => text.clone().into(),
            CmdError::UnknownSubcommand { container, sub } => format!(
                "ERR unknown subcommand '{}'. Try {} HELP.",
                sub,
                container.to_uppercase()
            )
            .into(),
            CmdError::Other(text) => text.clone(),
            CmdError::WouldBlock(_) => "ERR blocking command reached a non-blocking path".into(),
            CmdError::ScriptPaused => {
                "ERR a paused script reached a path that cannot resume it".into()
            }
        }
    }

    pub fn to_reply(&self) -> Reply {
        match self {
            // Where blocking is not possible (MULTI), a blocking command
            // that finds nothing answers as if it timed out, like Redis.
            CmdError::WouldBlock(on) => on.on_timeout.clone(),
            _ => Reply::Error(self.text()),
        }
    }
}

/// Redis's addReplySubcommandSyntaxError: a subcommand given the wrong
/// arguments (`sub` cut at 128 bytes, as Redis).
pub fn subcommand_syntax(container: &str, sub: &[u8]) -> CmdError {
    CmdError::other(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {container} HELP.",
        String::from_utf8_lossy(&sub[..sub.len().min(128)])
    ))
}

/// Builds the `unknown command` error exactly as Redis 7 words it:
/// `ERR unknown command 'foo', with args beginning with: 'a' 'b' `. Like
/// Redis, the quoted arguments stop once they reach 128 bytes, the last one
/// cut to fit, and the name is cut at 128 bytes.
pub fn unknown_command(args: &[bytes::Bytes]) -> CmdError {
    const QUOTED_MAX: usize = 128;
    let name = args
        .first()
        .map(|a| lossy(a, QUOTED_MAX))
        .unwrap_or_default();
    let mut quoted = String::new();
    for a in args.iter().skip(1) {
        if quoted.len() >= QUOTED_MAX {
            break;
        }
        let room = QUOTED_MAX - quoted.len();
        quoted.push('\'');
        quoted.push_str(&lossy(a, room));
        quoted.push_str("' ");
    }
    CmdError::UnknownCommand(format!(
        "ERR unknown command '{name}', with args beginning with: {quoted}"
    ))
}

fn lossy(b: &[u8], max: usize) -> String {
    let cut = &b[..b.len().min(max)];
    String::from_utf8_lossy(cut).into_owned()
}

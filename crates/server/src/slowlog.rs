//! The slow log: commands that ran longer than `slowlog-log-slower-than`
//! microseconds, newest first, at most `slowlog-max-len` entries.

use bytes::Bytes;
use kvasir_resp::Reply;
use std::collections::VecDeque;

/// Redis keeps at most 32 arguments and 128 bytes of each.
const MAX_ARGS: usize = 32;
const MAX_ARG_LEN: usize = 128;

pub struct Entry {
    pub id: u64,
    pub unix_secs: i64,
    pub micros: u64,
    pub args: Vec<Bytes>,
    pub client_addr: String,
    pub client_name: String,
}

#[derive(Default)]
pub struct SlowLog {
    next_id: u64,
    entries: VecDeque<Entry>,
}

impl SlowLog {
    /// Records `args`, a call of the command named `command` (the
    /// container's name for a subcommand: its secrets are redacted).
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        max_len: usize,
        micros: u64,
        command: &str,
        args: &[Bytes],
        addr: String,
        name: String,
        unix_secs: i64,
    ) {
        let secret = crate::redact::secret_positions(command, args);
        let mut kept: Vec<Bytes> = Vec::with_capacity(args.len().min(MAX_ARGS));
        for (i, a) in args.iter().enumerate() {
            let redacted;
            let a = if secret.as_ref().is_some_and(|s| s[i]) {
                redacted = Bytes::from_static(crate::redact::REDACTED.as_bytes());
                &redacted
            } else {
                a
            };
            if i == MAX_ARGS - 1 && args.len() > MAX_ARGS {
                kept.push(Bytes::from(format!(
                    "... ({} more arguments)",
                    args.len() - MAX_ARGS + 1
                )));
                break;
            }
            if a.len() > MAX_ARG_LEN {
                let mut s = a[..MAX_ARG_LEN].to_vec();
                s.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - MAX_ARG_LEN).as_bytes(),
                );
                kept.push(Bytes::from(s));
            } else {
                // A copy: the argument shares the allocation of the whole
                // request it came in (megabytes for a large one), which
                // the entry would otherwise keep for its lifetime.
                kept.push(Bytes::copy_from_slice(a));
            }
        }
        self.entries.push_front(Entry {
            id: self.next_id,
            unix_secs,
            micros,
            args: kept,
            client_addr: addr,
            client_name: name,
        });
        self.next_id += 1;
        self.entries.truncate(max_len);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// SLOWLOG GET [count]: newest first; count -1 means all.
    pub fn get(&self, count: Option<usize>) -> Reply {
        let n = count.unwrap_or(10).min(self.entries.len());
        Reply::Array(
            self.entries
                .iter()
                .take(n)
                .map(|e| {
                    Reply::Array(vec![
                        Reply::Int(e.id as i64),
                        Reply::Int(e.unix_secs),
                        Reply::Int(e.micros as i64),
                        Reply::Array(e.args.iter().cloned().map(Reply::Bulk).collect()),
                        Reply::bulk_str(&e.client_addr),
                        Reply::bulk_str(&e.client_name),
                    ])
                })
                .collect(),
        )
    }
}

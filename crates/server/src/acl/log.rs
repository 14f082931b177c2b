//! ACL LOG: the refused commands, keys, channels and failed AUTHs, newest
//! first, at most `acllog-max-len`. A refusal like one already logged in
//! the last minute (same reason, context, object and user) counts into it
//! and moves it to the front, as Redis groups them.

use kvasir_resp::Reply;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Refusals this close to a like one are counted into it.
const GROUPING_WINDOW: Duration = Duration::from_secs(60);

/// Where the refused command ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    /// A script's `redis.call`.
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One refusal, as logged.
pub struct Refusal {
    /// `command`, `key`, `channel` or `auth`.
    pub reason: &'static str,
    pub context: Context,
    /// The command's full name, the key, the channel, or `AUTH`.
    pub object: String,
    pub username: String,
    /// The connection's CLIENT LIST line.
    pub client_info: String,
}

struct Entry {
    refusal: Refusal,
    count: u64,
    at: Instant,
}

#[derive(Default)]
pub struct AclLog {
    entries: VecDeque<Entry>,
}

impl AclLog {
    pub fn add(&mut self, refusal: Refusal, max_len: usize) {
        let now = Instant::now();
        let like = self.entries.iter().position(|e| {
            e.refusal.reason == refusal.reason
                && e.refusal.context == refusal.context
                && e.refusal.object == refusal.object
                && e.refusal.username == refusal.username
                && now.duration_since(e.at) < GROUPING_WINDOW
        });
        let entry = match like.and_then(|i| self.entries.remove(i)) {
            Some(mut e) => {
                e.count += 1;
                e.at = now;
                e.refusal.client_info = refusal.client_info;
                e
            }
            None => Entry {
                refusal,
                count: 1,
                at: now,
            },
        };
        self.entries.push_front(entry);
        self.entries.truncate(max_len);
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// ACL LOG [count]: the newest `count` entries (all by default).
    pub fn reply(&self, count: usize) -> Reply {
        let now = Instant::now();
        let entries = self
            .entries
            .iter()
            .take(count)
            .map(|e| {
                let r = &e.refusal;
                Reply::Map(vec![
                    (Reply::bulk_str("count"), Reply::Int(e.count as i64)),
                    (Reply::bulk_str("reason"), Reply::bulk_str(r.reason)),
                    (
                        Reply::bulk_str("context"),
                        Reply::bulk_str(r.context.name()),
                    ),
                    (Reply::bulk_str("object"), Reply::bulk_str(&r.object)),
                    (Reply::bulk_str("username"), Reply::bulk_str(&r.username)),
                    (
                        Reply::bulk_str("age-seconds"),
                        Reply::Double(now.duration_since(e.at).as_millis() as f64 / 1000.0),
                    ),
                    (
                        Reply::bulk_str("client-info"),
                        Reply::bulk_str(&r.client_info),
                    ),
                ])
            })
            .collect();
        Reply::Array(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(object: &str) -> Refusal {
        Refusal {
            reason: "key",
            context: Context::Toplevel,
            object: object.to_string(),
            username: "u".to_string(),
            client_info: "id=1".to_string(),
        }
    }

    fn counts(log: &AclLog) -> Vec<(String, u64)> {
        log.entries
            .iter()
            .map(|e| (e.refusal.object.clone(), e.count))
            .collect()
    }

    #[test]
    fn like_refusals_are_grouped_newest_first_and_bounded() {
        let mut log = AclLog::default();
        log.add(refusal("a"), 2);
        log.add(refusal("b"), 2);
        log.add(refusal("a"), 2);
        assert_eq!(counts(&log), vec![("a".into(), 2), ("b".into(), 1)]);
        log.add(refusal("c"), 2);
        assert_eq!(counts(&log), vec![("c".into(), 1), ("a".into(), 2)]);
        log.reset();
        assert!(counts(&log).is_empty());
    }
}

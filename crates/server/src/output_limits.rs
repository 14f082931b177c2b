//! `client-output-buffer-limit`, as Redis 7 has it: per class of client
//! (normal, replica, pubsub) a hard limit in bytes, and a soft limit that
//! may be exceeded for at most `soft_seconds`; a client over either is
//! closed. What is limited is what waits for a client: the messages
//! queued for it (pub/sub, invalidations, MONITOR lines) that it has not
//! read yet, and its unwritten replies once they pass its reply buffer
//! (`ClientInfo::waiting_bytes`).

use std::time::{Duration, Instant};

/// The limits of one class. Zero disables a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limit {
    pub hard: u64,
    pub soft: u64,
    pub soft_seconds: u64,
}

/// The classes Redis names in `client-output-buffer-limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Normal,
    /// Replicas; a MONITOR connection is one in Redis's model.
    Replica,
    Pubsub,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    pub normal: Limit,
    pub replica: Limit,
    pub pubsub: Limit,
}

/// Redis's defaults.
pub const DEFAULT: &str = "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60";

impl Default for OutputLimits {
    fn default() -> Self {
        OutputLimits {
            normal: Limit::default(),
            replica: Limit {
                hard: 256 << 20,
                soft: 64 << 20,
                soft_seconds: 60,
            },
            pubsub: Limit {
                hard: 32 << 20,
                soft: 8 << 20,
                soft_seconds: 60,
            },
        }
    }
}

impl OutputLimits {
    pub fn of(&self, class: Class) -> Limit {
        match class {
            Class::Normal => self.normal,
            Class::Replica => self.replica,
            Class::Pubsub => self.pubsub,
        }
    }

    /// `self` with the classes `value` names changed (CONFIG SET and
    /// redis.conf set one class or several; the others stay), or Redis's
    /// error text.
    pub fn with(mut self, value: &str) -> Result<OutputLimits, &'static str> {
        let words: Vec<&str> = value.split_whitespace().collect();
        if !words.len().is_multiple_of(4) {
            return Err("Wrong number of arguments in buffer limit configuration.");
        }
        for group in words.chunks(4) {
            let slot = match group[0].to_ascii_lowercase().as_str() {
                "normal" => &mut self.normal,
                "slave" | "replica" => &mut self.replica,
                "pubsub" => &mut self.pubsub,
                _ => return Err("Invalid client class specified in buffer limit configuration."),
            };
            const BAD: &str =
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
            let hard = crate::config::parse_memory(group[1]).ok_or(BAD)?;
            let soft = crate::config::parse_memory(group[2]).ok_or(BAD)?;
            let soft_seconds = group[3].parse::<u64>().map_err(|_| BAD)?;
            *slot = Limit {
                hard,
                soft,
                soft_seconds,
            };
        }
        Ok(self)
    }

    /// CONFIG GET's form: every class, replicas named `slave` as Redis 7.0
    /// writes it.
    pub fn render(&self) -> String {
        let one = |name: &str, l: Limit| format!("{name} {} {} {}", l.hard, l.soft, l.soft_seconds);
        format!(
            "{} {} {}",
            one("normal", self.normal),
            one("slave", self.replica),
            one("pubsub", self.pubsub)
        )
    }
}

impl Limit {
    /// Whether a client with `queued` bytes waiting must be closed now;
    /// `soft_since` remembers since when it has been over the soft limit.
    pub fn exceeded(&self, queued: u64, soft_since: &mut Option<Instant>, now: Instant) -> bool {
        if self.hard != 0 && queued >= self.hard {
            return true;
        }
        if self.soft == 0 || queued < self.soft {
            *soft_since = None;
            return false;
        }
        let since = *soft_since.get_or_insert(now);
        now.duration_since(since) > Duration::from_secs(self.soft_seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_set_one_by_one_and_rendered_as_redis_does() {
        let l = OutputLimits::default();
        assert_eq!(l.render(), DEFAULT);
        let l = l
            .with("normal 1mb 2mb 60 replica 3mb 4mb 70 pubsub 5mb 6mb 80")
            .unwrap_or_default();
        assert_eq!(
            l.render(),
            "normal 1048576 2097152 60 slave 3145728 4194304 70 pubsub 5242880 6291456 80"
        );
        let l = l.with("pubsub 100000 0 0").unwrap_or_default();
        assert_eq!(l.pubsub.hard, 100000);
        assert_eq!(l.normal.hard, 1 << 20);
        let base = OutputLimits::default();
        assert_eq!(
            base.with("wrong number"),
            Err("Wrong number of arguments in buffer limit configuration.")
        );
        assert!(base
            .with("master 10mb 10mb 60")
            .unwrap_err()
            .contains("Invalid client class"));
        for bad in [
            "normal 10mbs 10mb 60",
            "replica 10mb 10mbs 60",
            "pubsub 10mb 10mb 60s",
        ] {
            assert_eq!(
                base.with(bad),
                Err("Error in hard, soft or soft_seconds setting in buffer limit configuration.")
            );
        }
    }

    #[test]
    fn the_soft_limit_allows_its_seconds_and_the_hard_limit_none() {
        let l = Limit {
            hard: 100,
            soft: 10,
            soft_seconds: 2,
        };
        let t0 = Instant::now();
        let mut since = None;
        assert!(!l.exceeded(5, &mut since, t0));
        assert!(!l.exceeded(50, &mut since, t0));
        assert!(!l.exceeded(50, &mut since, t0 + Duration::from_secs(2)));
        assert!(l.exceeded(50, &mut since, t0 + Duration::from_secs(3)));
        // Back under the soft limit: the clock starts again.
        assert!(!l.exceeded(5, &mut since, t0 + Duration::from_secs(3)));
        assert!(!l.exceeded(50, &mut since, t0 + Duration::from_secs(4)));
        assert!(l.exceeded(100, &mut since, t0 + Duration::from_secs(4)));
    }
}

//! The redis.conf parameters of Redis 7.0 that Kvasir accepts in CONFIG SET
//! and reports in CONFIG GET without acting on them (yet), so that tools and
//! test suites that save and restore a setting by name keep working; and
//! the old names Redis 7.0 still answers to (`hash-max-ziplist-value`,
//! `slaveof`...). Defaults are redis-server 7.0.15's (`CONFIG GET *`).
//! The settings Kvasir implements live in [`crate::config::Config`].

use std::collections::BTreeMap;

/// (name, default) of every stored-only parameter.
#[rustfmt::skip]
pub const PARAMETERS: &[(&str, &str)] = &[
    ("acl-pubsub-default", "resetchannels"),
    ("aclfile", ""),
    ("acllog-max-len", "128"),
    ("active-defrag-cycle-max", "25"),
    ("active-defrag-cycle-min", "1"),
    ("active-defrag-ignore-bytes", "104857600"),
    ("active-defrag-max-scan-fields", "1000"),
    ("active-defrag-threshold-lower", "10"),
    ("active-defrag-threshold-upper", "100"),
    ("active-expire-effort", "1"),
    ("activedefrag", "no"),
    ("activerehashing", "yes"),
    ("always-show-logo", "no"),
    ("aof-disable-auto-gc", "no"),
    ("aof-load-truncated", "yes"),
    ("aof-rewrite-incremental-fsync", "yes"),
    ("aof-timestamp-enabled", "no"),
    ("aof-use-rdb-preamble", "yes"),
    ("aof_rewrite_cpulist", ""),
    ("appenddirname", "appendonlydir"),
    ("appendfilename", "appendonly.aof"),
    ("appendfsync", "everysec"),
    ("auto-aof-rewrite-min-size", "67108864"),
    ("auto-aof-rewrite-percentage", "100"),
    ("bgsave_cpulist", ""),
    ("bind-source-addr", ""),
    ("bio_cpulist", ""),
    ("client-output-buffer-limit", "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"),
    ("cluster-allow-pubsubshard-when-down", "yes"),
    ("cluster-allow-reads-when-down", "no"),
    ("cluster-allow-replica-migration", "yes"),
    ("cluster-announce-bus-port", "0"),
    ("cluster-announce-hostname", ""),
    ("cluster-announce-ip", ""),
    ("cluster-announce-port", "0"),
    ("cluster-announce-tls-port", "0"),
    ("cluster-config-file", "nodes.conf"),
    ("cluster-enabled", "no"),
    ("cluster-link-sendbuf-limit", "0"),
    ("cluster-migration-barrier", "1"),
    ("cluster-node-timeout", "15000"),
    ("cluster-port", "0"),
    ("cluster-preferred-endpoint-type", "ip"),
    ("cluster-replica-no-failover", "no"),
    ("cluster-replica-validity-factor", "10"),
    ("cluster-require-full-coverage", "yes"),
    ("crash-log-enabled", "yes"),
    ("crash-memcheck-enabled", "yes"),
    ("daemonize", "no"),
    ("dbfilename", "dump.rdb"),
    ("disable-thp", "yes"),
    ("dynamic-hz", "yes"),
    ("enable-debug-command", "no"),
    ("enable-module-command", "no"),
    ("enable-protected-configs", "no"),
    ("hll-sparse-max-bytes", "3000"),
    ("ignore-warnings", ""),
    ("io-threads-do-reads", "no"),
    ("jemalloc-bg-thread", "yes"),
    ("latency-tracking", "yes"),
    ("latency-tracking-info-percentiles", "50 99 99.9"),
    ("lazyfree-lazy-eviction", "no"),
    ("lazyfree-lazy-expire", "no"),
    ("lazyfree-lazy-server-del", "no"),
    ("lazyfree-lazy-user-del", "no"),
    ("lazyfree-lazy-user-flush", "no"),
    ("lfu-decay-time", "1"),
    ("key-load-delay", "0"),
    ("lfu-log-factor", "10"),
    ("loading-process-events-interval-bytes", "2097152"),
    ("logfile", ""),
    ("masterauth", ""),
    ("masteruser", ""),
    ("maxmemory-clients", "0"),
    ("maxmemory-eviction-tenacity", "10"),
    ("maxmemory-samples", "5"),
    ("min-replicas-max-lag", "10"),
    ("min-replicas-to-write", "0"),
    ("no-appendfsync-on-rewrite", "no"),
    ("oom-score-adj", "no"),
    ("oom-score-adj-values", "0 200 800"),
    ("pidfile", ""),
    ("proc-title-template", "{title} {listen-addr} {server-mode}"),
    ("propagation-error-behavior", "ignore"),
    ("protected-mode", "yes"),
    ("rdb-del-sync-files", "no"),
    ("rdb-key-save-delay", "0"),
    ("rdb-save-incremental-fsync", "yes"),
    ("rdbchecksum", "yes"),
    ("rdbcompression", "yes"),
    ("repl-backlog-size", "1048576"),
    ("repl-backlog-ttl", "3600"),
    ("repl-disable-tcp-nodelay", "no"),
    ("repl-diskless-load", "disabled"),
    ("repl-diskless-sync", "yes"),
    ("repl-diskless-sync-delay", "5"),
    ("repl-diskless-sync-max-replicas", "0"),
    ("repl-ping-replica-period", "10"),
    ("repl-timeout", "60"),
    ("replica-announce-ip", ""),
    ("replica-announce-port", "0"),
    ("replica-announced", "yes"),
    ("replica-ignore-disk-write-errors", "no"),
    ("replica-ignore-maxmemory", "yes"),
    ("replica-lazy-flush", "no"),
    ("replica-priority", "100"),
    ("replica-read-only", "yes"),
    ("replica-serve-stale-data", "yes"),
    ("replicaof", ""),
    ("sanitize-dump-payload", "no"),
    ("server_cpulist", ""),
    ("set-proc-title", "yes"),
    ("shutdown-on-sigint", "default"),
    ("shutdown-on-sigterm", "default"),
    ("shutdown-timeout", "10"),
    ("socket-mark-id", "0"),
    ("stop-writes-on-bgsave-error", "yes"),
    ("stream-node-max-bytes", "4096"),
    ("stream-node-max-entries", "100"),
    ("supervised", "no"),
    ("syslog-enabled", "no"),
    ("syslog-facility", "local0"),
    ("syslog-ident", "redis"),
    ("tcp-backlog", "511"),
    ("tcp-keepalive", "300"),
    ("tls-auth-clients", "yes"),
    ("tls-ca-cert-dir", ""),
    ("tls-ca-cert-file", ""),
    ("tls-cert-file", ""),
    ("tls-ciphers", ""),
    ("tls-ciphersuites", ""),
    ("tls-client-cert-file", ""),
    ("tls-client-key-file", ""),
    ("tls-client-key-file-pass", ""),
    ("tls-cluster", "no"),
    ("tls-dh-params-file", ""),
    ("tls-key-file", ""),
    ("tls-key-file-pass", ""),
    ("tls-port", "0"),
    ("tls-prefer-server-ciphers", "no"),
    ("tls-protocols", ""),
    ("tls-replication", "no"),
    ("tls-session-cache-size", "20480"),
    ("tls-session-cache-timeout", "300"),
    ("tls-session-caching", "yes"),
    ("tracking-table-max-keys", "1000000"),
    ("unixsocket", ""),
    ("unixsocketperm", "0"),
];

/// Redis's hidden parameters (for tests and debugging): CONFIG GET shows
/// them only when asked by their exact name, not to a pattern.
pub const HIDDEN: &[&str] = &[
    "rdb-key-save-delay",
    "key-load-delay",
    "loading-process-events-interval-bytes",
];

/// Parameters Redis refuses to change at run time.
pub const IMMUTABLE: &[&str] = &[
    "daemonize",
    "supervised",
    "pidfile",
    "logfile",
    "syslog-enabled",
    "syslog-ident",
    "syslog-facility",
    "unixsocket",
    "unixsocketperm",
    "tcp-backlog",
    "always-show-logo",
    "aclfile",
    "appenddirname",
    "cluster-enabled",
    "cluster-config-file",
    "cluster-port",
    "enable-protected-configs",
    "enable-debug-command",
    "enable-module-command",
    "io-threads-do-reads",
    "disable-thp",
];

/// (old name, name): Redis 7.0 answers to both.
#[rustfmt::skip]
pub const ALIASES: &[(&str, &str)] = &[
    ("lua-time-limit", "busy-reply-threshold"),
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
    ("slave-lazy-flush", "replica-lazy-flush"),
    ("slave-ignore-maxmemory", "replica-ignore-maxmemory"),
    ("cluster-slave-validity-factor", "cluster-replica-validity-factor"),
    ("slave-priority", "replica-priority"),
    ("cluster-slave-no-failover", "cluster-replica-no-failover"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
    ("slave-read-only", "replica-read-only"),
    ("slave-announce-ip", "replica-announce-ip"),
    ("slave-announce-port", "replica-announce-port"),
    ("slaveof", "replicaof"),
    ("min-slaves-to-write", "min-replicas-to-write"),
];

/// The name an (old) parameter name stands for.
pub fn canonical(name: &str) -> &str {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, real)| real)
}

/// The stored-only parameters' current values.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredParams(BTreeMap<&'static str, String>);

impl Default for StoredParams {
    fn default() -> Self {
        StoredParams(
            PARAMETERS
                .iter()
                .map(|(name, value)| (*name, value.to_string()))
                .collect(),
        )
    }
}

/// Why a value was refused; `None` from [`StoredParams::set`] means the
/// parameter is not one of these.
#[derive(Debug, PartialEq)]
pub enum Refused {
    Immutable,
    Invalid(String),
}

impl StoredParams {
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> + '_ {
        self.0.iter().map(|(k, v)| (*k, v.as_str()))
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(canonical(name)).map(String::as_str)
    }

    /// Sets a stored-only parameter, checking the value against the kind
    /// of its default (yes/no, a number or memory size, or free text).
    pub fn set(&mut self, name: &str, value: &str) -> Option<Result<(), Refused>> {
        let name = canonical(name);
        let (key, default) = PARAMETERS.iter().find(|(n, _)| *n == name)?;
        if IMMUTABLE.contains(key) {
            return Some(Err(Refused::Immutable));
        }
        Some(check(key, default, value).map(|()| {
            self.0.insert(key, normalized(key, default, value));
        }))
    }
}

impl StoredParams {
    /// Sets a parameter at start (a redis.conf line or a `--name value`
    /// flag), where the immutable ones may be set too.
    pub fn set_at_start(&mut self, name: &str, value: &str) -> Result<(), String> {
        let name = canonical(name);
        let Some((key, default)) = PARAMETERS.iter().find(|(n, _)| *n == name) else {
            return Err("Bad directive or wrong number of arguments".into());
        };
        check(key, default, value).map_err(|r| match r {
            Refused::Invalid(why) => why,
            Refused::Immutable => "can't set immutable config".into(),
        })?;
        self.0.insert(key, normalized(key, default, value));
        Ok(())
    }
}

/// Redis 7's enum parameters among the stored ones, with their words in
/// the order Redis lists them (`local`: for clients at 127.0.0.1 / ::1).
const ENUMS: &[(&str, &[&str])] = &[
    ("enable-protected-configs", &["no", "yes", "local"]),
    ("enable-debug-command", &["no", "yes", "local"]),
    ("enable-module-command", &["no", "yes", "local"]),
    ("supervised", &["upstart", "systemd", "auto", "no"]),
    ("oom-score-adj", &["no", "yes", "relative", "absolute"]),
    ("sanitize-dump-payload", &["no", "yes", "clients"]),
    ("repl-diskless-load", &["disabled", "on-empty-db", "swapdb"]),
    (
        "propagation-error-behavior",
        &["ignore", "panic", "panic-on-replicas"],
    ),
    ("acl-pubsub-default", &["allchannels", "resetchannels"]),
    (
        "cluster-preferred-endpoint-type",
        &["ip", "hostname", "unknown-endpoint"],
    ),
];

fn is_bool(s: &str) -> bool {
    matches!(s, "yes" | "no")
}

fn is_number(s: &str) -> bool {
    s.parse::<i64>().is_ok()
}

/// Numbers Kvasir reads from here that Redis bounds below at 0, with
/// Redis's text for a negative one.
const NON_NEGATIVE: &[(&str, &str)] = &[
    (
        "stream-node-max-entries",
        "argument must be between 0 and 9223372036854775807 inclusive",
    ),
    ("stream-node-max-bytes", "argument must be a memory value"),
];

/// Redis's checks by kind: booleans take yes/no, numbers an integer (or a
/// memory value such as `64mb`), text anything; the signals' shutdown
/// settings their flag words.
fn check(name: &str, default: &str, value: &str) -> Result<(), Refused> {
    if matches!(name, "shutdown-on-sigterm" | "shutdown-on-sigint")
        && crate::shutdown::Flags::from_setting(value).is_none()
    {
        return Err(Refused::Invalid(
            "argument(s) must be one of the following: default, save, nosave, now, force".into(),
        ));
    }
    if let Some((_, words)) = ENUMS.iter().find(|(n, _)| *n == name) {
        let value = value.to_ascii_lowercase();
        return if words.contains(&value.as_str()) {
            Ok(())
        } else {
            Err(Refused::Invalid(format!(
                "argument(s) must be one of the following: {}",
                words.join(", ")
            )))
        };
    }
    // A memory value or a percentage of maxmemory, as Redis 7 reads it.
    if name == "maxmemory-clients" {
        if let Some(percent) = value.strip_suffix('%').filter(|p| !p.is_empty()) {
            return match percent.parse::<u64>() {
                Ok(p) if p <= 100 => Ok(()),
                Ok(_) => Err(Refused::Invalid(
                    "percentage argument must be less or equal to 100".into(),
                )),
                Err(_) => Err(Refused::Invalid(
                    "argument must be a memory or percent value".into(),
                )),
            };
        }
        if crate::config::parse_memory(value).is_none() {
            return Err(Refused::Invalid(
                "argument must be a memory or percent value".into(),
            ));
        }
    }
    if value.starts_with('-') {
        if let Some((_, why)) = NON_NEGATIVE.iter().find(|(n, _)| *n == name) {
            return Err(Refused::Invalid((*why).into()));
        }
    }
    if is_bool(default) && !is_bool(&value.to_ascii_lowercase()) {
        return Err(Refused::Invalid("argument must be 'yes' or 'no'".into()));
    }
    if is_number(default) && !is_number(value) && crate::config::parse_memory(value).is_none() {
        return Err(Refused::Invalid(
            "argument couldn't be parsed into an integer".into(),
        ));
    }
    Ok(())
}

/// Booleans are reported in lower case, memory values in bytes, as Redis
/// reports them.
fn normalized(name: &str, default: &str, value: &str) -> String {
    if matches!(name, "shutdown-on-sigterm" | "shutdown-on-sigint") {
        if let Some(flags) = crate::shutdown::Flags::from_setting(value) {
            return flags.render();
        }
    }
    if is_bool(default) || ENUMS.iter().any(|(n, _)| *n == name) {
        return value.to_ascii_lowercase();
    }
    if let Some(percent) = value.strip_suffix('%').and_then(|p| p.parse::<u64>().ok()) {
        return format!("{percent}%");
    }
    if is_number(default) && !is_number(value) {
        if let Some(bytes) = crate::config::parse_memory(value) {
            return bytes.to_string();
        }
    }
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_parameters_are_checked_by_kind_and_aliases_resolve() {
        let mut p = StoredParams::default();
        assert_eq!(p.get("lfu-log-factor"), Some("10"));
        assert_eq!(p.set("lfu-log-factor", "2"), Some(Ok(())));
        assert_eq!(p.get("lfu-log-factor"), Some("2"));
        assert_eq!(p.set("activedefrag", "YES"), Some(Ok(())));
        assert_eq!(p.get("activedefrag"), Some("yes"));
        assert!(matches!(
            p.set("activedefrag", "maybe"),
            Some(Err(Refused::Invalid(_)))
        ));
        assert!(matches!(
            p.set("lfu-log-factor", "ten"),
            Some(Err(Refused::Invalid(_)))
        ));
        assert_eq!(p.set("repl-backlog-size", "2mb"), Some(Ok(())));
        assert_eq!(p.get("repl-backlog-size"), Some("2097152"));
        assert_eq!(p.set("slave-read-only", "no"), Some(Ok(())));
        assert_eq!(p.get("replica-read-only"), Some("no"));
        assert_eq!(p.set("maxmemory-clients", "010%"), Some(Ok(())));
        assert_eq!(p.get("maxmemory-clients"), Some("10%"));
        assert_eq!(
            p.set("maxmemory-clients", "200%"),
            Some(Err(Refused::Invalid(
                "percentage argument must be less or equal to 100".into()
            )))
        );
        assert!(matches!(
            p.set("maxmemory-clients", "lots"),
            Some(Err(Refused::Invalid(_)))
        ));
        assert!(matches!(
            p.set("shutdown-on-sigint", "nosave now"),
            Some(Ok(()))
        ));
        assert!(matches!(
            p.set("shutdown-on-sigint", "save nosave"),
            Some(Err(Refused::Invalid(_)))
        ));
        assert_eq!(p.set("daemonize", "yes"), Some(Err(Refused::Immutable)));
        assert_eq!(p.set("no-such-thing", "1"), None);
        assert_eq!(
            canonical("hash-max-ziplist-value"),
            "hash-max-listpack-value"
        );
        for (alias, real) in ALIASES {
            assert_ne!(alias, real);
            assert!(
                !PARAMETERS.iter().any(|(n, _)| n == alias),
                "{alias} listed twice"
            );
        }
    }
}

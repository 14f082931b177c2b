//! Server settings: what `kvasir server` flags and the TOML file set, and
//! what CONFIG GET / CONFIG SET read and change at run time.

use serde::Deserialize;

impl Config {
    /// `latency-tracking`: per-command latency histograms are kept.
    pub fn latency_tracking(&self) -> bool {
        self.stored.get("latency-tracking") != Some("no")
    }

    /// `oom-score-adj` (no, yes, relative, absolute) and its three
    /// `oom-score-adj-values`.
    pub fn oom_score(&self) -> (String, [i32; 3]) {
        let mode = self.stored.get("oom-score-adj").unwrap_or("no").to_string();
        let values =
            crate::oom_score::parse_values(self.stored.get("oom-score-adj-values").unwrap_or(""))
                .unwrap_or([0, 200, 800]);
        (mode, values)
    }

    /// `jemalloc-bg-thread` (yes unless set to no).
    pub fn background_purge(&self) -> bool {
        self.stored.get("jemalloc-bg-thread") != Some("no")
    }

    /// `client-output-buffer-limit`, parsed (it is stored in the form
    /// CONFIG SET checked).
    pub fn output_limits(&self) -> crate::output_limits::OutputLimits {
        let base = crate::output_limits::OutputLimits::default();
        self.stored
            .get("client-output-buffer-limit")
            .and_then(|v| base.with(v).ok())
            .unwrap_or(base)
    }

    /// `latency-tracking-info-percentiles`: what INFO latencystats reports.
    /// Where the append-only file lives and how it is synced.
    pub fn aof_settings(&self) -> crate::aof::AofSettings {
        let get = |name: &str, default: &str| self.stored.get(name).unwrap_or(default).to_string();
        crate::aof::AofSettings {
            folder: std::path::Path::new(&self.dir).join(get("appenddirname", "appendonlydir")),
            name: get("appendfilename", "appendonly.aof"),
            fsync: crate::aof::AppendFsync::parse(&get("appendfsync", "everysec"))
                .unwrap_or(crate::aof::AppendFsync::EverySec),
            timestamps: get("aof-timestamp-enabled", "no") == "yes",
        }
    }

    pub fn latency_percentiles(&self) -> String {
        self.stored
            .get("latency-tracking-info-percentiles")
            .unwrap_or("50 99 99.9")
            .to_string()
    }
}

/// Every setting of a node. Field names are the TOML keys (kebab-case, as
/// in redis.conf); CONFIG GET uses the same names.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct Config {
    pub port: u16,
    pub bind: String,
    pub dir: String,
    pub requirepass: Option<String>,
    pub maxclients: usize,
    /// Threads of the node (`--threads`, TOML `threads` or `io-threads`,
    /// CONFIG GET io-threads): the data thread plus N-1 I/O threads that do
    /// the client sockets' reads and writes (Valkey 8's io-threads). The
    /// data thread keeps every shard, as in Redis's model.
    #[serde(alias = "io-threads")]
    pub threads: usize,
    pub log_level: String,
    pub databases: usize,
    pub proto_max_bulk_len: usize,
    pub client_query_buffer_limit: usize,
    pub hz: u32,
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: usize,
    /// Milliseconds from which a command is a latency-monitor sample (0:
    /// off).
    pub latency_monitor_threshold: u64,
    /// Standalone snapshot points, `seconds changes ...` as redis.conf's
    /// `save` (empty: none); redis-server's default when no `save` is
    /// given: after an hour with one write, five minutes with 100, a
    /// minute with 10000.
    pub save: String,
    /// `appendonly yes`: a standalone server logs every write to the
    /// append-only file (`crate::aof`); cluster nodes have the Raft log.
    pub appendonly: bool,
    /// The redis.conf the server started with (CONFIG REWRITE), absolute.
    #[serde(skip)]
    pub config_file: Option<String>,
    /// redis.conf's `user <name> <rule> ...` lines: ACL users made at start.
    #[serde(skip)]
    pub acl_users: Vec<Vec<String>>,
    /// `rename-command old new` lines, in order (start only).
    #[serde(skip)]
    pub renames: kvasir_core::table::Renames,
    pub timeout: u64,
    pub maxmemory: u64,
    pub maxmemory_policy: String,
    pub hash_max_listpack_entries: usize,
    pub hash_max_listpack_value: usize,
    pub set_max_intset_entries: usize,
    pub set_max_listpack_entries: usize,
    pub set_max_listpack_value: usize,
    pub zset_max_listpack_entries: usize,
    pub zset_max_listpack_value: usize,
    pub list_max_listpack_size: i64,
    /// list-compress-depth (0..=2147483647 as Redis accepts; quicklists use
    /// at most 65535, Redis's COMPRESS_MAX).
    pub list_compress_depth: u32,
    /// Lua instructions after which a script is stopped (standalone: a
    /// stretch of a script that cannot pause, see `busy_reply_threshold`).
    pub script_max_instructions: u64,
    /// Milliseconds after which a running script makes a standalone
    /// server answer other clients `-BUSY` and take SCRIPT KILL (Redis 7's
    /// busy-reply-threshold, formerly lua-time-limit).
    #[serde(alias = "lua-time-limit")]
    pub busy_reply_threshold: u64,
    /// notify-keyspace-events as class flags (`kvasir_core::notify`).
    pub notify_keyspace_events: u32,
    /// Cluster mode (set with --initial-cluster): this node's id.
    pub node_id: Option<u64>,
    /// Every member as `id=ip:port@cport,...`, the same on every node.
    pub initial_cluster: Option<String>,
    /// The shared secret peers prove in the cluster bus handshake (never
    /// sent in clear); `cluster-secret-file` reads it from a file instead.
    pub cluster_secret: Option<String>,
    pub cluster_secret_file: Option<String>,
    /// Replicas per shard (Raft group size).
    pub replicas: usize,
    /// Shards per node at bootstrap (nodes x this = shards).
    pub shards_per_node: usize,
    /// fsync (acknowledge after a majority synced), async, or none.
    pub wal: String,
    /// readindex (default) or lease.
    pub read_mode: String,
    /// Raft timing: tick length and election / heartbeat in ticks.
    pub raft_tick_ms: u64,
    pub election_ticks: usize,
    pub heartbeat_ticks: usize,
    /// Applied entries after which a shard snapshots and compacts its log.
    pub snapshot_entries: u64,
    /// redis.conf parameters accepted and reported but not acted on.
    #[serde(skip)]
    pub stored: crate::redis_params::StoredParams,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 6379,
            bind: "127.0.0.1".to_string(),
            dir: ".".to_string(),
            requirepass: None,
            maxclients: 10000,
            threads: 1,
            log_level: "notice".to_string(),
            databases: 16,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            hz: 10,
            slowlog_log_slower_than: 10000,
            slowlog_max_len: 128,
            latency_monitor_threshold: 0,
            save: DEFAULT_SAVE.to_string(),
            appendonly: false,
            config_file: None,
            acl_users: Vec::new(),
            renames: kvasir_core::table::Renames::default(),
            timeout: 0,
            maxmemory: 0,
            maxmemory_policy: "noeviction".to_string(),
            hash_max_listpack_entries: 128,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            set_max_listpack_entries: 128,
            set_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            script_max_instructions: kvasir_core::store::DEFAULT_SCRIPT_MAX_INSTRUCTIONS,
            busy_reply_threshold: 5000,
            notify_keyspace_events: 0,
            node_id: None,
            initial_cluster: None,
            cluster_secret: None,
            cluster_secret_file: None,
            replicas: 3,
            shards_per_node: 8,
            wal: "fsync".to_string(),
            read_mode: "readindex".to_string(),
            raft_tick_ms: 50,
            election_ticks: 10,
            heartbeat_ticks: 2,
            snapshot_entries: 100_000,
            stored: Default::default(),
        }
    }
}

/// Why a CONFIG SET was refused.
#[derive(Debug, PartialEq)]
pub enum SetError {
    Unknown,
    Immutable,
    Invalid(String),
}

impl Config {
    /// The encoding thresholds the state machine uses.
    pub fn encoding_limits(&self) -> kvasir_core::EncodingLimits {
        let defaults = kvasir_core::EncodingLimits::default();
        kvasir_core::EncodingLimits {
            hash_max_listpack_entries: self.hash_max_listpack_entries,
            hash_max_listpack_value: self.hash_max_listpack_value,
            set_max_intset_entries: self.set_max_intset_entries,
            set_max_listpack_entries: self.set_max_listpack_entries,
            set_max_listpack_value: self.set_max_listpack_value,
            zset_max_listpack_entries: self.zset_max_listpack_entries,
            zset_max_listpack_value: self.zset_max_listpack_value,
            list_max_listpack_size: self.list_max_listpack_size,
            // Redis's quicklist keeps the depth in 16 bits (COMPRESS_MAX).
            list_compress_depth: self.list_compress_depth.min(65535),
            stream_node_max_entries: self
                .stored_u64("stream-node-max-entries", defaults.stream_node_max_entries),
            stream_node_max_bytes: self
                .stored_u64("stream-node-max-bytes", defaults.stream_node_max_bytes),
            script_max_instructions: self.script_max_instructions,
        }
    }

    /// Sets every threshold of [`Config::encoding_limits`] to Redis's
    /// default: what a cluster's shards use whatever the configuration
    /// says, since the thresholds are replicated state.
    pub fn use_default_encoding_limits(&mut self) {
        let defaults = kvasir_core::EncodingLimits::default();
        for (name, value) in crate::aof::limit_settings(&defaults) {
            // Redis's own defaults: each is a value CONFIG SET takes.
            let _ = self.set(name, &value);
        }
        debug_assert_eq!(self.encoding_limits(), defaults);
    }

    /// A numeric parameter kept with the Redis parameters (checked and
    /// normalized to a plain number when it was set), or `default`.
    fn stored_u64(&self, name: &str, default: u64) -> u64 {
        self.stored
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    /// `tracking-table-max-keys` (stored with the Redis parameters); 0 is
    /// no limit.
    pub fn tracking_table_max_keys(&self) -> usize {
        self.stored
            .get("tracking-table-max-keys")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(1_000_000)
    }

    /// Every (name, value) pair CONFIG GET can report: Kvasir's settings,
    /// the stored-only redis.conf parameters, and the old names of both.
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        let mut all = self.own_entries();
        all.extend(self.stored.iter().map(|(k, v)| (k, v.to_string())));
        for (alias, real) in crate::redis_params::ALIASES {
            if let Some(value) = all.iter().find(|(k, _)| k == real).map(|(_, v)| v.clone()) {
                all.push((alias, value));
            }
        }
        all
    }

    fn own_entries(&self) -> Vec<(&'static str, String)> {
        vec![
            ("port", self.port.to_string()),
            ("bind", self.bind.clone()),
            ("dir", self.dir.clone()),
            ("requirepass", self.requirepass.clone().unwrap_or_default()),
            ("maxclients", self.maxclients.to_string()),
            ("io-threads", self.threads.to_string()),
            ("loglevel", self.log_level.clone()),
            ("databases", self.databases.to_string()),
            ("proto-max-bulk-len", self.proto_max_bulk_len.to_string()),
            (
                "client-query-buffer-limit",
                self.client_query_buffer_limit.to_string(),
            ),
            ("hz", self.hz.to_string()),
            (
                "slowlog-log-slower-than",
                self.slowlog_log_slower_than.to_string(),
            ),
            ("slowlog-max-len", self.slowlog_max_len.to_string()),
            (
                "latency-monitor-threshold",
                self.latency_monitor_threshold.to_string(),
            ),
            ("timeout", self.timeout.to_string()),
            ("maxmemory", self.maxmemory.to_string()),
            ("maxmemory-policy", self.maxmemory_policy.clone()),
            (
                "hash-max-listpack-entries",
                self.hash_max_listpack_entries.to_string(),
            ),
            (
                "hash-max-listpack-value",
                self.hash_max_listpack_value.to_string(),
            ),
            (
                "set-max-intset-entries",
                self.set_max_intset_entries.to_string(),
            ),
            (
                "set-max-listpack-entries",
                self.set_max_listpack_entries.to_string(),
            ),
            (
                "set-max-listpack-value",
                self.set_max_listpack_value.to_string(),
            ),
            (
                "zset-max-listpack-entries",
                self.zset_max_listpack_entries.to_string(),
            ),
            (
                "zset-max-listpack-value",
                self.zset_max_listpack_value.to_string(),
            ),
            (
                "list-max-listpack-size",
                self.list_max_listpack_size.to_string(),
            ),
            ("list-compress-depth", self.list_compress_depth.to_string()),
            (
                "script-max-instructions",
                self.script_max_instructions.to_string(),
            ),
            (
                "busy-reply-threshold",
                self.busy_reply_threshold.to_string(),
            ),
            (
                "notify-keyspace-events",
                kvasir_core::notify::format_flags(self.notify_keyspace_events),
            ),
            (
                "appendonly",
                if self.appendonly { "yes" } else { "no" }.to_string(),
            ),
            ("save", self.save.clone()),
        ]
    }

    /// Applies one CONFIG SET pair.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), SetError> {
        let name = crate::redis_params::canonical(name);
        fn num<T: std::str::FromStr>(v: &str) -> Result<T, SetError> {
            v.parse::<T>().map_err(|_| {
                SetError::Invalid("argument couldn't be parsed into an integer".into())
            })
        }
        fn memory<T: TryFrom<u64>>(v: &str) -> Result<T, SetError> {
            parse_memory(v)
                .and_then(|n| T::try_from(n).ok())
                .ok_or_else(|| SetError::Invalid("argument must be a memory value".into()))
        }
        match name {
            "requirepass" => {
                self.requirepass = (!value.is_empty()).then(|| value.to_string());
            }
            "maxclients" => self.maxclients = num::<usize>(value)?.max(1),
            "loglevel" => match value {
                "debug" | "verbose" | "notice" | "warning" | "nothing" => {
                    self.log_level = value.to_string()
                }
                _ => return Err(SetError::Invalid("argument(s) must be one of the following: debug, verbose, notice, warning, nothing".into())),
            },
            "proto-max-bulk-len" => {
                let v = memory::<usize>(value)?;
                if v < 1024 * 1024 {
                    return Err(SetError::Invalid("argument must be between 1048576 and 9223372036854775807 inclusive".into()));
                }
                self.proto_max_bulk_len = v;
            }
            "client-query-buffer-limit" => self.client_query_buffer_limit = memory::<usize>(value)?.max(1024 * 1024),
            "hz" => self.hz = num::<u32>(value)?.clamp(1, 500),
            "slowlog-log-slower-than" => self.slowlog_log_slower_than = num(value)?,
            "slowlog-max-len" => self.slowlog_max_len = num(value)?,
            "latency-monitor-threshold" => self.latency_monitor_threshold = num(value)?,
            "timeout" => self.timeout = num(value)?,
            "maxmemory" => self.maxmemory = memory(value)?,
            "maxmemory-policy" => match kvasir_core::evict::Policy::parse(value) {
                Some(p) => self.maxmemory_policy = p.name().to_string(),
                None => return Err(SetError::Invalid("argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction".into())),
            },
            "hash-max-listpack-entries" => self.hash_max_listpack_entries = num(value)?,
            "hash-max-listpack-value" => self.hash_max_listpack_value = memory(value)?,
            "set-max-intset-entries" => self.set_max_intset_entries = num(value)?,
            "set-max-listpack-entries" => self.set_max_listpack_entries = num(value)?,
            "set-max-listpack-value" => self.set_max_listpack_value = memory(value)?,
            "zset-max-listpack-entries" => self.zset_max_listpack_entries = num(value)?,
            "zset-max-listpack-value" => self.zset_max_listpack_value = memory(value)?,
            "list-max-listpack-size" => self.list_max_listpack_size = num(value)?,
            "list-compress-depth" => {
                self.list_compress_depth = u32::try_from(num::<i64>(value)?)
                    .ok()
                    .filter(|&d| d <= i32::MAX as u32)
                    .ok_or_else(|| {
                        SetError::Invalid(
                            "argument must be between 0 and 2147483647 inclusive".into(),
                        )
                    })?
            }
            "script-max-instructions" => self.script_max_instructions = num::<u64>(value)?.max(1000),
            "busy-reply-threshold" => self.busy_reply_threshold = num(value)?,
            "notify-keyspace-events" => {
                self.notify_keyspace_events = kvasir_core::notify::parse_flags(value)
                    .ok_or_else(|| SetError::Invalid(kvasir_core::notify::INVALID.into()))?
            }
            "appendonly" => match value.to_ascii_lowercase().as_str() {
                "no" => self.appendonly = false,
                "yes" => self.appendonly = true,
                _ => return Err(SetError::Invalid("argument must be 'yes' or 'no'".into())),
            },
            "appendfsync" => {
                if crate::aof::AppendFsync::parse(value).is_none() {
                    return Err(SetError::Invalid("argument(s) must be one of the following: always, everysec, no".into()));
                }
                self.stored.set(name, &value.to_ascii_lowercase());
            }
            "save" => {
                if save_points(value).is_none() {
                    return Err(SetError::Invalid("Invalid save parameters".into()));
                }
                self.save = value.split_whitespace().collect::<Vec<_>>().join(" ");
            }
            // A running server listens again (crate::listener::listen_on).
            "port" => {
                let port: i64 = value.parse().map_err(|_| {
                    SetError::Invalid("argument couldn't be parsed into an integer".into())
                })?;
                self.port = u16::try_from(port).map_err(|_| {
                    SetError::Invalid("argument must be between 0 and 65535 inclusive".into())
                })?;
            }
            "bind" => self.bind = value.split_whitespace().collect::<Vec<_>>().join(" "),
            "dir" | "io-threads" | "databases" => return Err(SetError::Immutable),
            "client-output-buffer-limit" => {
                let limits = self
                    .output_limits()
                    .with(value)
                    .map_err(|why| SetError::Invalid(why.into()))?;
                self.stored.set(name, &limits.render());
            }
            "oom-score-adj-values" => {
                let values = crate::oom_score::parse_values(value)
                    .map_err(|why| SetError::Invalid(why.into()))?;
                let text = values.map(|v| v.to_string()).join(" ");
                self.stored.set(name, &text);
            }
            "latency-tracking-info-percentiles" => {
                let normalized = percentiles(value)?;
                if let Some(Err(crate::redis_params::Refused::Invalid(why))) =
                    self.stored.set(name, &normalized)
                {
                    return Err(SetError::Invalid(why));
                }
            }
            other => {
                use crate::redis_params::Refused;
                return match self.stored.set(other, value) {
                    Some(Ok(())) if other == "jemalloc-bg-thread" => {
                        crate::memory_stats::set_background_purge(self.background_purge());
                        Ok(())
                    }
                    Some(Ok(())) => Ok(()),
                    Some(Err(Refused::Immutable)) => Err(SetError::Immutable),
                    Some(Err(Refused::Invalid(why))) => Err(SetError::Invalid(why)),
                    None => Err(SetError::Unknown),
                };
            }
        }
        Ok(())
    }
}

/// `latency-tracking-info-percentiles` as Redis keeps it: numbers from 0
/// to 100, written back in their shortest form ("50.0" is "50").
fn percentiles(value: &str) -> Result<String, SetError> {
    let mut out = Vec::new();
    for p in value.split_whitespace() {
        let v: f64 = p
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| {
                SetError::Invalid("Invalid latency-tracking-info-percentiles parameters".into())
            })?;
        if !(0.0..=100.0).contains(&v) {
            return Err(SetError::Invalid(
                "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                    .into(),
            ));
        }
        out.push(format!("{v}"));
    }
    Ok(out.join(" "))
}

/// redis-server's `save` points when none are configured.
pub const DEFAULT_SAVE: &str = "3600 1 300 100 60 10000";

/// `save` points as (seconds, changes) pairs; None if malformed. An empty
/// string (or `""`) is no points.
pub fn save_points(text: &str) -> Option<Vec<(u64, u64)>> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if !words.len().is_multiple_of(2) {
        return None;
    }
    words
        .chunks(2)
        .map(|p| Some((p[0].parse().ok()?, p[1].parse().ok()?)))
        .collect()
}

/// Parses a redis.conf memory value: a plain number of bytes or one with a
/// unit (`1k` = 1000, `1kb` = 1024, `m`/`mb`, `g`/`gb`), case-insensitive.
pub fn parse_memory(text: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    let units: [(&str, u64); 6] = [
        ("gb", 1 << 30),
        ("mb", 1 << 20),
        ("kb", 1 << 10),
        ("g", 1_000_000_000),
        ("m", 1_000_000),
        ("k", 1_000),
    ];
    let (digits, scale) = units
        .iter()
        .find_map(|(suffix, scale)| lower.strip_suffix(suffix).map(|d| (d, *scale)))
        .unwrap_or((lower.as_str(), 1));
    let digits = digits.strip_suffix('b').unwrap_or(digits);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_units_like_redis_conf() {
        assert_eq!(parse_memory("1048576"), Some(1048576));
        assert_eq!(parse_memory("1mb"), Some(1 << 20));
        assert_eq!(parse_memory("2GB"), Some(2 << 30));
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("100b"), Some(100));
        assert_eq!(parse_memory("-1"), None);
        assert_eq!(parse_memory("mb"), None);
        assert_eq!(parse_memory("1xb"), None);
    }

    #[test]
    fn immutable_and_unknown_settings_are_refused() {
        let mut c = Config::default();
        assert_eq!(c.set("databases", "1"), Err(SetError::Immutable));
        assert_eq!(c.set("nope", "1"), Err(SetError::Unknown));
        assert!(c.set("maxmemory", "1gb").is_ok());
        // Entry counts are integers; only sizes take memory units.
        assert!(c.set("hash-max-listpack-entries", "1kb").is_err());
        assert!(c.set("hash-max-listpack-value", "1kb").is_ok());
        assert_eq!(c.hash_max_listpack_value, 1024);
        assert_eq!(c.maxmemory, 1 << 30);
    }

    /// Every threshold goes back to Redis's default (cluster mode), each
    /// through CONFIG SET's own parsing.
    #[test]
    fn default_encoding_limits_replace_every_configured_one() {
        let defaults = kvasir_core::EncodingLimits::default();
        for (name, value) in crate::aof::limit_settings(&defaults) {
            let mut c = Config::default();
            let other = if value == "-2" {
                "-1".to_string()
            } else {
                format!("{value}1")
            };
            c.set(name, &other)
                .unwrap_or_else(|e| panic!("{name} {other}: {e:?}"));
            assert_ne!(c.encoding_limits(), defaults, "{name}");
            c.use_default_encoding_limits();
            assert_eq!(c.encoding_limits(), defaults, "{name}");
        }
    }
}

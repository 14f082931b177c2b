//! What every workload shares: the environment (target, credentials,
//! timeouts), connecting a set of clients, running connection tasks under
//! the sampler for a duration, recovering from broken connections, the
//! batched MSET preload, and the reply checks that count errors.

pub mod kv;
pub mod online;
pub mod sweep;
pub mod ycsb;

use crate::cli::Common;
use crate::client::{Auth, Batch, Client, ClusterShared, ExecError, Replies, Target};
use crate::gen;
use crate::metrics::{Metrics, Recorded, Sampler, SamplerOptions};
use crate::report::LoadReport;
use crate::resp::Reply;
use std::future::Future;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The target and connection settings of one `kvasir bench` invocation.
pub struct Env {
    pub common: Common,
    pub addr: String,
    pub cluster: Option<Arc<ClusterShared>>,
    pub auth: Auth,
    pub timeout: Duration,
    pub progress: bool,
}

impl Env {
    /// Checks the flags; in cluster mode reads the slot map.
    pub async fn new(common: &Common) -> Result<Env, String> {
        if !(common.timeout > 0.0 && common.timeout.is_finite()) {
            return Err("--timeout must be a positive number of seconds".into());
        }
        let addr = if common.host.contains(':') && !common.host.starts_with('[') {
            format!("[{}]:{}", common.host, common.port)
        } else {
            format!("{}:{}", common.host, common.port)
        };
        let auth = Auth {
            user: common.user.clone(),
            password: common.password.clone(),
        };
        let timeout = Duration::from_secs_f64(common.timeout);
        let cluster = if common.cluster {
            Some(
                ClusterShared::discover(vec![addr.clone()], &auth, timeout)
                    .await
                    .map_err(|e| format!("cannot read the cluster's slot map from {addr}: {e}"))?,
            )
        } else {
            None
        };
        let progress = !common.no_progress && (common.progress || std::io::stderr().is_terminal());
        Ok(Env {
            common: common.clone(),
            addr,
            cluster,
            auth,
            timeout,
            progress,
        })
    }

    fn target(&self) -> Target {
        match &self.cluster {
            Some(c) => Target::Cluster(c.clone()),
            None => Target::Single(self.addr.clone()),
        }
    }

    /// One connected client.
    pub async fn client(&self) -> Result<Client, String> {
        Client::connect(self.target(), self.auth.clone(), self.timeout)
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", self.addr))
    }

    /// `n` connected clients.
    pub async fn clients(&self, n: usize) -> Result<Vec<Client>, String> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.client().await?);
        }
        Ok(out)
    }

    /// A batch that routes by key slot in cluster mode.
    pub fn batch(&self) -> Batch {
        Batch::new(self.cluster.is_some())
    }

    /// Sampler options with the common flags.
    pub fn sampler(&self, interval: Duration) -> SamplerOptions {
        SamplerOptions {
            interval,
            progress: self.progress,
            server_pids: self.common.server_pid.clone(),
            printer: None,
        }
    }
}

/// Runs one task per client under a sampler until `duration` passes (or
/// the tasks stop on their own, e.g. an operation budget), then returns
/// what the sampler recorded.
pub async fn measure<F, Fut>(
    metrics: Arc<Metrics>,
    opts: SamplerOptions,
    clients: Vec<Client>,
    duration: Option<Duration>,
    mut task: F,
) -> Recorded
where
    F: FnMut(usize, Client, Arc<Metrics>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let sampler = Sampler::start(metrics.clone(), opts);
    let handles: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, c)| tokio::spawn(task(i, c, metrics.clone())))
        .collect();
    let stopper = duration.map(|d| {
        let m = metrics.clone();
        tokio::spawn(async move {
            tokio::time::sleep(d).await;
            m.stop.store(true, Ordering::Relaxed);
        })
    });
    for h in handles {
        if let Err(e) = h.await {
            metrics.note_error(|| format!("a connection task failed: {e}"));
            metrics.errors.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
    metrics.stop.store(true, Ordering::Relaxed);
    if let Some(s) = stopper {
        s.abort();
    }
    sampler.finish()
}

/// Executes a batch; on failure counts its commands as timed out or
/// failed, reconnects (counted) and returns false.
pub async fn exec(client: &mut Client, batch: &Batch, replies: &mut Replies, m: &Metrics) -> bool {
    match client.exec(batch, replies).await {
        Ok(()) => true,
        Err(e) => {
            let n = batch.len() as u64;
            match &e {
                ExecError::Timeout => m.errors.timeouts.fetch_add(n, Ordering::Relaxed),
                _ => m.errors.failed.fetch_add(n, Ordering::Relaxed),
            };
            m.note_error(|| format!("request failed: {e}"));
            while !m.stopped() {
                match client.reconnect().await {
                    Ok(()) => {
                        m.errors.reconnects.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
            false
        }
    }
}

/// A reply or error text on one line: control bytes escaped, cut at 120.
fn show(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let escaped: String = text.trim_end().escape_debug().collect();
    if escaped.chars().count() > 120 {
        let cut: String = escaped.chars().take(120).collect();
        format!("{cut}...")
    } else {
        escaped
    }
}

/// Counts an error reply; true if `r` is one.
pub fn count_error_reply(r: Reply<'_>, m: &Metrics, what: &str) -> bool {
    match r.error() {
        Some(e) => {
            m.errors.error_replies.fetch_add(1, Ordering::Relaxed);
            m.note_error(|| format!("{what}: error reply {}", show(e)));
            true
        }
        None => false,
    }
}

/// Counts a wrong value.
pub fn wrong_value(r: Reply<'_>, m: &Metrics, what: impl FnOnce() -> String) {
    m.errors.wrong_values.fetch_add(1, Ordering::Relaxed);
    m.note_error(|| format!("{}: wrong reply {}", what(), show(r.0)));
}

/// Checks a `+OK` reply.
pub fn check_ok(r: Reply<'_>, m: &Metrics, what: &str) -> bool {
    if r.is_ok() {
        return true;
    }
    if !count_error_reply(r, m, what) {
        wrong_value(r, m, || what.to_string());
    }
    false
}

/// Appends `SET key value` (`set`) or `GET key` for key `id`, with the
/// value `gen::kv_value` makes for `id`.
pub fn push_kv(batch: &mut Batch, keys: KeyFormat, value_len: usize, id: u64, set: bool) {
    if set {
        batch
            .begin(3)
            .arg(b"SET")
            .key_with(keys.len, |d| keys.write(id, d))
            .arg_with(value_len, |d| gen::kv_value(id, d))
            .end();
    } else {
        batch
            .begin(2)
            .arg(b"GET")
            .key_with(keys.len, |d| keys.write(id, d))
            .end();
    }
}

/// Checks the reply to `push_kv`'s command: `+OK` for a SET, for a GET the
/// value of `id`; counts an error reply or a wrong value. True if right.
pub fn check_kv(
    r: Reply<'_>,
    m: &Metrics,
    keys: KeyFormat,
    value_len: usize,
    id: u64,
    set: bool,
) -> bool {
    if set {
        return check_ok(r, m, "SET");
    }
    match r.bulk() {
        Some(Some(v)) if gen::kv_value_matches(id, value_len, v) => true,
        _ => {
            if !count_error_reply(r, m, "GET") {
                wrong_value(r, m, || {
                    format!("GET {}", String::from_utf8_lossy(&keys.to_vec(id)))
                });
            }
            false
        }
    }
}

/// Fixed-size numeric keys: `prefix` + zero-padded id.
#[derive(Clone, Copy, Debug)]
pub struct KeyFormat {
    pub prefix: &'static [u8],
    pub len: usize,
}

impl KeyFormat {
    /// Checks that `count` ids fit in the key length.
    pub fn new(prefix: &'static [u8], len: usize, count: u64) -> Result<KeyFormat, String> {
        let need = prefix.len() + gen::digits_for(count);
        if len < need {
            return Err(format!(
                "keys of {len} bytes cannot hold {count} distinct keys (need at least {need})"
            ));
        }
        Ok(KeyFormat { prefix, len })
    }

    pub fn write(&self, id: u64, out: &mut [u8]) {
        gen::kv_key(self.prefix, id, out)
    }

    pub fn to_vec(&self, id: u64) -> Vec<u8> {
        let mut v = vec![0; self.len];
        self.write(id, &mut v);
        v
    }
}

/// Writes keys `0..count` with their values, `per_batch` keys per MSET
/// (per pipelined batch of SETs in cluster mode, where keys of one MSET
/// would span slots), over `conns` connections.
pub async fn load_keys(
    env: &Env,
    keys: KeyFormat,
    value_len: usize,
    count: u64,
    per_batch: usize,
    conns: usize,
) -> Result<LoadReport, String> {
    let per_batch = per_batch.max(1) as u64;
    let clients = env.clients(conns.max(1)).await?;
    let next = Arc::new(AtomicU64::new(0));
    let metrics = Metrics::new(&["load"], None);
    let started = Instant::now();
    let cluster = env.cluster.is_some();
    let mut handles = Vec::new();
    for mut client in clients {
        let next = next.clone();
        let m = metrics.clone();
        let mut batch = env.batch();
        handles.push(tokio::spawn(async move {
            let mut replies = Replies::default();
            loop {
                let first = next.fetch_add(per_batch, Ordering::Relaxed);
                if first >= count {
                    break;
                }
                let last = (first + per_batch).min(count);
                batch.clear();
                if cluster {
                    for id in first..last {
                        push_kv(&mut batch, keys, value_len, id, true);
                    }
                } else {
                    batch.begin(1 + 2 * (last - first) as usize).arg(b"MSET");
                    for id in first..last {
                        batch
                            .key_with(keys.len, |d| keys.write(id, d))
                            .arg_with(value_len, |d| gen::kv_value(id, d));
                    }
                    batch.end();
                }
                let mut tries = 0;
                loop {
                    if exec(&mut client, &batch, &mut replies, &m).await {
                        for k in 0..replies.len() {
                            check_ok(replies.get(k), &m, "load");
                        }
                        break;
                    }
                    tries += 1;
                    if tries > 3 {
                        return;
                    }
                }
            }
        }));
    }
    for h in handles {
        let _ = h.await;
    }
    let secs = started.elapsed().as_secs_f64();
    let errors = metrics.errors.snapshot();
    if errors.total > 0 {
        return Err(format!(
            "loading {count} keys failed ({}): {}",
            errors.describe(),
            metrics.first_error().unwrap_or_default()
        ));
    }
    Ok(LoadReport {
        command: if cluster { "SET" } else { "MSET" }.to_string(),
        ops: count,
        threads: conns.max(1),
        seconds: secs,
        ops_per_sec: if secs > 0.0 { count as f64 / secs } else { 0.0 },
    })
}

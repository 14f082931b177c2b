//! `ycsb`: the YCSB core workloads A-F with YCSB's definitions, storing
//! records the way YCSB's Redis binding (`site.ycsb.db.RedisClient`) does,
//! so the numbers compare with Java YCSB against the same server:
//!
//! - insert: `HMSET key field0 v0 ... field9 v9`, then
//!   `ZADD _indices <String.hashCode(key)> key`;
//! - read: `HGETALL key` (readallfields=true) or `HMGET key fieldN`;
//! - update: `HMSET key fieldN v` (writeallfields=false) or all fields;
//! - scan: `ZRANGEBYSCORE _indices <hash(startkey)> +inf LIMIT 0 <len>`,
//!   then a read of every key returned;
//! - read-modify-write: a read, then an update (timed as READ, UPDATE and
//!   READ-MODIFY-WRITE, as YCSB's DBWrapper and CoreWorkload do).
//!
//! Keys are "user" + fnvhash64(keynum); values are YCSB's deterministic
//! values (`dataintegrity`), so every read is checked field by field.

use super::{count_error_reply, exec, measure, wrong_value, Env};
use crate::cli::YcsbArgs;
use crate::client::{Batch, Client, Replies};
use crate::gen::{self, AckCounter, Rng, ScrambledZipfian, SkewedLatest};
use crate::metrics::{LocalRec, Metrics};
use crate::report::{latency_table, ycsb_table, Report, RunReport, YcsbRow};
use crate::resp::Reply;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The index sorted set of YCSB's Redis binding.
pub const INDEX_KEY: &[u8] = b"_indices";

/// Operation types, in the order YCSB lists them.
pub const OPS: [&str; 5] = ["READ", "READ-MODIFY-WRITE", "UPDATE", "INSERT", "SCAN"];
const READ: usize = 0;
const RMW: usize = 1;
const UPDATE: usize = 2;
const INSERT: usize = 3;
const SCAN: usize = 4;

/// The properties of YCSB's workload files (workloads/workloada ... f).
pub fn workload_defaults(letter: char) -> Option<Vec<(&'static str, &'static str)>> {
    let common = [("recordcount", "1000"), ("operationcount", "1000")];
    // Each file sets all five proportions (CoreWorkload's own defaults are
    // read 0.95 / update 0.05).
    let specific: &[(&str, &str)] = match letter {
        'a' => &[
            ("readproportion", "0.5"),
            ("updateproportion", "0.5"),
            ("scanproportion", "0"),
            ("insertproportion", "0"),
            ("requestdistribution", "zipfian"),
        ],
        'b' => &[
            ("readproportion", "0.95"),
            ("updateproportion", "0.05"),
            ("scanproportion", "0"),
            ("insertproportion", "0"),
            ("requestdistribution", "zipfian"),
        ],
        'c' => &[
            ("readproportion", "1"),
            ("updateproportion", "0"),
            ("scanproportion", "0"),
            ("insertproportion", "0"),
            ("requestdistribution", "zipfian"),
        ],
        'd' => &[
            ("readproportion", "0.95"),
            ("updateproportion", "0"),
            ("scanproportion", "0"),
            ("insertproportion", "0.05"),
            ("requestdistribution", "latest"),
        ],
        'e' => &[
            ("readproportion", "0"),
            ("updateproportion", "0"),
            ("scanproportion", "0.95"),
            ("insertproportion", "0.05"),
            ("requestdistribution", "zipfian"),
            ("maxscanlength", "100"),
            ("scanlengthdistribution", "uniform"),
        ],
        'f' => &[
            ("readproportion", "0.5"),
            ("updateproportion", "0"),
            ("scanproportion", "0"),
            ("insertproportion", "0"),
            ("readmodifywriteproportion", "0.5"),
            ("requestdistribution", "zipfian"),
        ],
        _ => return None,
    };
    Some(common.iter().chain(specific).copied().collect())
}

/// The resolved properties of one run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Props {
    pub workload: char,
    pub recordcount: u64,
    pub operationcount: u64,
    pub threads: usize,
    pub fieldcount: usize,
    pub fieldlength: usize,
    pub readallfields: bool,
    pub writeallfields: bool,
    pub read: f64,
    pub update: f64,
    pub insert: f64,
    pub scan: f64,
    pub rmw: f64,
    pub requestdistribution: String,
    pub maxscanlength: u64,
    pub minscanlength: u64,
    pub scanlengthdistribution: String,
    pub zeropadding: usize,
    pub orderedinserts: bool,
    pub maxexecutiontime: Option<f64>,
}

impl Props {
    /// Defaults of CoreWorkload, then the workload file, then `-p`, then flags.
    pub fn resolve(letter: char, args: &YcsbArgs) -> Result<Props, String> {
        let mut p: BTreeMap<String, String> = BTreeMap::new();
        for (k, v) in workload_defaults(letter).ok_or(format!("unknown workload {letter}"))? {
            p.insert(k.into(), v.into());
        }
        for kv in &args.props {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("-p {kv}: expected NAME=VALUE"))?;
            p.insert(k.trim().to_string(), v.trim().to_string());
        }
        let get = |k: &str, d: &str| p.get(k).cloned().unwrap_or_else(|| d.to_string());
        fn num<T: std::str::FromStr>(k: &str, v: String) -> Result<T, String> {
            v.parse()
                .map_err(|_| format!("property {k}={v} is not a number"))
        }
        let boolean = |k: &str, d: &str| -> Result<bool, String> {
            match get(k, d).as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                v => Err(format!("property {k}={v} is not true/false")),
            }
        };
        if get("fieldlengthdistribution", "constant") != "constant" {
            return Err("only fieldlengthdistribution=constant is supported".into());
        }
        let props = Props {
            workload: letter,
            recordcount: match args.recordcount {
                Some(v) => v,
                None => num("recordcount", get("recordcount", "1000"))?,
            },
            operationcount: match args.operationcount {
                Some(v) => v,
                None => num("operationcount", get("operationcount", "1000"))?,
            },
            threads: match args.threads {
                Some(v) => v,
                None => num("threadcount", get("threadcount", "1"))?,
            },
            fieldcount: num("fieldcount", get("fieldcount", "10"))?,
            fieldlength: num("fieldlength", get("fieldlength", "100"))?,
            readallfields: boolean("readallfields", "true")?,
            writeallfields: boolean("writeallfields", "false")?,
            read: num("readproportion", get("readproportion", "0.95"))?,
            update: num("updateproportion", get("updateproportion", "0.05"))?,
            insert: num("insertproportion", get("insertproportion", "0"))?,
            scan: num("scanproportion", get("scanproportion", "0"))?,
            rmw: num(
                "readmodifywriteproportion",
                get("readmodifywriteproportion", "0"),
            )?,
            requestdistribution: get("requestdistribution", "uniform"),
            maxscanlength: num("maxscanlength", get("maxscanlength", "1000"))?,
            minscanlength: num("minscanlength", get("minscanlength", "1"))?,
            scanlengthdistribution: get("scanlengthdistribution", "uniform"),
            zeropadding: num("zeropadding", get("zeropadding", "1"))?,
            orderedinserts: get("insertorder", "hashed") == "ordered",
            maxexecutiontime: match args.runtime {
                Some(v) => Some(v),
                None => match p.get("maxexecutiontime") {
                    Some(v) => Some(num("maxexecutiontime", v.clone())?),
                    None => None,
                },
            },
        };
        if props.recordcount == 0 || props.threads == 0 || props.fieldcount == 0 {
            return Err("recordcount, threadcount and fieldcount must be at least 1".into());
        }
        if !["zipfian", "latest", "uniform"].contains(&props.requestdistribution.as_str()) {
            return Err(format!(
                "requestdistribution={} is not supported (zipfian, latest, uniform)",
                props.requestdistribution
            ));
        }
        if props.scanlengthdistribution != "uniform" {
            return Err("only scanlengthdistribution=uniform is supported".into());
        }
        if props.minscanlength == 0 || props.minscanlength > props.maxscanlength {
            return Err("scan lengths must satisfy 1 <= minscanlength <= maxscanlength".into());
        }
        if props.read + props.update + props.insert + props.scan + props.rmw <= 0.0 {
            return Err("all operation proportions are zero".into());
        }
        Ok(props)
    }
}

/// Which key a transaction uses (CoreWorkload's keychooser).
#[derive(Clone)]
enum Chooser {
    Zipfian(ScrambledZipfian),
    Latest(SkewedLatest),
    Uniform { lb: u64, ub: u64 },
}

/// The per-run state shared by the threads.
struct Shared {
    props: Props,
    insert_seq: AckCounter,
    chooser: Chooser,
}

impl Shared {
    fn new(props: Props) -> Shared {
        let rc = props.recordcount;
        let chooser = match props.requestdistribution.as_str() {
            // Room for the records inserted during the run (2 x the
            // expected inserts, YCSB's fudge factor), so the popularity of
            // existing keys does not shift as the key space grows.
            "zipfian" => {
                let expected_new = (props.operationcount as f64 * props.insert * 2.0) as u64;
                Chooser::Zipfian(ScrambledZipfian::new(0, rc + expected_new))
            }
            "latest" => Chooser::Latest(SkewedLatest::new(rc - 1)),
            _ => Chooser::Uniform { lb: 0, ub: rc - 1 },
        };
        Shared {
            insert_seq: AckCounter::new(rc),
            props,
            chooser,
        }
    }
}

/// One YCSB client thread: its connection, generators and buffers.
struct Worker {
    client: Client,
    rng: Rng,
    chooser: Chooser,
    shared: Arc<Shared>,
    m: Arc<Metrics>,
    batch: Batch,
    replies: Replies,
    rec: LocalRec,
    key: Vec<u8>,
    value: Vec<u8>,
    field: Vec<u8>,
    scan_keys: Vec<Vec<u8>>,
}

fn field_name(i: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(b"field");
    crate::resp::put_u64(out, i);
}

impl Worker {
    fn new(client: Client, shared: Arc<Shared>, m: Arc<Metrics>, seed: u64, stream: u64) -> Worker {
        Worker {
            batch: Batch::new(client.routes()),
            client,
            rng: gen::rng(seed, stream),
            chooser: shared.chooser.clone(),
            shared,
            m,
            replies: Replies::default(),
            rec: LocalRec::new(OPS.len()),
            key: Vec::new(),
            value: Vec::new(),
            field: Vec::new(),
            scan_keys: Vec::new(),
        }
    }

    fn props(&self) -> &Props {
        &self.shared.props
    }

    /// CoreWorkload.nextKeynum: never a record not yet acknowledged.
    fn next_keynum(&mut self) -> u64 {
        let limit = self.shared.insert_seq.last_value();
        match &mut self.chooser {
            Chooser::Latest(g) => g.next(limit, &mut self.rng),
            Chooser::Zipfian(g) => loop {
                let k = g.next(&mut self.rng);
                if k <= limit {
                    break k;
                }
            },
            Chooser::Uniform { lb, ub } => loop {
                let k = gen::uniform(*lb, *ub, &mut self.rng);
                if k <= limit {
                    break k;
                }
            },
        }
    }

    fn build_key(&mut self, keynum: u64) {
        let p = &self.shared.props;
        gen::ycsb_key(keynum, p.zeropadding, p.orderedinserts, &mut self.key);
    }

    async fn send(&mut self) -> bool {
        exec(&mut self.client, &self.batch, &mut self.replies, &self.m).await
    }

    /// HMSET of all fields (insert, writeallfields update) or of one.
    fn encode_hmset(&mut self, only: Option<u64>) {
        let p = &self.shared.props;
        let (fieldcount, fieldlength) = (p.fieldcount as u64, p.fieldlength);
        let fields = match only {
            Some(f) => f..f + 1,
            None => 0..fieldcount,
        };
        self.batch.clear();
        self.batch
            .begin(2 + 2 * (fields.end - fields.start) as usize)
            .arg(b"HMSET")
            .key(&self.key);
        for f in fields {
            field_name(f, &mut self.field);
            gen::ycsb_value(&self.key, &self.field, fieldlength, &mut self.value);
            self.batch.arg(&self.field).arg(&self.value);
        }
        self.batch.end();
    }

    async fn insert(&mut self, keynum: u64) -> bool {
        self.build_key(keynum);
        self.encode_hmset(None);
        if !self.send().await || !super::check_ok(self.replies.get(0), &self.m, "HMSET") {
            return false;
        }
        let score = gen::java_string_hash(&self.key) as i64;
        self.batch.clear();
        self.batch
            .begin(4)
            .arg(b"ZADD")
            .key(INDEX_KEY)
            .arg_i64(score)
            .arg(&self.key)
            .end();
        if !self.send().await {
            return false;
        }
        let r = self.replies.get(0);
        if r.int().is_some() {
            true
        } else {
            if !count_error_reply(r, &self.m, "ZADD") {
                wrong_value(r, &self.m, || "ZADD _indices".into());
            }
            false
        }
    }

    async fn update(&mut self, keynum: u64) -> bool {
        self.build_key(keynum);
        let only = if self.props().writeallfields {
            None
        } else {
            Some(gen::uniform(
                0,
                self.props().fieldcount as u64 - 1,
                &mut self.rng,
            ))
        };
        self.encode_hmset(only);
        self.send().await && super::check_ok(self.replies.get(0), &self.m, "HMSET")
    }

    /// Reads the record in `self.key` (HGETALL, or HMGET of one field) and
    /// checks every value.
    async fn read_current(&mut self) -> bool {
        self.batch.clear();
        let one = if self.props().readallfields {
            self.batch.begin(2).arg(b"HGETALL").key(&self.key).end();
            None
        } else {
            let f = gen::uniform(0, self.props().fieldcount as u64 - 1, &mut self.rng);
            field_name(f, &mut self.field);
            self.batch
                .begin(3)
                .arg(b"HMGET")
                .key(&self.key)
                .arg(&self.field)
                .end();
            Some(f)
        };
        if !self.send().await {
            return false;
        }
        let r = self.replies.get(0);
        let ok = match one {
            None => check_record(
                r,
                &self.key,
                self.shared.props.fieldcount,
                self.shared.props.fieldlength,
                &mut self.value,
            ),
            Some(_) => match r
                .array()
                .and_then(|mut it| it.next())
                .and_then(|v| v.bulk())
            {
                Some(Some(v)) => {
                    gen::ycsb_value(
                        &self.key,
                        &self.field,
                        self.shared.props.fieldlength,
                        &mut self.value,
                    );
                    v == self.value.as_slice()
                }
                _ => false,
            },
        };
        if !ok && !count_error_reply(r, &self.m, "read") {
            let key = String::from_utf8_lossy(&self.key).into_owned();
            wrong_value(r, &self.m, || format!("read {key}"));
        }
        ok
    }

    async fn read(&mut self, keynum: u64) -> bool {
        self.build_key(keynum);
        self.read_current().await
    }

    async fn scan(&mut self, keynum: u64) -> bool {
        self.build_key(keynum);
        let (min, max) = (self.props().minscanlength, self.props().maxscanlength);
        let len = gen::uniform(min, max, &mut self.rng);
        let score = gen::java_string_hash(&self.key) as i64;
        self.batch.clear();
        self.batch
            .begin(7)
            .arg(b"ZRANGEBYSCORE")
            .key(INDEX_KEY)
            .arg_i64(score)
            .arg(b"+inf")
            .arg(b"LIMIT")
            .arg(b"0")
            .arg_i64(len as i64)
            .end();
        if !self.send().await {
            return false;
        }
        let r = self.replies.get(0);
        let Some(items) = r.array() else {
            if !count_error_reply(r, &self.m, "ZRANGEBYSCORE") {
                wrong_value(r, &self.m, || "ZRANGEBYSCORE _indices".into());
            }
            return false;
        };
        let mut keys = std::mem::take(&mut self.scan_keys);
        let mut n = 0;
        for item in items {
            match item.bulk() {
                Some(Some(k)) => {
                    if keys.len() <= n {
                        keys.push(Vec::new());
                    }
                    keys[n].clear();
                    keys[n].extend_from_slice(k);
                    n += 1;
                }
                _ => {
                    wrong_value(item, &self.m, || "ZRANGEBYSCORE element".into());
                    self.scan_keys = keys;
                    return false;
                }
            }
        }
        if n as u64 > len {
            wrong_value(r, &self.m, || format!("ZRANGEBYSCORE LIMIT 0 {len}"));
        }
        let mut ok = true;
        for k in keys.iter().take(n) {
            self.key.clear();
            self.key.extend_from_slice(k);
            ok &= self.read_current().await;
        }
        self.scan_keys = keys;
        ok
    }

    /// One transaction of the run phase.
    async fn transaction(&mut self) {
        let p = &self.shared.props;
        let total = p.read + p.update + p.insert + p.scan + p.rmw;
        let mut x = rand::RngExt::random::<f64>(&mut self.rng) * total;
        let weights = [
            (READ, p.read),
            (UPDATE, p.update),
            (INSERT, p.insert),
            (SCAN, p.scan),
            (RMW, p.rmw),
        ];
        let mut op = READ;
        for (o, w) in weights {
            if x < w {
                op = o;
                break;
            }
            x -= w;
        }
        let t0 = Instant::now();
        match op {
            READ => {
                let k = self.next_keynum();
                self.read(k).await;
            }
            UPDATE => {
                let k = self.next_keynum();
                self.update(k).await;
            }
            INSERT => {
                let k = self.shared.insert_seq.next_value();
                self.insert(k).await;
                self.shared.insert_seq.acknowledge(k);
            }
            SCAN => {
                let k = self.next_keynum();
                self.scan(k).await;
            }
            _ => {
                let k = self.next_keynum();
                let r0 = Instant::now();
                self.read(k).await;
                let u0 = Instant::now();
                self.rec.push(READ, u0 - r0);
                self.update(k).await;
                self.rec.push(UPDATE, u0.elapsed());
            }
        }
        self.rec.push(op, t0.elapsed());
        self.rec.flush(&self.m);
    }
}

/// Checks an HGETALL reply: every field of the record with YCSB's
/// deterministic value.
fn check_record(
    r: Reply<'_>,
    key: &[u8],
    fieldcount: usize,
    fieldlength: usize,
    scratch: &mut Vec<u8>,
) -> bool {
    let Some(mut items) = r.array() else {
        return false;
    };
    if r.array_len() != Some(2 * fieldcount) {
        return false;
    }
    while let (Some(f), Some(v)) = (items.next(), items.next()) {
        let (Some(Some(f)), Some(Some(v))) = (f.bulk(), v.bulk()) else {
            return false;
        };
        gen::ycsb_value(key, f, fieldlength, scratch);
        if v != scratch.as_slice() {
            return false;
        }
    }
    true
}

fn ycsb_lines(run: &RunReport) {
    println!("[OVERALL], RunTime(ms), {:.0}", run.duration_s * 1000.0);
    println!("[OVERALL], Throughput(ops/sec), {:.2}", run.ops_per_sec);
    for (name, l) in &run.latency_us {
        if l.count == 0 || name == "ALL" {
            continue;
        }
        println!("[{name}], Operations, {}", l.count);
        println!("[{name}], AverageLatency(us), {:.2}", l.mean_us);
        println!("[{name}], MinLatency(us), {:.0}", l.min_us);
        println!("[{name}], MaxLatency(us), {:.0}", l.max_us);
        println!("[{name}], 95thPercentileLatency(us), {:.0}", l.p95_us);
        println!("[{name}], 99thPercentileLatency(us), {:.0}", l.p99_us);
    }
}

async fn load(env: &Env, props: &Props, report: &mut Report) -> Result<(), String> {
    let shared = Arc::new(Shared::new(props.clone()));
    let clients = env.clients(props.threads).await?;
    let metrics = Metrics::new(&OPS, None);
    let next = Arc::new(AtomicU64::new(0));
    let count = props.recordcount;
    let seed = env.common.seed;
    let recorded = measure(
        metrics,
        env.sampler(Duration::from_secs(1)),
        clients,
        None,
        |i, client, m| {
            let shared = shared.clone();
            let next = next.clone();
            async move {
                let mut w = Worker::new(client, shared, m, seed, 1000 + i as u64);
                while !w.m.stopped() {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= count {
                        break;
                    }
                    let t0 = Instant::now();
                    w.insert(k).await;
                    w.rec.push(INSERT, t0.elapsed());
                    w.rec.flush(&w.m);
                }
            }
        },
    )
    .await;
    let run = RunReport::new(
        "ycsb load",
        &recorded,
        serde_json::json!({"phase": "load", "recordcount": count, "threads": props.threads}),
    );
    println!("# YCSB load: {count} records, {} threads", props.threads);
    ycsb_lines(&run);
    println!();
    report.runs.push(run);
    Ok(())
}

async fn run_phase(env: &Env, props: &Props, report: &mut Report) -> Result<YcsbRow, String> {
    let shared = Arc::new(Shared::new(props.clone()));
    let clients = env.clients(props.threads).await?;
    let metrics = Metrics::new(&OPS, Some(props.operationcount));
    let seed = env.common.seed;
    let duration = props.maxexecutiontime.map(Duration::from_secs_f64);
    let recorded = measure(
        metrics,
        env.sampler(Duration::from_secs(1)),
        clients,
        duration,
        |i, client, m| {
            let shared = shared.clone();
            async move {
                let mut w = Worker::new(client, shared, m, seed, i as u64 + 1);
                while !w.m.stopped() && w.m.take_op() {
                    w.transaction().await;
                }
            }
        },
    )
    .await;
    let name = format!("workload{}", props.workload);
    let run = RunReport::new(
        format!("ycsb {name}"),
        &recorded,
        serde_json::to_value(props).unwrap_or_default(),
    );
    // YCSB's throughput counts transactions: a scan or a read-modify-write
    // is one operation.
    // A read-modify-write also recorded a READ and an UPDATE: count it once.
    let transactions =
        (run.count("READ") + run.count("UPDATE") + run.count("INSERT") + run.count("SCAN"))
            .saturating_sub(run.count("READ-MODIFY-WRITE"));
    let throughput = if run.duration_s > 0.0 {
        transactions as f64 / run.duration_s
    } else {
        0.0
    };
    let mut run = run;
    run.ops_total = transactions;
    run.ops_per_sec = throughput;
    println!(
        "# YCSB {name}: {} records, {} operations, {} threads, {}",
        props.recordcount, props.operationcount, props.threads, props.requestdistribution
    );
    ycsb_lines(&run);
    println!();

    let row = YcsbRow {
        workload: name,
        throughput,
        ops: run
            .latency_us
            .iter()
            .filter(|(n, l)| n != "ALL" && l.count > 0)
            .map(|(n, l)| (n.clone(), l.mean_us, l.p99_us))
            .collect(),
    };
    report.runs.push(run);
    Ok(row)
}

pub async fn run(env: &Env, args: &YcsbArgs, report: &mut Report) -> Result<(), String> {
    let letters: Vec<char> = match args
        .workload
        .to_ascii_lowercase()
        .trim_start_matches("workload")
    {
        "all" => vec!['a', 'b', 'c', 'f', 'd', 'e'],
        w if w.len() == 1 && workload_defaults(w.chars().next().unwrap_or('?')).is_some() => {
            w.chars().collect()
        }
        w => return Err(format!("--workload {w}: expected a, b, c, d, e, f or all")),
    };
    let (do_load, do_run) = match args.phase.as_str() {
        "load" => (true, false),
        "run" => (false, true),
        "both" => (true, true),
        p => return Err(format!("--phase {p}: expected load, run or both")),
    };
    let first = Props::resolve(letters[0], args)?;
    if do_load {
        load(env, &first, report).await?;
    }
    if do_run {
        let mut rows = Vec::new();
        for &l in &letters {
            let props = Props::resolve(l, args)?;
            rows.push(run_phase(env, &props, report).await?);
        }
        rows.sort_by(|a, b| a.workload.cmp(&b.workload));
        println!("# YCSB run info:");
        println!("```");
        print!("{}", ycsb_table(&rows));
        println!("```");
        if let Some(last) = report.runs.last() {
            println!();
            print!("{}", latency_table(last));
        }
    }
    let errors = report
        .runs
        .iter()
        .fold(crate::metrics::Errors::default(), |mut e, r| {
            e.add(&r.errors);
            e
        });
    println!("Errors: {}", errors.describe());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_files() {
        let a = workload_defaults('a').unwrap();
        assert!(a.contains(&("readproportion", "0.5")));
        assert!(a.contains(&("requestdistribution", "zipfian")));
        let d = workload_defaults('d').unwrap();
        assert!(d.contains(&("requestdistribution", "latest")));
        let e = workload_defaults('e').unwrap();
        assert!(e.contains(&("maxscanlength", "100")));
        assert!(e.contains(&("readproportion", "0")));
        let c = workload_defaults('c').unwrap();
        assert!(c.contains(&("updateproportion", "0")));
        assert!(workload_defaults('g').is_none());
    }

    #[test]
    fn record_check() {
        let key = b"user1";
        let mut frame = b"*4\r\n".to_vec();
        let mut v = Vec::new();
        for f in [&b"field0"[..], b"field1"] {
            gen::ycsb_value(key, f, 20, &mut v);
            crate::resp::put_bulk(&mut frame, f);
            crate::resp::put_bulk(&mut frame, &v);
        }
        let mut scratch = Vec::new();
        assert!(check_record(Reply(&frame), key, 2, 20, &mut scratch));
        assert!(!check_record(Reply(&frame), key, 3, 20, &mut scratch));
        assert!(!check_record(Reply(&frame), b"user2", 2, 20, &mut scratch));
        assert!(!check_record(Reply(b"*0\r\n"), key, 2, 20, &mut scratch));
    }
}

// BullMQ smoke test of Kvasir: a real job queue on Lua scripts and streams.
//
//   node bullmq_smoke.js PORT|HOST:PORT                standalone server
//   node bullmq_smoke.js --cluster PORT|HOST:PORT...   cluster (ioredis Cluster)
//
// One Queue, one Worker (concurrency 1) and one QueueEvents, all with the
// prefix '{bull}' so that every key of the queue hashes to one slot. Adds 50
// jobs before the worker starts: 30 plain jobs, 10 delayed by 200 ms, 5 with
// priorities (added 5..1, must run 1..5) and 5 that throw on their first
// attempt (attempts: 2, retried at once). Checks: every job completes with
// its return value, the delayed ones no earlier than 200 ms after they were
// added, the retried ones after exactly two runs, getJobCounts (50 completed,
// nothing else), QueueEvents 'completed' for every job (QueueEvents reads the
// queue's event stream with XREAD BLOCK), then obliterate removes every key
// of the queue. BullMQ's Queue.add, Worker and obliterate are Lua scripts
// (EVALSHA, falling back to EVAL / SCRIPT LOAD).
//
// Then, on a second queue with a worker of concurrency 4: getWorkersCount
// (CLIENT SETNAME / CLIENT LIST), job progress as QueueEvents 'progress'
// events and job logs, a flow (FlowProducer: a parent whose children's return
// values it reads), pause/resume, a job scheduler repeating every 100 ms,
// removeOnComplete, deduplication, clean and obliterate.
//
// Prints PASS/FAIL lines, then one line of JSON ({"summary": ...}); exits 1
// if any check failed. The whole run is bounded by a 60 s timer.
"use strict";

const Redis = require("ioredis");
const { Queue, Worker, QueueEvents, FlowProducer, Job } = require("bullmq");

const DEADLINE_MS = 60000;
const WAIT_MS = 30000; // for all jobs to complete
const PREFIX = "{bull}";
const DELAY_MS = 200;

let failed = false;
const failures = [];
let checks = 0;

function check(ok, what) {
  checks++;
  if (!ok) {
    failed = true;
    failures.push(what);
  }
  console.log(`${ok ? "PASS" : "FAIL"}: ${what}`);
  return ok;
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

function parseNode(a) {
  return /^\d+$/.test(a)
    ? { host: "127.0.0.1", port: Number(a) }
    : { host: a.split(":")[0], port: Number(a.split(":")[1]) };
}

// Connections: BullMQ needs maxRetriesPerRequest: null on the connections its
// Worker blocks on; it duplicates a connection it is given for that.
function makeConnection(mode, nodes) {
  if (mode === "cluster") {
    const c = new Redis.Cluster(nodes, {
      clusterRetryStrategy: (times) => (times > 20 ? null : 200),
      redisOptions: { connectTimeout: 2000, maxRetriesPerRequest: null },
    });
    c.on("error", (e) => console.log(`      cluster error event: ${e.message}`));
    return c;
  }
  const r = new Redis({ ...nodes[0], connectTimeout: 2000, maxRetriesPerRequest: null });
  r.on("error", (e) => console.log(`      redis error event: ${e.message}`));
  return r;
}

// Every key under the queue's prefix, over all masters in cluster mode.
async function queueKeys(conn, mode, queueName) {
  const pattern = `${PREFIX}:${queueName}:*`;
  const targets = mode === "cluster" ? conn.nodes("master") : [conn];
  const lists = await Promise.all(targets.map((n) => n.keys(pattern)));
  return lists.flat();
}

async function main(mode, nodes, summary) {
  const queueName = `smoke-${process.pid}-${Date.now()}`;
  summary.queue = queueName;
  const conns = [];
  const conn = () => {
    const c = makeConnection(mode, nodes);
    conns.push(c);
    return c;
  };
  let queue = null;
  let worker = null;
  let events = null;
  try {
    const admin = conn();
    if (mode === "cluster") {
      await withTimeout(
        new Promise((resolve, reject) => {
          admin.once("ready", resolve);
          admin.once("end", () => reject(new Error("connection ended before ready")));
        }),
        15000,
        "cluster ready",
      );
    } else {
      await withTimeout(admin.ping(), 5000, "PING");
    }
    check(true, `${mode} connection ready`);

    events = new QueueEvents(queueName, { connection: conn(), prefix: PREFIX });
    const completedEvents = new Map(); // jobId -> returnvalue
    const eventErrors = [];
    events.on("completed", ({ jobId, returnvalue }) => completedEvents.set(jobId, returnvalue));
    events.on("error", (e) => eventErrors.push(e.message));
    await withTimeout(events.waitUntilReady(), 10000, "QueueEvents ready");

    queue = new Queue(queueName, { connection: conn(), prefix: PREFIX });
    queue.on("error", (e) => console.log(`      queue error event: ${e.message}`));

    // What the worker saw, in order.
    const runs = new Map(); // jobId -> number of times the processor ran
    const order = []; // names of the priority jobs, in processing order
    const processedAt = new Map(); // jobId -> ms when first processed
    const workerFailed = []; // [jobId, message] per failed attempt
    const workerErrors = [];

    const specs = [];
    for (let i = 0; i < 30; i++) specs.push({ name: "plain", data: { kind: "plain", a: i, b: 2 * i }, opts: {} });
    for (let i = 0; i < 10; i++) specs.push({ name: "delayed", data: { kind: "delayed", a: i, b: 1000 }, opts: { delay: DELAY_MS } });
    for (let p = 5; p >= 1; p--) specs.push({ name: `prio${p}`, data: { kind: "prio", a: p, b: 100 }, opts: { priority: p } });
    for (let i = 0; i < 5; i++) specs.push({ name: "retry", data: { kind: "retry", a: i, b: 7 }, opts: { attempts: 2 } });

    const addedAt = new Map();
    const jobs = [];
    let addErr = null;
    for (const s of specs) {
      try {
        const t = Date.now();
        const job = await queue.add(s.name, s.data, s.opts);
        addedAt.set(job.id, t);
        jobs.push({ id: job.id, spec: s });
      } catch (e) {
        if (!addErr) addErr = `${s.name}: ${e.message}`;
      }
    }
    check(!addErr && jobs.length === specs.length, `Queue.add of ${specs.length} jobs (added ${jobs.length}; first error: ${addErr})`);
    summary.added = jobs.length;

    const before = await queue.getJobCounts("wait", "delayed", "prioritized", "active", "completed", "failed");
    check(
      before.wait === 35 && before.delayed === 10 && before.prioritized === 5 && before.completed === 0,
      `getJobCounts before the worker starts: 35 wait, 10 delayed, 5 prioritized (got ${JSON.stringify(before)})`,
    );

    worker = new Worker(
      queueName,
      async (job) => {
        runs.set(job.id, (runs.get(job.id) || 0) + 1);
        if (!processedAt.has(job.id)) processedAt.set(job.id, Date.now());
        if (job.data.kind === "prio") order.push(job.name);
        if (job.data.kind === "retry" && runs.get(job.id) === 1) {
          throw new Error(`first attempt of ${job.id} fails on purpose`);
        }
        return { sum: job.data.a + job.data.b, name: job.name };
      },
      { connection: conn(), prefix: PREFIX, concurrency: 1, autorun: false },
    );
    worker.on("failed", (job, err) => workerFailed.push([job && job.id, err.message]));
    worker.on("error", (e) => workerErrors.push(e.message));
    const t0 = Date.now();
    worker.run().catch((e) => workerErrors.push(`run: ${e.message}`));

    // Wait (bounded) until every job has completed.
    let counts = null;
    const deadline = Date.now() + WAIT_MS;
    while (Date.now() < deadline) {
      counts = await queue.getJobCounts("wait", "delayed", "prioritized", "active", "completed", "failed");
      if (counts.completed >= jobs.length) break;
      await sleep(50);
    }
    summary.drain_ms = Date.now() - t0;
    summary.counts = counts;
    check(
      counts && counts.completed === jobs.length,
      `all ${jobs.length} jobs completed within ${WAIT_MS} ms (${summary.drain_ms} ms; counts ${JSON.stringify(counts)})`,
    );
    check(
      counts && counts.wait === 0 && counts.delayed === 0 && counts.prioritized === 0 && counts.active === 0 && counts.failed === 0,
      `getJobCounts after: nothing waiting, delayed, prioritized, active or failed (${JSON.stringify(counts)})`,
    );

    // Return values, as stored in Redis (read back through Job.fromId).
    let rvBad = null;
    let attemptsBad = null;
    for (const { id, spec } of jobs) {
      const job = await Job.fromId(queue, id);
      const want = { sum: spec.data.a + spec.data.b, name: spec.name };
      if (!rvBad && (!job || JSON.stringify(job.returnvalue) !== JSON.stringify(want))) {
        rvBad = `job ${id} (${spec.name}): returnvalue ${job ? JSON.stringify(job.returnvalue) : "job missing"}, want ${JSON.stringify(want)}`;
      }
      if (job && spec.data.kind === "retry" && !attemptsBad && job.attemptsMade !== 2) {
        attemptsBad = `job ${id}: attemptsMade ${job.attemptsMade}, want 2`;
      }
      if (job && !job.finishedOn && !rvBad) rvBad = `job ${id}: no finishedOn`;
    }
    check(!rvBad, `every job's returnvalue read back (first wrong: ${rvBad})`);

    // Retries: each retry job ran twice, failed once; every other job ran once.
    const retryIds = jobs.filter((j) => j.spec.data.kind === "retry").map((j) => j.id);
    const runsBad = jobs.find(({ id, spec }) => runs.get(id) !== (spec.data.kind === "retry" ? 2 : 1));
    check(!runsBad, `retry jobs ran twice, others once (first wrong: ${runsBad ? `${runsBad.id} ran ${runs.get(runsBad.id)}x` : null})`);
    check(
      workerFailed.length === retryIds.length && retryIds.every((id) => workerFailed.some(([j]) => j === id)),
      `Worker 'failed' once per retry job (${JSON.stringify(workerFailed)})`,
    );
    check(!attemptsBad, `retried jobs have attemptsMade 2 (first wrong: ${attemptsBad})`);

    // Delays: processed no earlier than DELAY_MS after being added.
    const delayed = jobs.filter((j) => j.spec.data.kind === "delayed");
    const early = delayed
      .map(({ id }) => [id, processedAt.get(id) - addedAt.get(id)])
      .filter(([, waited]) => !(waited >= DELAY_MS - 5)); // 5 ms of clock slack between client and server
    check(early.length === 0, `delayed jobs ran >= ${DELAY_MS} ms after add (too early: ${JSON.stringify(early)})`);

    // Priorities: added 5..1, with one worker they run 1..5.
    check(
      JSON.stringify(order) === JSON.stringify(["prio1", "prio2", "prio3", "prio4", "prio5"]),
      `priority jobs ran in priority order (got ${JSON.stringify(order)})`,
    );

    // QueueEvents: a 'completed' event for every job (bounded wait: events
    // may trail the counts a little).
    const evDeadline = Date.now() + 5000;
    while (completedEvents.size < jobs.length && Date.now() < evDeadline) await sleep(50);
    const missing = jobs.filter(({ id }) => !completedEvents.has(id)).map(({ id }) => id);
    summary.completed_events = completedEvents.size;
    check(missing.length === 0, `QueueEvents 'completed' for all ${jobs.length} jobs (missing: ${JSON.stringify(missing.slice(0, 10))})`);
    const evBad = jobs.find(({ id, spec }) => {
      const rv = completedEvents.get(id);
      const got = typeof rv === "string" ? JSON.parse(rv) : rv;
      return completedEvents.has(id) && (!got || got.sum !== spec.data.a + spec.data.b);
    });
    check(!evBad, `QueueEvents 'completed' carries the return value (first wrong: ${evBad ? evBad.id : null})`);
    check(workerErrors.length === 0, `no Worker 'error' events (${JSON.stringify(workerErrors.slice(0, 5))})`);
    check(eventErrors.length === 0, `no QueueEvents 'error' events (${JSON.stringify(eventErrors.slice(0, 5))})`);

    // Tear down: obliterate removes every key of the queue.
    await worker.close();
    worker = null;
    const keysBefore = await queueKeys(admin, mode, queueName);
    await queue.obliterate({ force: true });
    const keysAfter = await queueKeys(admin, mode, queueName);
    summary.keys_before_obliterate = keysBefore.length;
    check(
      keysBefore.length > 0 && keysAfter.length === 0,
      `obliterate removes the queue's ${keysBefore.length} keys (left: ${JSON.stringify(keysAfter.slice(0, 10))})`,
    );

    await extras(mode, conn, admin, summary);
  } catch (e) {
    check(false, `unexpected error: ${e && e.stack ? e.stack : e}`);
  } finally {
    const closing = [worker, events, queue].filter(Boolean).map((x) => x.close().catch(() => {}));
    await withTimeout(Promise.all(closing), 10000, "close").catch((e) => console.log(`      ${e.message}`));
    for (const c of conns) c.disconnect();
  }
}

// The second phase: more of BullMQ's API, on its own queue.
async function extras(mode, conn, admin, summary) {
  const queueName = `extras-${process.pid}-${Date.now()}`;
  const events = new QueueEvents(queueName, { connection: conn(), prefix: PREFIX });
  const queue = new Queue(queueName, { connection: conn(), prefix: PREFIX });
  let worker = null;
  let flows = null;
  const workerErrors = [];
  try {
    const progress = [];
    events.on("progress", ({ jobId, data }) => progress.push([jobId, data]));
    await withTimeout(events.waitUntilReady(), 10000, "QueueEvents ready");
    worker = new Worker(
      queueName,
      async (job) => {
        if (job.name === "progress") {
          await job.updateProgress(50);
          await job.updateProgress({ done: 100 });
          await job.log("halfway");
          await job.log("done");
          return "progressed";
        }
        if (job.name === "parent") {
          const kids = await job.getChildrenValues();
          return Object.values(kids).sort((a, b) => a - b);
        }
        if (job.name === "tick") return "tick";
        return job.data.v;
      },
      { connection: conn(), prefix: PREFIX, concurrency: 4 },
    );
    worker.on("error", (e) => workerErrors.push(e.message));
    await withTimeout(worker.waitUntilReady(), 10000, "Worker ready");
    const waitFor = (job) => withTimeout(job.waitUntilFinished(events, 10000), 12000, `job ${job.name} finished`);

    // The worker names its connection; getWorkers finds it in CLIENT LIST.
    let workers = -1;
    for (let i = 0; i < 40 && workers !== 1; i++) {
      workers = await queue.getWorkersCount();
      if (workers !== 1) await sleep(50);
    }
    check(workers === 1, `getWorkersCount() == 1 (got ${workers})`);

    const pj = await queue.add("progress", {});
    const pres = await waitFor(pj);
    for (let i = 0; i < 40 && progress.length < 2; i++) await sleep(50);
    check(
      pres === "progressed" && JSON.stringify(progress) === JSON.stringify([[pj.id, 50], [pj.id, { done: 100 }]]),
      `job progress reaches QueueEvents 'progress' (got ${JSON.stringify(progress)}, result ${JSON.stringify(pres)})`,
    );
    const pjob = await Job.fromId(queue, pj.id);
    check(pjob && JSON.stringify(pjob.progress) === JSON.stringify({ done: 100 }), `job.progress stored (${pjob && JSON.stringify(pjob.progress)})`);
    const logs = await queue.getJobLogs(pj.id);
    check(JSON.stringify(logs) === JSON.stringify({ logs: ["halfway", "done"], count: 2 }), `getJobLogs (${JSON.stringify(logs)})`);

    // A flow: the parent waits for its children and reads their values.
    flows = new FlowProducer({ connection: conn(), prefix: PREFIX });
    const tree = await flows.add({
      name: "parent",
      queueName,
      data: {},
      children: [1, 2, 3].map((v) => ({ name: "child", queueName, data: { v } })),
    });
    const fres = await waitFor(tree.job);
    check(JSON.stringify(fres) === JSON.stringify([1, 2, 3]), `flow: parent ran after its 3 children and read their values (got ${JSON.stringify(fres)})`);

    // Pause and resume.
    await queue.pause();
    const paused = await queue.isPaused();
    const held = await queue.add("value", { v: 9 });
    await sleep(300);
    const heldState = await held.getState();
    await queue.resume();
    const heldRes = await waitFor(held);
    check(
      paused && heldState === "waiting" && heldRes === 9 && !(await queue.isPaused()),
      `pause holds a job (state ${heldState}), resume runs it (result ${heldRes})`,
    );

    // A job scheduler: a job every 100 ms until removed.
    await queue.upsertJobScheduler("every-100ms", { every: 100 }, { name: "tick", data: {} });
    const schedulers = (await queue.getJobSchedulers()).map((x) => x.key);
    let ticks = 0;
    for (let i = 0; i < 60 && ticks < 3; i++) {
      await sleep(50);
      ticks = (await queue.getJobs(["completed"])).filter((j) => j.name === "tick").length;
    }
    await queue.removeJobScheduler("every-100ms");
    const schedulersAfter = await queue.getJobSchedulers();
    check(
      JSON.stringify(schedulers) === JSON.stringify(["every-100ms"]) && ticks >= 3 && schedulersAfter.length === 0,
      `job scheduler every 100 ms: ${ticks} ticks completed within 3 s (want >= 3), listed ${JSON.stringify(schedulers)}, removed (${schedulersAfter.length} left)`,
    );

    // removeOnComplete, deduplication and clean.
    const gone = await queue.add("value", { v: 1 }, { removeOnComplete: true });
    await waitFor(gone);
    let goneJob = null;
    for (let i = 0; i < 20; i++) {
      goneJob = await Job.fromId(queue, gone.id);
      if (!goneJob) break;
      await sleep(25);
    }
    check(!goneJob, `removeOnComplete removes the finished job`);
    await queue.pause();
    const d1 = await queue.add("value", { v: 5 }, { deduplication: { id: "dedup-1" } });
    const d2 = await queue.add("value", { v: 6 }, { deduplication: { id: "dedup-1" } });
    const waiting = await queue.getWaitingCount();
    await queue.resume();
    await waitFor(d1);
    check(d1.id === d2.id && waiting === 1, `deduplication: the second add returns the first job (${d1.id} / ${d2.id}, ${waiting} waiting)`);
    const completedBefore = await queue.getCompletedCount();
    const cleaned = await queue.clean(0, 1000, "completed");
    const completedAfter = await queue.getCompletedCount();
    check(
      completedBefore > 0 && cleaned.length === completedBefore && completedAfter === 0,
      `clean(0, 'completed') removes all ${completedBefore} completed jobs (removed ${cleaned.length}, ${completedAfter} left)`,
    );
    check(workerErrors.length === 0, `no Worker 'error' events on the second queue (${JSON.stringify(workerErrors.slice(0, 5))})`);

    await worker.close();
    worker = null;
    await queue.obliterate({ force: true });
    const left = await queueKeys(admin, mode, queueName);
    check(left.length === 0, `obliterate removes the second queue's keys (left: ${JSON.stringify(left.slice(0, 10))})`);
    summary.extras = true;
  } finally {
    const closing = [worker, flows, events, queue].filter(Boolean).map((x) => x.close().catch(() => {}));
    await withTimeout(Promise.all(closing), 10000, "close (extras)").catch((e) => console.log(`      ${e.message}`));
  }
}

const argv = process.argv.slice(2);
let mode = "standalone";
if (argv[0] === "--cluster") {
  mode = "cluster";
  argv.shift();
}
if (argv.length === 0 || (mode === "standalone" && argv.length !== 1)) {
  console.error("usage: node bullmq_smoke.js PORT|HOST:PORT  |  node bullmq_smoke.js --cluster PORT|HOST:PORT...");
  process.exit(2);
}
const nodes = argv.map(parseNode);
const started = Date.now();
const summary = { client: "bullmq", version: require("bullmq/package.json").version, mode };
function finish() {
  summary.ok = !failed;
  summary.checks = checks;
  summary.failures = failures;
  summary.secs = Number(((Date.now() - started) / 1000).toFixed(2));
  console.log(`RESULT: bullmq ${mode} ${failed ? "FAILED" : "PASSED"}`);
  console.log(JSON.stringify({ summary }));
}
const killer = setTimeout(() => {
  check(false, `deadline of ${DEADLINE_MS} ms exceeded`);
  finish();
  process.exit(1);
}, DEADLINE_MS);
main(mode, nodes, summary).then(() => {
  clearTimeout(killer);
  finish();
  process.exit(failed ? 1 : 0);
});

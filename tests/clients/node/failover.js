// Failover test of Kvasir with ioredis (Redis.Cluster); the same scenario as
// `kvclient-go failover` (tests/clients/go/main.go), driven by
// tests/python/test_cluster_clients.py:
//
//   node failover.js PORT|HOST:PORT...
//
// Writes keys, prints "KILL host:port" (the master of a slot it wrote to) and
// "READY", then waits for the line GO on stdin (the test kills that node
// meanwhile). The same Cluster object must then write to the killed node's
// slot again: the time that takes is printed as "RECOVERY_SECONDS x" (the test
// asserts on it). Every acknowledged write (before and after the kill) must
// read back, and a final round must succeed without application-level
// retries. Then it prints "RESTART" and waits for GO again (the test restarts
// the node and waits for cluster_state:ok); while the restarted node takes
// back its shards' leadership, writes and MULTI/EXEC on its slot must keep
// succeeding, until the client routes the slot to that node again (within
// 30 s); everything written reads back.
//
// Every line of the outcome starts with PASS or FAIL; the exit code is 1 if
// any check failed. The whole run is bounded by a 180 s timer.
"use strict";

const readline = require("readline");
const Redis = require("ioredis");

const DEADLINE_MS = 180000;
let failed = false;

function check(ok, what) {
  if (!ok) failed = true;
  console.log(`${ok ? "PASS" : "FAIL"}: ${what}`);
  return ok;
}

function info(what) {
  console.log(`      ${what}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

// Runs op until it resolves or the deadline (ms since the epoch) passes; each
// failure is followed by a 50 ms pause. Returns {fails, first, last} where
// last is null on success.
async function retrying(deadline, op) {
  let fails = 0;
  let first = null;
  for (;;) {
    try {
      // An attempt that hangs counts as a failure once the deadline passed.
      await withTimeout(Promise.resolve().then(op), Math.max(deadline - Date.now(), 1000), "attempt");
      return { fails, first, last: null };
    } catch (e) {
      fails++;
      if (!first) first = e;
      if (Date.now() >= deadline) return { fails, first, last: e };
      await sleep(50);
    }
  }
}

const msg = (e) => (e ? e.message : e);

// Lines from stdin, for the GO handshake.
const stdinLines = [];
const stdinWaiters = [];
let stdinClosed = false;
const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (l) => {
  const w = stdinWaiters.shift();
  if (w) w(l.trim());
  else stdinLines.push(l.trim());
});
rl.on("close", () => {
  stdinClosed = true;
  while (stdinWaiters.length) stdinWaiters.shift()(null);
});

// Waits (at most 90 s) for the line GO on stdin, sent by the test once it has
// done what the last printed line asked for.
async function waitGo(after) {
  let line;
  if (stdinLines.length) line = stdinLines.shift();
  else if (stdinClosed) line = null;
  else {
    let timer;
    line = await new Promise((resolve) => {
      stdinWaiters.push(resolve);
      timer = setTimeout(() => resolve(undefined), 90000);
    });
    clearTimeout(timer);
  }
  if (line === undefined) return check(false, `no GO on stdin within 90s after ${after}`);
  if (line !== "GO") return check(false, `expected GO on stdin after ${after}, got ${JSON.stringify(line)}`);
  return true;
}

async function main(nodes) {
  // ioredis's defaults (see ClusterOptions in its README and
  // built/cluster/ClusterOptions.d.ts): a cluster node's connection is not
  // reconnected when it closes (clusterNodeRetryStrategy: null), the node
  // leaves the pool and commands for its slots go to another master, whose
  // MOVED reply updates the slot and triggers a slot-map refresh; commands
  // cut off by the closed connection are retried after retryDelayOnFailover
  // (100 ms), CLUSTERDOWN/TRYAGAIN after 100 ms. That is enough to notice a
  // dead master quickly, so no failover option is changed: only a short
  // connect timeout, as in cluster_smoke.js.
  const cluster = new Redis.Cluster(nodes, {
    redisOptions: { connectTimeout: 2000 },
  });
  const t0 = Date.now();
  const stamp = () => `${((Date.now() - t0) / 1000).toFixed(2)}s`;
  let nodeErrors = 0;
  cluster.on("error", (e) => info(`[${stamp()}] cluster error event: ${e.message}`));
  cluster.on("node error", (e, key) => {
    // Logged, but not too many of them.
    if (++nodeErrors <= 5) info(`[${stamp()}] node error event (${key}): ${e.message}`);
  });
  cluster.on("+node", (r) => info(`[${stamp()}] +node ${r.options.host}:${r.options.port}`));
  cluster.on("-node", (r) => info(`[${stamp()}] -node ${r.options.host}:${r.options.port}`));
  const masterOf = (slot) => (cluster.slots[slot] ? cluster.slots[slot][0] : undefined);
  const masterList = () =>
    cluster
      .nodes("master")
      .map((n) => `${n.options.host}:${n.options.port}`)
      .sort()
      .join(", ");

  try {
    await withTimeout(
      new Promise((resolve, reject) => {
        cluster.once("ready", resolve);
        cluster.once("end", () => reject(new Error("connection ended before ready")));
      }),
      15000,
      "cluster ready",
    );

    const N = 300;
    const acked = new Map();
    let firstErr = null;
    for (let i = 0; i < N; i++) {
      const k = `node:fo:before:${i}`;
      const v = `b${i}`;
      try {
        await cluster.set(k, v);
        acked.set(k, v);
      } catch (e) {
        if (!firstErr) firstErr = e;
      }
    }
    if (!check(acked.size === N, `${N} writes before the kill (first error: ${msg(firstErr)})`)) return;

    const probe = "node:fo:before:0";
    const probeSlot = await cluster.cluster("KEYSLOT", probe);
    const victim = masterOf(probeSlot);
    if (!check(victim !== undefined, `master of ${probe}'s slot known (${victim})`)) return;
    info(`slot ${probeSlot} of ${probe} is served by ${victim}`);
    let onVictim = 0;
    for (let i = 0; i < N; i++) {
      if (masterOf(await cluster.cluster("KEYSLOT", `node:fo:before:${i}`)) === victim) onVictim++;
    }
    info(`${onVictim} of the ${N} keys are on ${victim}`);
    console.log(`KILL ${victim}`);
    console.log("READY");
    if (!(await waitGo("the kill"))) return;

    // The node is dead. Writes to its former slots must work again within a
    // few seconds on the same client object.
    const killedAt = Date.now();
    info(`[${stamp()}] GO received, writing to slot ${probeSlot}`);
    const recoverWithin = 15000;
    let r = await retrying(killedAt + recoverWithin, () => cluster.set(probe, "after-kill"));
    const rec = (Date.now() - killedAt) / 1000;
    console.log(`RECOVERY_SECONDS ${rec.toFixed(3)}`);
    if (
      !check(
        r.last === null,
        `write to slot ${probeSlot} (master killed) succeeds again after ${rec.toFixed(2)}s (${r.fails} failed attempts; first error: ${msg(r.first)}; last: ${msg(r.last)})`,
      )
    ) {
      return;
    }
    acked.set(probe, "after-kill");
    info(`[${stamp()}] slot ${probeSlot} is now routed to ${masterOf(probeSlot)} by the client`);

    // Writes over all slots, each retried by the application for a bounded
    // time: all must be acknowledged.
    let deadline = Date.now() + 20000;
    let totalFails = 0;
    let firstAfter = null;
    for (let i = 0; i < N; i++) {
      const k = `node:fo:after:${i}`;
      const v = `a${i}`;
      r = await retrying(deadline, () => cluster.set(k, v));
      totalFails += r.fails;
      if (!firstAfter) firstAfter = r.first;
      if (r.last) {
        check(false, `SET ${k} never succeeded within the deadline: ${msg(r.last)}`);
        return;
      }
      acked.set(k, v);
    }
    check(true, `${N} writes after the kill acknowledged (${totalFails} attempts failed and were retried; first error: ${msg(firstAfter)})`);
    // Checked only now, not right after the first successful write: with the
    // dead node out of its pool, ioredis sends that slot's commands to another
    // master, which may well be the new leader and then answers without a
    // MOVED, so the slot map can keep naming the dead node until the next
    // refresh (on a MOVED, a closed connection or slotsRefreshInterval).
    const now = masterOf(probeSlot);
    check(now !== undefined && now !== victim, `client routes slot ${probeSlot} away from the killed node (now ${now}; at ${stamp()})`);

    // Every acknowledged write reads back.
    let lost = 0;
    let lostEx = [];
    let readFails = 0;
    for (const [k, want] of acked) {
      let got;
      r = await retrying(Date.now() + 5000, async () => {
        got = await cluster.get(k);
      });
      readFails += r.fails;
      if (r.last || got !== want) {
        lost++;
        if (lostEx.length < 5) lostEx.push(`${k}=${JSON.stringify(got)} want ${JSON.stringify(want)} (${msg(r.last)})`);
      }
    }
    check(lost === 0, `all ${acked.size} acknowledged writes read back (${lost} missing or wrong: [${lostEx.join("; ")}]; ${readFails} read attempts retried)`);

    // Steady state: one more round must need no application retries.
    let steadyErr = null;
    for (let i = 0; i < 200 && !steadyErr; i++) {
      const k = `node:fo:steady:${i}`;
      try {
        await cluster.set(k, "s");
        const v = await cluster.get(k);
        if (v !== "s") steadyErr = `GET ${k} = ${JSON.stringify(v)}`;
      } catch (e) {
        steadyErr = `${k}: ${e.message}`;
      }
    }
    check(!steadyErr, `200 SET+GET after recovery with no application retries (err=${steadyErr})`);
    info(`masters after the kill: ${masterList()}`);

    // The node comes back and, once caught up, takes back the leadership of
    // its preferred shards. Clients holding the old slot map are redirected
    // with MOVED (also at EXEC), and must follow without being recreated.
    console.log("RESTART");
    if (!(await waitGo("the restart"))) return;
    const t1 = Date.now();
    const tag = `{${probe}}`; // hashes to probeSlot, the killed node's slot
    let back = false;
    let round = 0;
    const written = new Map();
    let backFails = 0;
    let firstBackErr = null;
    while (Date.now() - t1 < 30000) {
      round++;
      const dl = Date.now() + 15000;
      for (let i = 0; i < 50; i++) {
        const k = `node:fo:back:${round}:${i}`;
        const v = `r${round}`;
        r = await retrying(dl, () => cluster.set(k, v));
        backFails += r.fails;
        if (!firstBackErr) firstBackErr = r.first;
        if (r.last) {
          check(false, `SET ${k} during the leadership moves never succeeded: ${msg(r.last)}`);
          return;
        }
        written.set(k, v);
      }
      const v = `tx${round}`;
      r = await retrying(dl, async () => {
        const res = await cluster.multi().set(`${tag}:a`, v).set(`${tag}:b`, v).exec();
        const bad = (res || []).find(([e]) => e);
        if (!res || bad) throw new Error(`EXEC answered ${res ? bad[0].message : "null"}`);
      });
      backFails += r.fails;
      if (!firstBackErr) firstBackErr = r.first;
      if (r.last) {
        check(false, `MULTI/EXEC on slot ${probeSlot} during the leadership moves never succeeded: ${msg(r.last)}`);
        return;
      }
      written.set(`${tag}:a`, v);
      written.set(`${tag}:b`, v);
      if (masterOf(probeSlot) === victim) {
        back = true;
        break;
      }
      await sleep(200);
    }
    check(back, `slot ${probeSlot} is led by the restarted node ${victim} again (after ${((Date.now() - t1) / 1000).toFixed(2)}s, ${round} rounds of writes)`);
    check(true, `${50 * round} writes and ${round} MULTI/EXEC on slot ${probeSlot} acknowledged while leadership moved back (${backFails} attempts retried by the application; first error: ${msg(firstBackErr)})`);
    lost = 0;
    lostEx = [];
    for (const [k, want] of written) {
      let got;
      try {
        got = await cluster.get(k);
      } catch (e) {
        got = `error: ${e.message}`;
      }
      if (got !== want) {
        lost++;
        if (lostEx.length < 5) lostEx.push(`${k}=${JSON.stringify(got)} want ${JSON.stringify(want)}`);
      }
    }
    check(lost === 0, `all ${written.size} keys written around the restart read back (${lost} missing or wrong: [${lostEx.join("; ")}])`);

    // Wait for the remaining leadership moves to settle, then no retries.
    await sleep(2000);
    steadyErr = null;
    for (let i = 0; i < 200 && !steadyErr; i++) {
      try {
        await cluster.set(`node:fo:steady2:${i}`, "s");
      } catch (e) {
        steadyErr = `SET node:fo:steady2:${i}: ${e.message}`;
      }
    }
    if (!steadyErr) {
      try {
        const res = await cluster.multi().set(`${tag}:a`, "final").incr(`${tag}:n`).exec();
        const bad = (res || []).find(([e]) => e);
        if (!res || bad) steadyErr = `EXEC answered ${res ? bad[0].message : "null"}`;
      } catch (e) {
        steadyErr = `MULTI/EXEC: ${e.message}`;
      }
    }
    check(!steadyErr, `200 SET and a MULTI/EXEC after the restart with no application retries (err=${steadyErr})`);
    info(`masters after the restart: ${masterList()}`);
  } catch (e) {
    check(false, `unexpected error: ${e && e.stack ? e.stack : e}`);
  } finally {
    cluster.disconnect();
  }
}

const args = process.argv.slice(2);
if (args.length === 0) {
  console.error("usage: node failover.js PORT|HOST:PORT...");
  process.exit(2);
}
const nodes = args.map((a) => (/^\d+$/.test(a) ? { host: "127.0.0.1", port: Number(a) } : { host: a.split(":")[0], port: Number(a.split(":")[1]) }));
const started = Date.now();
const killer = setTimeout(() => {
  console.log(`FAIL: failover: deadline of ${DEADLINE_MS} ms exceeded`);
  process.exit(1);
}, DEADLINE_MS);
main(nodes).then(() => {
  clearTimeout(killer);
  console.log(`      failover took ${((Date.now() - started) / 1000).toFixed(2)}s`);
  console.log(`RESULT: failover ${failed ? "FAILED" : "PASSED"}`);
  process.exit(failed ? 1 : 0);
});

// Cluster-client smoke test of Kvasir with ioredis (Redis.Cluster).
//
//   node cluster_smoke.js PORT|HOST:PORT...
//
// Checks: the cluster becomes ready, nodes("master") has 3 entries, SET/GET of
// 1000 keys spread over the slots, a pipeline on one slot (hash tag), MULTI/EXEC
// on one slot, and after FLUSHALL on every master the masters' DBSIZE adds up
// to the keys written. Prints PASS/FAIL lines; exits 1 if any check failed.
// The whole run is bounded by a 60 s timer.
"use strict";

const Redis = require("ioredis");

const DEADLINE_MS = 60000;
let failed = false;

function check(ok, what) {
  if (!ok) failed = true;
  console.log(`${ok ? "PASS" : "FAIL"}: ${what}`);
  return ok;
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

async function main(nodes) {
  const cluster = new Redis.Cluster(nodes, {
    // Give up instead of reconnecting forever: the test has a deadline.
    clusterRetryStrategy: (times) => (times > 20 ? null : 200),
    redisOptions: { connectTimeout: 2000, maxRetriesPerRequest: 3 },
  });
  cluster.on("error", (e) => console.log(`      cluster error event: ${e.message}`));
  try {
    await withTimeout(
      new Promise((resolve, reject) => {
        cluster.once("ready", resolve);
        cluster.once("end", () => reject(new Error("connection ended before ready")));
      }),
      15000,
      "cluster ready",
    );
    check(true, "Cluster ready");

    const masters = cluster.nodes("master");
    check(
      masters.length === 3,
      `nodes("master") has 3 entries (got ${masters.length}: ${masters.map((n) => `${n.options.host}:${n.options.port}`).join(", ")})`,
    );

    const flush = await Promise.allSettled(masters.map((n) => n.flushall()));
    const flushErr = flush.find((r) => r.status === "rejected");
    check(!flushErr, `FLUSHALL on every master (${flushErr ? flushErr.reason : "ok"})`);

    // SET/GET over many slots.
    const N = 1000;
    let setErr = null;
    let getErr = null;
    const keys = [...Array(N).keys()].map((i) => `node:basic:${i}`);
    for (let off = 0; off < N; off += 100) {
      const batch = keys.slice(off, off + 100);
      const res = await Promise.allSettled(batch.map((k, j) => cluster.set(k, `v${off + j}`)));
      res.forEach((r, j) => {
        if (!setErr && (r.status !== "fulfilled" || r.value !== "OK")) {
          setErr = `SET ${batch[j]}: ${r.reason || r.value}`;
        }
      });
    }
    for (let off = 0; off < N; off += 100) {
      const batch = keys.slice(off, off + 100);
      const res = await Promise.allSettled(batch.map((k) => cluster.get(k)));
      res.forEach((r, j) => {
        if (!getErr && (r.status !== "fulfilled" || r.value !== `v${off + j}`)) {
          getErr = `GET ${batch[j]}: ${r.reason || JSON.stringify(r.value)}`;
        }
      });
    }
    check(!setErr, `SET ${N} keys (first error: ${setErr})`);
    check(!getErr, `GET ${N} keys read back (first error: ${getErr})`);
    const slots = new Set(await Promise.all(keys.slice(0, 100).map((k) => cluster.cluster("KEYSLOT", k))));
    check(slots.size >= 90, `keys spread over slots (${slots.size} distinct slots in a sample of 100)`);

    // A pipeline on one slot: every key carries the same hash tag.
    const tag = "{node:pipe}";
    const p = cluster.pipeline();
    for (let i = 0; i < 20; i++) p.set(`${tag}:k${i}`, `p${i}`);
    for (let i = 0; i < 10; i++) p.incr(`${tag}:ctr`);
    for (let i = 0; i < 20; i++) p.get(`${tag}:k${i}`);
    const pres = await p.exec();
    let pbad = null;
    pres.forEach(([err, val], i) => {
      let want;
      if (i < 20) want = "OK";
      else if (i < 30) want = i - 19;
      else want = `p${i - 30}`;
      if (!pbad && (err || val !== want)) pbad = `cmd ${i}: ${err || JSON.stringify(val)} (want ${JSON.stringify(want)})`;
    });
    check(pres.length === 50 && !pbad, `pipeline of 50 commands on slot of ${tag} (${pres.length} replies, first wrong: ${pbad})`);

    // MULTI/EXEC on one slot.
    const t = "{node:tx}";
    const tres = await cluster
      .multi()
      .set(`${t}:a`, "1")
      .incrby(`${t}:n`, 5)
      .rpush(`${t}:l`, "x", "y")
      .get(`${t}:a`)
      .exec();
    const flat = tres ? tres.map(([e, v]) => (e ? `ERR ${e.message}` : v)) : null;
    check(
      JSON.stringify(flat) === JSON.stringify(["OK", 5, 2, "1"]),
      `MULTI/EXEC on slot of ${t} (got ${JSON.stringify(flat)})`,
    );
    const after = await Promise.all([cluster.get(`${t}:a`), cluster.get(`${t}:n`), cluster.lrange(`${t}:l`, 0, -1)]);
    check(
      JSON.stringify(after) === JSON.stringify(["1", "5", ["x", "y"]]),
      `transaction effects visible afterwards (got ${JSON.stringify(after)})`,
    );

    // A transaction spanning two slots must be refused, not half-applied.
    let crossErr = null;
    try {
      await cluster.multi().set("node:x:a", "1").set("node:x:b", "2").exec();
    } catch (e) {
      crossErr = e;
    }
    check(crossErr !== null, `cross-slot MULTI/EXEC is refused (${crossErr ? crossErr.message : "it succeeded"})`);

    // Key count over the masters.
    const written = N + 20 + 1 + 3; // basic keys, pipe keys + counter, tx keys
    const sizes = await Promise.all(cluster.nodes("master").map((n) => n.dbsize()));
    const sum = sizes.reduce((a, b) => a + b, 0);
    check(sum === written, `sum of DBSIZE over masters == ${written} keys written (got ${sum}: ${sizes.join(" + ")})`);
  } catch (e) {
    check(false, `unexpected error: ${e && e.stack ? e.stack : e}`);
  } finally {
    cluster.disconnect();
  }
}

const args = process.argv.slice(2);
if (args.length === 0) {
  console.error("usage: node cluster_smoke.js PORT|HOST:PORT...");
  process.exit(2);
}
const nodes = args.map((a) => (/^\d+$/.test(a) ? { host: "127.0.0.1", port: Number(a) } : { host: a.split(":")[0], port: Number(a.split(":")[1]) }));
const started = Date.now();
const killer = setTimeout(() => {
  console.log(`FAIL: deadline of ${DEADLINE_MS} ms exceeded`);
  process.exit(1);
}, DEADLINE_MS);
main(nodes).then(() => {
  clearTimeout(killer);
  console.log(`      took ${((Date.now() - started) / 1000).toFixed(2)}s`);
  console.log(`RESULT: ioredis ${failed ? "FAILED" : "PASSED"}`);
  process.exit(failed ? 1 : 0);
});

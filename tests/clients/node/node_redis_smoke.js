// Smoke test of Kvasir with node-redis (the `redis` package, Node's official
// client), standalone and against the three-node cluster.
//
//   node node_redis_smoke.js standalone PORT
//   node node_redis_smoke.js cluster PORT...
//
// Standalone, over RESP2 and RESP3: strings, hashes, sorted sets, lists,
// streams with a consumer group, a transaction and a pipeline, WATCH
// aborting EXEC, a Lua script, SCAN through scanIterator, pub/sub on a
// duplicated connection, BLPOP served by a push from another connection,
// and client-side caching (RESP3: a cached GET invalidated by another
// connection's write). Cluster: createCluster discovers three masters,
// SET/GET of 300 keys over the slots, MGET/MSET of one hash tag, a
// transaction on one slot, SCAN on every master adding up to the keys
// written, DBSIZE/KEYS/MGET/DEL routed by Redis's command policies (every
// master, or split by slot), and sharded pub/sub (SSUBSCRIBE/SPUBLISH).
// Prints PASS/FAIL lines; exits 1 if any check failed. The whole run is
// bounded by a 60 s timer.
"use strict";

const { createClient, createCluster } = require("redis");

const DEADLINE_MS = 60000;
let failed = false;

function check(ok, what) {
  if (!ok) failed = true;
  console.log(`${ok ? "PASS" : "FAIL"}: ${what}`);
  return ok;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function eventually(what, fn, ms = 5000) {
  const until = Date.now() + ms;
  for (;;) {
    if (await fn()) return true;
    if (Date.now() > until) return check(false, `${what} (not within ${ms} ms)`);
    await sleep(20);
  }
}

async function standalone(port, resp) {
  const tag = `RESP${resp}`;
  const url = `redis://127.0.0.1:${port}`;
  const c = createClient({ url, RESP: resp });
  c.on("error", (e) => console.log(`      client error event: ${e.message}`));
  await c.connect();
  await c.flushAll();

  check((await c.set("s", "v1")) === "OK" && (await c.get("s")) === "v1", `${tag} SET/GET`);
  check((await c.incrBy("n", 5)) === 5, `${tag} INCRBY`);
  await c.hSet("h", { a: "1", b: "2" });
  const h = await c.hGetAll("h");
  check(h.a === "1" && h.b === "2", `${tag} HSET/HGETALL (${JSON.stringify(h)})`);
  await c.zAdd("z", [{ score: 2, value: "two" }, { score: 1, value: "one" }]);
  const z = await c.zRangeWithScores("z", 0, -1);
  check(
    z.length === 2 && z[0].value === "one" && z[0].score === 1 && z[1].score === 2,
    `${tag} ZADD/ZRANGE WITHSCORES (${JSON.stringify(z)})`,
  );
  await c.rPush("l", ["x", "y", "z"]);
  check(JSON.stringify(await c.lRange("l", 0, -1)) === '["x","y","z"]', `${tag} RPUSH/LRANGE`);

  await c.xGroupCreate("st", "g", "$", { MKSTREAM: true });
  const id = await c.xAdd("st", "*", { f: "v" });
  const read = await c.xReadGroup("g", "c1", { key: "st", id: ">" }, { COUNT: 10 });
  const entries = read && (Array.isArray(read) ? read[0].messages : Object.values(read)[0]);
  check(
    entries && entries.length === 1 && entries[0].id === id && entries[0].message.f === "v",
    `${tag} XADD/XREADGROUP (${JSON.stringify(read)})`,
  );
  check((await c.xAck("st", "g", id)) === 1, `${tag} XACK`);

  const tx = await c.multi().set("t1", "a").incr("t2").get("t1").exec();
  check(JSON.stringify(tx) === '["OK",1,"a"]', `${tag} MULTI/EXEC (${JSON.stringify(tx)})`);
  const pipe = await c.multi().set("p1", "1").get("p1").incr("p1").execAsPipeline();
  check(JSON.stringify(pipe) === '["OK","1",2]', `${tag} pipeline (${JSON.stringify(pipe)})`);

  // WATCH: another connection's write aborts the transaction.
  const other = c.duplicate();
  await other.connect();
  // WATCH needs a connection of its own (node-redis 5+).
  const iso = c.duplicate();
  await iso.connect();
  await iso.watch("w");
  await other.set("w", "changed");
  let aborted = false;
  try {
    aborted = (await iso.multi().set("w", "mine").exec()) === null;
  } catch (e) {
    aborted = e.constructor.name === "WatchError";
  }
  await iso.quit();
  check(aborted && (await c.get("w")) === "changed", `${tag} WATCH aborts EXEC after another client's write`);

  const ev = await c.eval("redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])", {
    keys: ["lua"],
    arguments: ["from-lua"],
  });
  check(ev === "from-lua", `${tag} EVAL (${ev})`);

  for (let i = 0; i < 120; i++) await c.set(`scan:${i}`, "1");
  const seen = new Set();
  for await (const batch of c.scanIterator({ MATCH: "scan:*", COUNT: 25 })) {
    for (const k of Array.isArray(batch) ? batch : [batch]) seen.add(k);
  }
  check(seen.size === 120, `${tag} scanIterator found ${seen.size} of 120 keys`);

  // Pub/sub on a duplicated connection.
  const sub = c.duplicate();
  await sub.connect();
  const got = [];
  await sub.subscribe("news", (msg, ch) => got.push(`${ch}:${msg}`));
  await other.publish("news", "hello");
  await eventually(`${tag} SUBSCRIBE receives a PUBLISH`, async () => got.includes("news:hello"));
  if (got.includes("news:hello")) check(true, `${tag} SUBSCRIBE receives a PUBLISH`);
  await sub.unsubscribe("news");
  await sub.quit();

  // BLPOP waits on its own connection until another pushes.
  const blocker = c.duplicate();
  await blocker.connect();
  const popped = blocker.blPop("q", 5);
  await sleep(100);
  await other.rPush("q", "job");
  const pr = await popped;
  check(pr && pr.key === "q" && pr.element === "job", `${tag} BLPOP served by another client's RPUSH (${JSON.stringify(pr)})`);
  await blocker.quit();

  if (resp === 3) {
    // Client-side caching: the second GET is served from the cache until
    // another connection's write invalidates the key.
    const cached = createClient({ url, RESP: 3, clientSideCache: { ttl: 0, maxEntries: 0 } });
    cached.on("error", (e) => console.log(`      client error event: ${e.message}`));
    await cached.connect();
    await other.set("csc", "old");
    check((await cached.get("csc")) === "old", `${tag} client-side cache: first GET`);
    await cached.get("csc");
    const stats = cached.clientSideCache.stats();
    check(stats.hitCount >= 1, `${tag} client-side cache: second GET is a hit (${JSON.stringify(stats)})`);
    await other.set("csc", "new");
    await eventually(`${tag} client-side cache invalidated by another client's SET`, async () =>
      (await cached.get("csc")) === "new",
    );
    check(true, `${tag} client-side cache invalidated by another client's SET`);
    await cached.quit();
  }

  await other.quit();
  await c.quit();
}

async function cluster(ports) {
  const c = createCluster({
    rootNodes: ports.map((p) => ({ url: `redis://127.0.0.1:${p}` })),
    defaults: { socket: { connectTimeout: 2000, reconnectStrategy: (n) => (n > 20 ? false : 200) } },
  });
  c.on("error", (e) => console.log(`      cluster error event: ${e.message}`));
  await c.connect();
  check(true, "createCluster connected");
  check(c.masters.length === 3, `three masters (got ${c.masters.length}: ${c.masters.map((m) => m.address).join(", ")})`);

  const masterClients = await Promise.all(c.masters.map((m) => c.nodeClient(m)));
  await Promise.all(masterClients.map((m) => m.flushAll()));

  const keys = Array.from({ length: 300 }, (_, i) => `nr:${i}`);
  await Promise.all(keys.map((k, i) => c.set(k, String(i))));
  const values = await Promise.all(keys.map((k) => c.get(k)));
  check(values.every((v, i) => v === String(i)), "SET/GET of 300 keys over the slots");

  await c.mSet({ "{t}a": "1", "{t}b": "2" });
  check(JSON.stringify(await c.mGet(["{t}a", "{t}b"])) === '["1","2"]', "MSET/MGET of one hash tag");
  const tx = await c.multi("{t}x").set("{t}x", "1").incr("{t}x").get("{t}x").exec();
  check(JSON.stringify(tx) === '["OK",2,"2"]', `MULTI/EXEC on one slot (${JSON.stringify(tx)})`);

  let total = 0;
  for (const m of masterClients) {
    for await (const batch of m.scanIterator({ MATCH: "nr:*", COUNT: 100 })) {
      total += Array.isArray(batch) ? batch.length : 1;
    }
  }
  check(total === keys.length, `SCAN on every master finds ${total} of ${keys.length} keys`);

  // node-redis routes by Redis's request/response policies: DBSIZE and
  // KEYS go to every master (summed, concatenated), MGET and DEL are split
  // by slot.
  const size = await c.dbSize();
  check(size === keys.length + 3, `DBSIZE over every master is ${size} (want ${keys.length + 3})`);
  const all = await c.keys("nr:*");
  check(all.length === keys.length, `KEYS over every master finds ${all.length} of ${keys.length} keys`);
  check(JSON.stringify(await c.mGet(["nr:1", "nr:2", "nr:299"])) === '["1","2","299"]', "MGET of keys in different slots");
  check((await c.del(["nr:1", "nr:2", "nr:3"])) === 3, "DEL of keys in different slots");

  const got = [];
  await c.sSubscribe("orders", (msg) => got.push(msg));
  await c.sPublish("orders", "o1");
  await eventually("SSUBSCRIBE receives an SPUBLISH", async () => got.includes("o1"));
  if (got.includes("o1")) check(true, "SSUBSCRIBE receives an SPUBLISH");
  await c.sUnsubscribe("orders");

  await c.quit();
}

async function main(args) {
  const [mode, ...ports] = args;
  if (mode === "standalone") {
    await standalone(ports[0], 2);
    await standalone(ports[0], 3);
  } else if (mode === "cluster") {
    await cluster(ports);
  } else {
    throw new Error("usage: node node_redis_smoke.js standalone PORT | cluster PORT...");
  }
}

const deadline = setTimeout(() => {
  console.log(`FAIL: not done within ${DEADLINE_MS} ms`);
  process.exit(1);
}, DEADLINE_MS);

main(process.argv.slice(2))
  .catch((e) => check(false, `unexpected error: ${e.stack || e}`))
  .finally(() => {
    clearTimeout(deadline);
    process.exit(failed ? 1 : 0);
  });

// The typical operations of an application, each reported with what the SDK returned, for
// tests/integration/test_js_sdk.py to judge: CRUD, patch, bulk, batch, queries, change feed,
// preferred-region routing and session consistency across regions.
import { BulkOperationType, ChangeFeedStartFrom } from "@azure/cosmos";
import { client, control, docHits, errorOf, report, served } from "./lib.mjs";

const EAST = "East US", EAST2 = "East US 2", WEST = "West US";
const admin = client();
const { database } = await admin.databases.createIfNotExists({ id: "js" });
const { container, resource: containerDef } = await database.containers.createIfNotExists(
  { id: "items", partitionKey: { paths: ["/pk"] }, throughput: 10000 });

async function failure(promise) {
  try {
    const r = await promise;
    return { status: r.statusCode };
  } catch (e) {
    return errorOf(e);
  }
}

async function readFeedAll(iterator) {
  const ids = [];
  for (let i = 0; i < 20; i++) {
    const page = await iterator.readNext();
    if (page.statusCode === 304) return { ids, last: 304, continuation: page.continuationToken };
    ids.push(...page.result.map((d) => d.id));
  }
  return { ids, last: "more" };
}

await report({
  crud: async () => {
    const c = await container.items.create({ id: "c1", pk: "crud", n: 1 });
    const r = await container.item("c1", "crud").read();
    const rep = await container.item("c1", "crud").replace({ id: "c1", pk: "crud", n: 2 });
    const upNew = await container.items.upsert({ id: "c2", pk: "crud", n: 3 });
    const upOld = await container.items.upsert({ id: "c2", pk: "crud", n: 4 });
    const dup = await failure(container.items.create({ id: "c1", pk: "crud" }));
    const stale = await failure(container.item("c1", "crud").replace({ id: "c1", pk: "crud", n: 9 },
      { accessCondition: { type: "IfMatch", condition: c.etag } }));
    const del = await container.item("c2", "crud").delete();
    const gone = await container.item("c2", "crud").read();
    return {
      create: c.statusCode, contentPath: c.headers["x-ms-content-path"], containerRid: containerDef._rid,
      read: [r.statusCode, r.resource.n], replace: [rep.statusCode, rep.resource.n],
      upsert: [upNew.statusCode, upOld.statusCode, upOld.resource.n], duplicate: dup.code, stale: stale.code,
      delete: del.statusCode, readDeleted: gone.statusCode,
    };
  },

  patch: async () => {
    await container.items.create({ id: "p1", pk: "patch", n: 1, tags: ["a"], gone: true });
    const p = await container.item("p1", "patch").patch([           // the bare-array form of the docs
      { op: "incr", path: "/n", value: 5 }, { op: "add", path: "/tags/-", value: "b" },
      { op: "set", path: "/name", value: "x" }, { op: "remove", path: "/gone" }]);
    const cond = await failure(container.item("p1", "patch").patch(
      { condition: "FROM c WHERE c.n = 0", operations: [{ op: "set", path: "/n", value: 0 }] }));
    const bad = await failure(container.item("p1", "patch").patch([{ op: "incr", path: "/name", value: 1 }]));
    const after = (await container.item("p1", "patch").read()).resource;
    return { status: p.statusCode, doc: { n: after.n, tags: after.tags, name: after.name, gone: after.gone ?? null },
             condition: cond.code, invalid: bad.code };
  },

  bulk: async () => {
    await container.items.create({ id: "b-old", pk: "bulk-0", v: 0 });
    const ops = [];
    for (let i = 0; i < 20; i++) {
      ops.push({ operationType: BulkOperationType.Create, resourceBody: { id: `b${i}`, pk: `bulk-${i % 7}`, v: i } });
    }
    ops.push({ operationType: BulkOperationType.Create, resourceBody: { id: "b-old", pk: "bulk-0" } });   // 409
    ops.push({ operationType: BulkOperationType.Read, id: "b-old", partitionKey: "bulk-0" });
    ops.push({ operationType: BulkOperationType.Upsert, resourceBody: { id: "b-up", pk: "bulk-1", v: 1 } });
    ops.push({ operationType: BulkOperationType.Replace, id: "b1", resourceBody: { id: "b1", pk: "bulk-1", v: 100 } });
    ops.push({ operationType: BulkOperationType.Patch, id: "b2", partitionKey: "bulk-2",
               resourceBody: { operations: [{ op: "incr", path: "/v", value: 40 }] } });
    ops.push({ operationType: BulkOperationType.Delete, id: "b3", partitionKey: "bulk-3" });
    const res = await container.items.bulk(ops);
    const exec = await container.items.executeBulkOperations([
      { operationType: BulkOperationType.Create, partitionKey: "bulk-e", resourceBody: { id: "e1", pk: "bulk-e", v: 1 } },
      { operationType: BulkOperationType.Delete, id: "missing", partitionKey: "bulk-e" }]);
    const read = async (id, pk) => (await container.item(id, pk).read()).resource?.v ?? null;
    return {
      statuses: res.map((r) => r.statusCode), charged: res.every((r) => r.requestCharge > 0 || r.statusCode >= 400),
      etags: res.filter((r) => r.statusCode < 300 && r.statusCode !== 204)
        .every((r) => typeof r.eTag === "string" && r.eTag.length > 0),
      readBody: res[21].resourceBody?.v ?? null,
      exec: exec.map((r) => r.response?.statusCode ?? r.error?.code ?? null),
      after: { b0: await read("b0", "bulk-0"), b1: await read("b1", "bulk-1"), b2: await read("b2", "bulk-2"),
               b3: await read("b3", "bulk-3"), bup: await read("b-up", "bulk-1"), e1: await read("e1", "bulk-e") },
    };
  },

  batch: async () => {
    const ok = await container.items.batch([
      { operationType: BulkOperationType.Create, resourceBody: { id: "t1", pk: "batch", v: 1 } },
      { operationType: BulkOperationType.Upsert, resourceBody: { id: "t2", pk: "batch", v: 2 } },
      { operationType: BulkOperationType.Read, id: "t1" }], "batch");
    const failed = await container.items.batch([                   // all or nothing: t3 is not created
      { operationType: BulkOperationType.Create, resourceBody: { id: "t3", pk: "batch" } },
      { operationType: BulkOperationType.Create, resourceBody: { id: "t1", pk: "batch" } }], "batch");
    const t3 = (await container.item("t3", "batch").read()).statusCode;
    return { status: ok.code, ops: ok.result.map((r) => r.statusCode),
             failed: { status: failed.code, ops: failed.result.map((r) => r.statusCode) }, notApplied: t3 };
  },

  queries: async () => {
    for (let i = 0; i < 6; i++) await container.items.create({ id: `q${i}`, pk: `query-${i % 2}`, n: i });
    const where = await container.items.query({
      query: "SELECT c.id FROM c WHERE STARTSWITH(c.pk, 'query-') AND c.n >= @min ORDER BY c.n DESC",
      parameters: [{ name: "@min", value: 3 }] }).fetchAll();
    const scoped = await container.items.query("SELECT VALUE c.n FROM c", { partitionKey: "query-1" }).fetchAll();
    const count = await container.items.query("SELECT VALUE COUNT(1) FROM c WHERE STARTSWITH(c.pk, 'query-')").fetchAll();
    const it = container.items.query("SELECT c.id FROM c WHERE STARTSWITH(c.pk, 'query-')", { maxItemCount: 2 });
    const pages = [];
    while (it.hasMoreResults()) {
      const page = await it.fetchNext();
      if (page.resources.length) pages.push(page.resources.length);
    }
    return { where: where.resources.map((d) => d.id), scoped: scoped.resources.sort(),
             count: count.resources, pages };
  },

  changeFeed: async () => {
    for (let i = 0; i < 6; i++) await container.items.create({ id: `f${i}`, pk: `feed-${i % 3}`, n: i });
    const one = container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning("feed-1") });
    const first = await readFeedAll(one);
    await container.items.create({ id: "f-new", pk: "feed-1" });
    await container.items.create({ id: "f-other", pk: "feed-2" });
    const next = await readFeedAll(one);
    const all = container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning() });
    const whole = await readFeedAll(all);
    return { key: first.ids, keyLast: first.last, keyNext: next.ids,
             whole: whole.ids.filter((id) => id.startsWith("f")).sort() };
  },

  routing: async () => {
    await container.items.create({ id: "r1", pk: "route" });
    const out = {};
    for (const region of [WEST, EAST2]) {
      const c = client({ preferred: [region, EAST] });
      const it = c.database("js").container("items");
      await it.item("r1", "route").read();           // the first read also warms the client's caches
      const before = await served();
      await it.item("r1", "route").read();
      await it.items.upsert({ id: `w-${region}`, pk: "route" });
      out[region] = docHits(before, await served());
      c.dispose();
    }
    return out;
  },

  session: async () => {
    // East US -> West US replication takes 150 ms: a read in West US right after a write there
    // is read-your-writes only if the client sends the write's session token.
    const lag = (await control("POST", "/faults", { type: "link_lag", from: EAST, to: WEST, lag_ms: 150, one_way: true })).body;
    const c = client({ preferred: [WEST, EAST] });
    const it = c.database("js").container("items");
    await it.item("r1", "route").read();
    const before = await served();
    const seen = [];
    for (let i = 0; i < 3; i++) {
      await it.items.upsert({ id: "s1", pk: "session", v: i });
      const r = await it.item("s1", "session").read();
      seen.push(r.resource?.v ?? null);
    }
    const created = await it.items.create({ id: "s2", pk: "session" });
    const fresh = await it.item("s2", "session").read();
    const hits = docHits(before, await served());
    await control("DELETE", `/faults/${lag.id}`);
    c.dispose();
    return { seen, fresh: fresh.statusCode, created: created.statusCode, hits };
  },
});
admin.dispose();

// Cross-partition queries the JS SDK plans itself: each query runs with `forceQueryPlan: true`
// (the SDK asks for the query plan, sends the rewritten query to every partition key range and
// merges) and without it, and both results are reported for
// tests/integration/test_js_sdk.py to compare (with each other and with the expected answer).
// A query is its SQL text, or {name, sql, partitionKey, container}: scoped to one partition
// key, or run on the container "empty" (created with no documents); with `refused: true` each
// run reports its own error ({error}) instead of failing the case.
import { client, errorOf, report } from "./lib.mjs";

const QUERIES = JSON.parse(process.env.REGIONLAB_QUERIES);
const admin = client();
const { database } = await admin.databases.createIfNotExists({ id: "jsplan" });
const containers = {};
for (const id of ["items", "empty"]) {
  containers[id] = (await database.containers.createIfNotExists({ id, partitionKey: { paths: ["/pk"] } })).container;
}
for (const doc of JSON.parse(process.env.REGIONLAB_DOCS)) await containers.items.items.upsert(doc);

const cases = {};
for (const entry of QUERIES) {
  const q = typeof entry === "string" ? { name: entry, sql: entry } : entry;
  const container = containers[q.container || "items"];
  const scope = q.partitionKey === undefined ? {} : { partitionKey: q.partitionKey };
  const run = async (options) => {
    try {
      return (await container.items.query(q.sql, { ...scope, ...options, maxItemCount: 3 }).fetchAll()).resources;
    } catch (e) {
      return { error: errorOf(e) };
    }
  };
  cases[q.name] = q.refused ? async () => ({ forced: await run({ forceQueryPlan: true }), plain: await run({}) })
                            : async () => {
    const forced = await container.items.query(q.sql, { ...scope, forceQueryPlan: true, maxItemCount: 3 }).fetchAll();
    const plain = await container.items.query(q.sql, { ...scope, maxItemCount: 3 }).fetchAll();
    return { forced: forced.resources, plain: plain.resources };
  };
}
await report(cases);

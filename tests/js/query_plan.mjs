// Cross-partition queries the JS SDK plans itself: each query runs with `forceQueryPlan: true`
// (the SDK asks for the query plan, sends the rewritten query to every partition key range and
// merges) and without it, and both results are reported for
// tests/integration/test_js_sdk.py to compare (with each other and with the expected answer).
import { client, report } from "./lib.mjs";

const QUERIES = JSON.parse(process.env.REGIONLAB_QUERIES);
const admin = client();
const { database } = await admin.databases.createIfNotExists({ id: "jsplan" });
const { container } = await database.containers.createIfNotExists(
  { id: "items", partitionKey: { paths: ["/pk"] } });
for (const doc of JSON.parse(process.env.REGIONLAB_DOCS)) await container.items.upsert(doc);

const cases = {};
for (const sql of QUERIES) {
  cases[sql] = async () => {
    const forced = await container.items.query(sql, { forceQueryPlan: true, maxItemCount: 3 }).fetchAll();
    const plain = await container.items.query(sql, { maxItemCount: 3 }).fetchAll();
    return { forced: forced.resources, plain: plain.resources };
  };
}
await report(cases);

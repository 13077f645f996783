// The JavaScript SDK over HTTPS (regionlab --https), trusting the emulator's certificate only
// through NODE_EXTRA_CA_CERTS (no agent, no rejectUnauthorized): CRUD, a cross-partition query
// and a read from another region, reported for tests/integration/test_js_sdk.py to judge.
import { client, docHits, report, served } from "./lib.mjs";

const WEST = "West US";

await report({
  https: async () => {
    const admin = client();
    const { database } = await admin.databases.createIfNotExists({ id: "jstls" });
    const { container } = await database.containers.createIfNotExists(
      { id: "items", partitionKey: { paths: ["/pk"] } });
    const created = await container.items.create({ id: "t1", pk: "a", n: 1 });
    await container.items.upsert({ id: "t2", pk: "b", n: 2 });
    const replaced = await container.item("t1", "a").replace({ id: "t1", pk: "a", n: 3 });
    const { resources } = await container.items
      .query("SELECT VALUE c.n FROM c ORDER BY c.n").fetchAll();
    const before = await served();
    const reader = client({ preferred: [WEST] });
    const read = await reader.database("jstls").container("items").item("t2", "b").read();
    const hits = docHits(before, await served());
    const deleted = await container.item("t2", "b").delete();
    return { statuses: [created.statusCode, replaced.statusCode, deleted.statusCode],
             query: resources, read: read.resource.n, hits };
  },
});

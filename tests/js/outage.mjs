// What an application using the JS SDK sees while a region is out in one outage mode
// (REGIONLAB_OUTAGE_MODE): reads and writes with a read region out, then with the write region
// out, each with the error (if any) that reached the application and where it was served.
// Reported for tests/integration/test_js_sdk.py, which asserts per mode.
import { client, control, docHits, errorOf, report, served } from "./lib.mjs";

const EAST = "East US", WEST = "West US";
const MODE = process.env.REGIONLAB_OUTAGE_MODE;
const TIMEOUT_MS = Number(process.env.REGIONLAB_JS_TIMEOUT_MS || 2000);   // the SDK's default is 60 s

const admin = client();
const { database } = await admin.databases.createIfNotExists({ id: "js" });
const { container } = await database.containers.createIfNotExists({ id: "outage", partitionKey: { paths: ["/pk"] } });
await container.items.upsert({ id: "o1", pk: "o", v: 1 });
admin.dispose();

// One operation during an outage: its outcome and how long it took.
async function attempt(fn) {
  const t0 = Date.now();
  let outcome;
  try {
    const r = await fn();
    outcome = { ok: true, status: r.statusCode };
  } catch (e) {
    outcome = { ok: false, error: errorOf(e) };
  }
  outcome.ms = Date.now() - t0;
  return outcome;
}

// One operation alone: its outcome, and where it was served.
async function alone(fn) {
  const before = await served();
  const outcome = await attempt(fn);
  outcome.hits = docHits(before, await served());
  return outcome;
}

async function during(region, body) {
  const c = client({ preferred: [WEST, EAST], timeoutMs: TIMEOUT_MS });
  const items = c.database("js").container("outage");
  await items.item("o1", "o").read();                   // warm: the client knows every region
  const fault = await control("POST", "/faults", { type: "region_outage", region, mode: MODE });
  if (fault.status !== 201) throw new Error(`fault refused: ${JSON.stringify(fault.body)}`);
  try {
    return await body(items);
  } finally {
    await control("DELETE", `/faults/${fault.body.id}`);
    c.dispose();
  }
}

await report({
  // a read and a write at once (an SDK that retries in the same region costs its retries once)
  readRegionOut: () => during(WEST, async (items) => {
    const before = await served();
    const [read, write] = await Promise.all([attempt(() => items.item("o1", "o").read()),
                                             attempt(() => items.items.upsert({ id: "o2", pk: "o", v: 2 }))]);
    return { read, write, hits: docHits(before, await served()) };
  }),
  writeRegionOut: () => during(EAST, async (items) => {
    const out = {
      read: await alone(() => items.item("o1", "o").read()),
      write: await alone(() => items.items.upsert({ id: "o3", pk: "o", v: 3 })),
    };
    // a client created during the outage discovers the account from the global endpoint
    const fresh = client({ preferred: [WEST, EAST], timeoutMs: TIMEOUT_MS });
    out.freshRead = await alone(() => fresh.database("js").container("outage").item("o1", "o").read());
    fresh.dispose();
    return out;
  }),
});

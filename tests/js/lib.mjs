// Shared by the scripts that drive regionlab with the official JavaScript SDK (run by
// tests/integration/test_js_sdk.py): the client, the control port, and the JSON report.
import { CosmosClient } from "@azure/cosmos";

export const ENDPOINT = need("REGIONLAB_ENDPOINT");
export const KEY = need("REGIONLAB_KEY");
export const CONTROL = need("REGIONLAB_CONTROL").replace(/\/$/, "");

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these scripts from tests/integration/test_js_sdk.py`);
  return v;
}

// A client of the account endpoint (plain http:// works with no agent or TLS settings).
export function client({ preferred, consistency = "Session", timeoutMs, discovery = true } = {}) {
  const connectionPolicy = { enableEndpointDiscovery: discovery };
  if (preferred) connectionPolicy.preferredLocations = preferred;
  if (timeoutMs) connectionPolicy.requestTimeout = timeoutMs;
  return new CosmosClient({ endpoint: ENDPOINT, key: KEY, consistencyLevel: consistency, connectionPolicy });
}

export async function control(method, path, body) {
  const res = await fetch(CONTROL + path, {
    method, headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

// Item requests each endpoint served since `before` (the control port's reply counters), e.g.
// {"West US": {"GET 200": 1}}: which region really served what.
export async function served() {
  return (await control("GET", "/topology")).body.requests;
}

export function docHits(before, after) {
  const out = {};
  for (const [region, counts] of Object.entries(after)) {
    for (const [key, n] of Object.entries(counts)) {
      const [method, kind, status] = key.split(" ");
      const d = n - ((before[region] || {})[key] || 0);
      if (kind === "docs" && d) (out[region] ||= {})[`${method} ${status}`] = d;
    }
  }
  return out;
}

// What an SDK error tells the application.
export function errorOf(e) {
  return { name: e.name, code: e.code ?? null, substatus: e.substatus ?? null,
           message: String(e.message || "").slice(0, 300) };
}

// Runs each case; one JSON object on stdout: {case: result | {"error": ...}}.
export async function report(cases) {
  const out = {};
  for (const [name, fn] of Object.entries(cases)) {
    try {
      out[name] = await fn();
    } catch (e) {
      out[name] = { error: errorOf(e), stack: String(e.stack || "").split("\n").slice(0, 4) };
    }
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

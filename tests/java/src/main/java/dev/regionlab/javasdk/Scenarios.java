package dev.regionlab.javasdk;

import com.azure.cosmos.*;
import com.azure.cosmos.models.*;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The official Java SDK (com.azure:azure-cosmos, gateway mode over HTTPS) running the seed's
 * configurations against regionlab, one scenario per argument, each printing one JSON line of
 * what the SDK did (regions it contacted, timings, counts). Faults go through the emulator's
 * control port. tests/integration/test_java_sdk.py builds and runs this and judges the lines.
 */
public final class Scenarios {
    static final String URL = System.getenv("URL"), KEY = System.getenv("KEY"), CONTROL = System.getenv("CONTROL");
    static final HttpClient HTTP = HttpClient.newHttpClient();

    public static void main(String[] args) throws Exception {
        for (String name : args) {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("scenario", name);
            try {
                switch (name) {
                    case "routing": routing(out); break;
                    case "hedging": hedging(out); break;
                    case "excluded": excluded(out); break;
                    case "breaker": breaker(out); break;
                    case "session": session(out); break;
                    default: throw new IllegalArgumentException("no scenario " + name);
                }
            } catch (Exception e) {
                out.put("error", e.toString());
            }
            System.out.println(json(out));
        }
        System.exit(0);           // the SDK's non-daemon threads would keep the JVM up
    }

    static CosmosClientBuilder builder(String... preferred) {
        return new CosmosClientBuilder().endpoint(URL).key(KEY).gatewayMode()
            .preferredRegions(Arrays.asList(preferred)).multipleWriteRegionsEnabled(true)
            .consistencyLevel(ConsistencyLevel.SESSION);
    }

    static CosmosContainer container(CosmosClient client, String db) {
        client.createDatabaseIfNotExists(db);
        client.getDatabase(db).createContainerIfNotExists(new CosmosContainerProperties("c", "/pk"));
        return client.getDatabase(db).getContainer("c");
    }

    static Map<String, Object> item(String id) {
        Map<String, Object> m = new HashMap<>();
        m.put("id", id);
        m.put("pk", id);
        return m;
    }

    /** Preferred regions: reads from the first, writes (multi-write) to the first too. */
    static void routing(Map<String, Object> out) {
        try (CosmosClient client = builder("West US", "East US 2").buildClient()) {
            CosmosContainer c = container(client, "java-routing");
            CosmosItemResponse<Map> w = c.upsertItem(item("a"));
            out.put("write", w.getDiagnostics().getContactedRegionNames());
            CosmosItemResponse<Map> r = c.readItem("a", new PartitionKey("a"), Map.class);
            out.put("read", r.getDiagnostics().getContactedRegionNames());
            int n = 0;
            for (Map ignored : c.queryItems("SELECT * FROM c", new CosmosQueryRequestOptions(), Map.class)) n++;
            out.put("query_rows", n);
            c.deleteItem("a", new PartitionKey("a"), new CosmosItemRequestOptions());
            try {
                c.readItem("a", new PartitionKey("a"), Map.class);
                out.put("after_delete", 200);
            } catch (CosmosException e) {
                out.put("after_delete", e.getStatusCode());
            }
        }
    }

    /** The seed's availability strategy: threshold 500 ms, step 100 ms, answered by the next region. */
    static void hedging(Map<String, Object> out) throws Exception {
        CosmosEndToEndOperationLatencyPolicyConfig e2e = new CosmosEndToEndOperationLatencyPolicyConfigBuilder(
            Duration.ofSeconds(5)).availabilityStrategy(new ThresholdBasedAvailabilityStrategy(
                Duration.ofMillis(500), Duration.ofMillis(100))).build();
        try (CosmosClient client = builder("West US", "East US 2").endToEndOperationLatencyPolicyConfig(e2e).buildClient()) {
            CosmosContainer c = container(client, "java-hedging");
            c.upsertItem(item("h"));
            waitReadable(c, "h", "West US", "East US 2");
            int fault = inject("{\"type\": \"latency\", \"region\": \"West US\", \"delay_ms\": 3000, \"op\": \"read\"}");
            try {
                long t = System.nanoTime();
                CosmosItemResponse<Map> r = c.readItem("h", new PartitionKey("h"), Map.class);
                out.put("ms", (System.nanoTime() - t) / 1_000_000);
                out.put("read", r.getDiagnostics().getContactedRegionNames());
            } finally {
                heal(fault);
            }
        }
    }

    /** Excluded regions from a supplier the application changes while the client runs. */
    static void excluded(Map<String, Object> out) {
        AtomicReference<CosmosExcludedRegions> excluded = new AtomicReference<>(new CosmosExcludedRegions(Set.of()));
        try (CosmosClient client = builder("West US", "East US 2").excludedRegionsSupplier(excluded::get).buildClient()) {
            CosmosContainer c = container(client, "java-excluded");
            c.upsertItem(item("x"));
            waitReadable(c, "x", "West US", "East US 2");
            out.put("before", c.readItem("x", new PartitionKey("x"), Map.class).getDiagnostics().getContactedRegionNames());
            excluded.set(new CosmosExcludedRegions(Set.of("West US")));
            out.put("after", c.readItem("x", new PartitionKey("x"), Map.class).getDiagnostics().getContactedRegionNames());
        }
    }

    /** The partition-level circuit breaker (multi-write): reads failing in West US move after 10. */
    static void breaker(Map<String, Object> out) throws Exception {
        try (CosmosClient client = builder("West US", "East US 2").buildClient()) {
            CosmosContainer c = container(client, "java-breaker");
            c.upsertItem(item("b"));
            waitReadable(c, "b", "West US", "East US 2");
            int fault = inject("{\"type\": \"error\", \"region\": \"West US\", \"status\": 503, \"op\": \"read\", "
                               + "\"database\": \"java-breaker\"}");
            List<List<String>> contacted = new ArrayList<>();
            try {
                for (int i = 0; i < 15; i++) {
                    CosmosItemResponse<Map> r = c.readItem("b", new PartitionKey("b"), Map.class);
                    contacted.add(new ArrayList<>(r.getDiagnostics().getContactedRegionNames()));
                }
            } finally {
                heal(fault);
            }
            out.put("contacted", contacted);
        }
    }

    /** Region-scoped session capture (multi-write): a read after a write in another region sees it. */
    static void session(Map<String, Object> out) {
        try (CosmosClient writer = builder("West US").buildClient();
             CosmosClient reader = builder("East US 2").buildClient()) {
            CosmosContainer w = container(writer, "java-session");
            CosmosContainer r = container(reader, "java-session");
            CosmosItemResponse<Map> written = w.upsertItem(item("s"));
            out.put("write", written.getDiagnostics().getContactedRegionNames());
            String token = written.getSessionToken();
            out.put("token", token);
            CosmosItemRequestOptions opts = new CosmosItemRequestOptions().setSessionToken(token);
            CosmosItemResponse<Map> got = w.readItem("s", new PartitionKey("s"), opts, Map.class);
            out.put("read_own", got.getDiagnostics().getContactedRegionNames());
            CosmosItemResponse<Map> other = r.readItem("s", new PartitionKey("s"), opts, Map.class);
            out.put("read_other_status", other.getStatusCode());
        }
    }

    static void waitReadable(CosmosContainer c, String id, String... regions) {
        for (String region : regions) {
            CosmosItemRequestOptions opts = new CosmosItemRequestOptions();
            List<String> others = new ArrayList<>(List.of("East US", "East US 2", "West US"));
            others.remove(region);
            opts.setExcludedRegions(others);
            for (int i = 0; ; i++) {
                try {
                    c.readItem(id, new PartitionKey(id), opts, Map.class);
                    break;
                } catch (CosmosException e) {
                    if (i > 100) throw e;
                }
            }
        }
    }

    static int inject(String spec) throws Exception {
        HttpResponse<String> reply = HTTP.send(HttpRequest.newBuilder(URI.create(CONTROL + "faults"))
            .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(spec)).build(),
            HttpResponse.BodyHandlers.ofString());
        Matcher m = Pattern.compile("\"id\":\\s*(\\d+)").matcher(reply.body());
        if (reply.statusCode() != 201 || !m.find()) throw new IllegalStateException("fault refused: " + reply.body());
        return Integer.parseInt(m.group(1));
    }

    static void heal(int id) throws Exception {
        HTTP.send(HttpRequest.newBuilder(URI.create(CONTROL + "faults/" + id)).DELETE().build(),
                  HttpResponse.BodyHandlers.discarding());
    }

    static String json(Object v) {
        if (v == null) return "null";
        if (v instanceof String) return "\"" + ((String) v).replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
        if (v instanceof Number || v instanceof Boolean) return v.toString();
        if (v instanceof Map) {
            StringJoiner j = new StringJoiner(", ", "{", "}");
            ((Map<?, ?>) v).forEach((k, x) -> j.add(json(String.valueOf(k)) + ": " + json(x)));
            return j.toString();
        }
        if (v instanceof Collection) {
            StringJoiner j = new StringJoiner(", ", "[", "]");
            ((Collection<?>) v).forEach(x -> j.add(json(x)));
            return j.toString();
        }
        return json(v.toString());
    }
}

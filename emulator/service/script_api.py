"""The server-side JavaScript API a script sees, as the service gives it: `getContext()` with
`getCollection()`, `getResponse()` and `getRequest()`, the `__` shorthand, and `console.log`.

Theory of operation: a script never reaches into Python. Each collection call
(`createDocument`, `readDocument`, `queryDocuments`, ...) queues an operation and returns
true ("accepted"), or false once the execution has issued SCRIPT_OPERATIONS_MAX operations, as
the service answers a script near its bounds. When the JavaScript has run to its end, the engine
hands the queue to the service (`__rl.round()`, JSON), which does the operations in order against
the execution's one transaction (service/sproc.py) and calls `__rl.deliver(results)`: each
operation's callback runs with `(err, resource, options)`, as the service's callbacks run after
their operation finished, and may queue more. When a round queues nothing the script is done, and
the round carries the response body. An operation that fails with no callback to hear it ends the
script with that operation's error (`failed` in the round), as in the service.

`__.filter`, `__.map` and the other chain helpers of the service are not provided: calling one
throws an error that says so and names `__.queryDocuments` instead.
"""
import json

PRELUDE = r"""
Object.defineProperty(globalThis, "__rl", {writable: false, configurable: false, value: (function (selfLink, opsMax, logMax) {
  "use strict";
  var stringify = JSON.stringify;     // the script may replace JSON.stringify; the rounds keep theirs
  var queued = [], callbacks = {}, nextId = 1, issued = 0, logs = [], logBytes = 0, failed = null;
  var state = {body: undefined, values: {}};
  var request = {body: undefined, values: {}, operation: "", changed: false};

  function guid() {
    return "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx".replace(/[xy]/g, function (c) {
      var r = Math.random() * 16 | 0;
      return (c === "x" ? r : (r & 3 | 8)).toString(16);
    });
  }
  function queue(op, link, args, options, callback) {
    if (typeof options === "function") { callback = options; options = undefined; }
    if (callback !== undefined && callback !== null && typeof callback !== "function") {
      throw new Error("The callback of " + op + " must be a function.");
    }
    if (issued >= opsMax) { return false; }
    issued++;
    var id = nextId++;
    callbacks[id] = callback || null;
    queued.push({id: id, op: op, link: String(link), args: args, options: options || {}});
    return true;
  }
  function writeWithId(op) {
    return function (link, doc, options, callback) {
      if (typeof options === "function") { callback = options; options = undefined; }
      options = options || {};
      if (doc !== null && typeof doc === "object" && !Array.isArray(doc) && doc.id === undefined
          && !options.disableAutomaticIdGeneration) {
        doc = Object.assign({}, doc, {id: guid()});
      }
      return queue(op, link, {doc: doc}, options, callback);
    };
  }
  var collection = {
    getSelfLink: function () { return selfLink; },
    createDocument: writeWithId("create"),
    upsertDocument: writeWithId("upsert"),
    replaceDocument: function (link, doc, options, callback) {
      return queue("replace", link, {doc: doc}, options, callback);
    },
    readDocument: function (link, options, callback) { return queue("read", link, {}, options, callback); },
    deleteDocument: function (link, options, callback) { return queue("delete", link, {}, options, callback); },
    queryDocuments: function (link, query, options, callback) {
      return queue("query", link, {query: query}, options, callback);
    },
    readDocuments: function (link, options, callback) { return queue("feed", link, {}, options, callback); }
  };
  var response = {
    getBody: function () { return state.body; },
    setBody: function (value) { state.body = value; },
    appendBody: function (value) { state.body = (state.body === undefined ? "" : String(state.body)) + value; },
    getValue: function (key) { return state.values[key]; },
    setValue: function (key, value) { state.values[key] = value; },
    appendValue: function (key, value) {
      state.values[key] = (state.values[key] === undefined ? "" : String(state.values[key])) + value;
    },
    getMaxResponseBodySize: function () { return __rl_responseMax; }
  };
  var req = {
    getBody: function () { return request.body; },
    setBody: function (value) { request.body = value; request.changed = true; },
    getValue: function (key) { return request.values[key]; },
    setValue: function (key, value) { request.values[key] = value; },
    getOperationType: function () { return request.operation; }
  };
  var context = {
    getCollection: function () { return collection; },
    getResponse: function () { return response; },
    getRequest: function () { return req; }
  };
  globalThis.getContext = function () { return context; };
  function unsupported(name) {
    return function () {
      throw new Error("__." + name + " is not supported by regionlab; use __.queryDocuments with a SQL query.");
    };
  }
  var shorthand = {
    getSelfLink: collection.getSelfLink,
    createDocument: function (doc, o, cb) { return collection.createDocument(selfLink, doc, o, cb); },
    upsertDocument: function (doc, o, cb) { return collection.upsertDocument(selfLink, doc, o, cb); },
    replaceDocument: collection.replaceDocument,
    readDocument: collection.readDocument,
    deleteDocument: collection.deleteDocument,
    queryDocuments: function (query, o, cb) { return collection.queryDocuments(selfLink, query, o, cb); },
    readDocuments: function (o, cb) { return collection.readDocuments(selfLink, o, cb); },
    request: req,
    response: response
  };
  ["chain", "filter", "flatten", "map", "pluck", "sortBy", "sortByDescending", "unwind", "value"].forEach(
    function (name) { shorthand[name] = unsupported(name); });
  globalThis.__ = shorthand;
  globalThis.console = {log: function () {
    var line = Array.prototype.map.call(arguments, function (a) {
      return typeof a === "string" ? a : stringify(a);
    }).join(" ");
    if (logBytes + line.length <= logMax) { logs.push(line); logBytes += line.length + 1; }
  }};

  function round() {
    var ops = queued;
    queued = [];
    var out = {ops: ops};
    if (failed !== null) { out = {failed: failed}; }
    else if (ops.length === 0) {
      out.body = state.body === undefined ? null : stringify(state.body);
      out.logs = logs.join("\n");
      if (request.changed) { out.request = stringify(request.body); }
    }
    return stringify(out);
  }
  function errorOf(e) {
    var err = new Error(e.message);
    err.number = e.status;
    err.body = stringify({code: e.code, message: e.message});
    return err;
  }
  return {
    start: function (main, body, operation, responseBody) {
      request.body = body;
      request.operation = operation;
      state.body = responseBody;
      main();
      return round();
    },
    deliver: function (results) {
      for (var i = 0; i < results.length; i++) {
        var r = results[i], cb = callbacks[r.id];
        delete callbacks[r.id];
        if (r.err) {
          if (!cb) { failed = r.err; return round(); }
          cb.call(context, errorOf(r.err));
        } else if (cb) {
          cb.call(context, undefined, r.resource, r.options || {});
        }
      }
      return round();
    }
  };
})(SELF_LINK, OPS_MAX, LOG_MAX)});
"""


def prelude(self_link: str, ops_max: int, log_max_chars: int, response_max_bytes: int) -> str:
    return (f"var __rl_responseMax = {response_max_bytes};\n"
            + PRELUDE.replace("SELF_LINK, OPS_MAX, LOG_MAX", f"{json.dumps(self_link)}, {ops_max}, {log_max_chars}"))


def start(body: str, params_json: str, request_json: str = "undefined", operation: str = "",
          response_json: str = "undefined") -> str:
    """The code that defines the script's function and runs it with its parameters: the value
    is the first round (JSON). The function text is evaluated as an expression, as the service
    takes a script's body. A trigger gets its write's item as the request body, and a post-trigger
    the written item as the response body."""
    return (f"var __main = (\n{body}\n);\n"
            "if (typeof __main !== 'function') { throw new Error('The script body is not a JavaScript function.'); }\n"
            f"__rl.start(function () {{ return __main.apply(getContext(), {params_json}); }}, {request_json}, "
            f"{json.dumps(operation)}, {response_json});")


def deliver(results_json: str) -> str:
    return f"__rl.deliver({results_json});"

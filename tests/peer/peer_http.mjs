// Real-peer test over MCP Streamable HTTP: the official SDK client
// (StreamableHTTPClientTransport) against `toolgate serve --http -- node
// server-everything stdio`, compared with the same client on the server
// directly over stdio.
//
// What it proves: toolgate's HTTP front is a drop-in for a real client and
// a real server (same tool list, same results), progress notifications
// reach the caller before the result and a sampling request of the server
// makes the round trip through the caller, a rate denial reaches the SDK as
// the JSON-RPC error, a terminated session is gone, and the same works over
// TLS with a certificate the client trusts through NODE_EXTRA_CA_CERTS.
//
// Usage: node peer_http.mjs /path/to/toolgate
// (node peer_http.mjs --tls-client URL: the TLS client, run as a child so
// that NODE_EXTRA_CA_CERTS applies from its start.)
// Exit 0 when every check holds; 1 with one line per failed check otherwise.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";

import {
  byName, check, CONNECT_TIMEOUT_MS, failures, passCount, RATE_DENIED_CODE, serverCmd, show,
  toolgateArg, withTimeout,
} from "./common.mjs";

const CALL_TIMEOUT_MS = 15000;
const secret = `peer-secret-${randomBytes(8).toString("hex")}`;
const sampled = `sampled-${secret}`;

// A client that can be sampled: its answer to sampling/createMessage is
// fixed, so the server's tool result is the same however it is reached.
function newClient() {
  const client = new Client(
    { name: "toolgate-peer-http", version: "1.0.0" },
    { capabilities: { sampling: {} } }
  );
  client.setRequestHandler(CreateMessageRequestSchema, async () => ({
    model: "peer-test",
    role: "assistant",
    content: { type: "text", text: sampled },
  }));
  return client;
}

async function connectHttp(url) {
  const transport = new StreamableHTTPClientTransport(new URL(url));
  const client = newClient();
  await withTimeout(client.connect(transport), CONNECT_TIMEOUT_MS, `${url}: initialize`);
  return { client, transport };
}

// What is compared between the server direct and behind toolgate: the tool
// list, echo, get-sum, a sampling round trip, and the order of progress
// notifications and the result of a long-running operation.
async function exercise(client) {
  const opts = { timeout: CALL_TIMEOUT_MS };
  const tools = byName((await client.listTools()).tools);
  const echo = await client.callTool({ name: "echo", arguments: { message: secret } }, undefined, opts);
  const sum = await client.callTool({ name: "get-sum", arguments: { a: 19, b: 23 } }, undefined, opts);
  const sampling = await client.callTool(
    { name: "trigger-sampling-request", arguments: { prompt: "say something", maxTokens: 16 } },
    undefined,
    opts
  );
  const order = [];
  const long = await client.callTool(
    { name: "trigger-long-running-operation", arguments: { duration: 1, steps: 2 } },
    undefined,
    { ...opts, onprogress: (p) => order.push(`progress ${p.progress}/${p.total}`) }
  );
  order.push("result");
  return { tools, echo, sum, sampling, long, order };
}

// `toolgate serve --http 127.0.0.1:0 <args> -- server-everything`; resolves
// to the port it bound once it serves.
function startServeHttp(toolgate, args) {
  const argv = ["serve", "--http", "127.0.0.1:0", ...args, "--", ...serverCmd];
  const child = spawn(toolgate, argv, { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (chunk) => {
    if (stderr.length < 16384) stderr += chunk.toString();
  });
  const ready = new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`serve --http did not start:\n${stderr}`)),
      CONNECT_TIMEOUT_MS);
    child.stderr.on("data", () => {
      const port = /\(port (\d+)\)/.exec(stderr);
      if (port && stderr.includes(" serve: serving ")) {
        clearTimeout(timer);
        ok(Number(port[1]));
      }
    });
    child.once("exit", (code) => fail(new Error(`serve --http exited (${code}):\n${stderr}`)));
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((ok) => child.once("exit", ok));
      child.kill("SIGTERM");
      await gone;
    }
  };
  return { ready, stop, stderrText: () => stderr };
}

async function direct() {
  const client = newClient();
  await withTimeout(
    client.connect(new StdioClientTransport({ command: serverCmd[0], args: serverCmd.slice(1), stderr: "pipe" })),
    CONNECT_TIMEOUT_MS,
    "direct: initialize"
  );
  try {
    return await exercise(client);
  } finally {
    await client.close();
  }
}

function compare(d, h, label) {
  check(d.tools.length > 0, `${label}: direct tools/list returns tools (${d.tools.length})`);
  check(isDeepStrictEqual(d.tools, h.tools), `${label}: tools/list identical direct and over HTTP`,
    `direct ${show(d.tools.map((t) => t.name))} http ${show(h.tools.map((t) => t.name))}`);
  check(h.echo.content?.[0]?.text === `Echo: ${secret}` && isDeepStrictEqual(d.echo, h.echo),
    `${label}: echo identical and correct`, `direct ${show(d.echo)} http ${show(h.echo)}`);
  check(/\b42\b/.test(h.sum.content?.[0]?.text ?? "") && isDeepStrictEqual(d.sum, h.sum),
    `${label}: get-sum identical and correct (19 + 23 = 42)`, `direct ${show(d.sum)} http ${show(h.sum)}`);
}

// Over plain HTTP: everything exercise() does, a terminated session, and
// (another toolgate) a rate denial.
async function plainHttp(toolgate, d, tmp) {
  const serve = startServeHttp(toolgate, ["--audit", join(tmp, "http.jsonl")]);
  const limited = startServeHttp(toolgate, ["--audit", join(tmp, "rate.jsonl"), "--limit", "rate_limit=3/minute"]);
  const tasked = startServeHttp(toolgate, ["--audit", join(tmp, "task.jsonl"), "--limit",
    "max_tool_call_duration=1s"]);
  try {
    const url = `http://127.0.0.1:${await serve.ready}/mcp`;
    const { client, transport } = await connectHttp(url);
    const h = await exercise(client);
    compare(d, h, "http");
    check(JSON.stringify(h.sampling).includes(sampled) && isDeepStrictEqual(d.sampling, h.sampling),
      "http: sampling round trip (the server's sampling/createMessage answered by the client)",
      `direct ${show(d.sampling)} http ${show(h.sampling)}`);
    const progress = h.order.filter((o) => o.startsWith("progress"));
    // The server sends its last progress and the result back to back, so
    // how many progress calls the client sees before the result varies
    // (direct too; the SDK drops a progress that follows the result): at
    // least one must reach it first.
    check(progress.length >= 1 && h.order.indexOf("result") === h.order.length - 1 &&
      d.order.includes("progress 1/2") && h.order[0] === "progress 1/2",
      "http: progress notifications reach the caller before the result",
      `direct ${show(d.order)} http ${show(h.order)}`);
    check(isDeepStrictEqual(d.long, h.long), "http: long-running operation result identical",
      `direct ${show(d.long)} http ${show(h.long)}`);

    // DELETE ends the session: the id is then unknown (404), and the
    // client, left without a session, cannot call.
    const sid = transport.sessionId;
    await transport.terminateSession();
    check(transport.sessionId === undefined, "http: terminateSession (DELETE) accepted");
    const after = await fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-session-id": sid,
        "mcp-protocol-version": "2025-06-18",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 99, method: "tools/list" }),
    });
    await after.body?.cancel();
    check(after.status === 404, `http: the terminated session's id answers 404 (got ${after.status})`);
    let failed = null;
    try {
      await client.callTool({ name: "echo", arguments: { message: "x" } }, undefined, { timeout: 5000 });
    } catch (e) {
      failed = e;
    }
    check(failed !== null, "http: a call after terminateSession fails", "it was answered");
    await client.close();

    // 3/minute: the fourth call in a row is refused, as the JSON-RPC error.
    const rl = await connectHttp(`http://127.0.0.1:${await limited.ready}/mcp`);
    const out = [];
    for (let i = 0; i < 4; i++) {
      try {
        out.push({ ok: await rl.client.callTool({ name: "echo", arguments: { message: secret } }) });
      } catch (e) {
        out.push({ err: e });
      }
    }
    await rl.client.close();
    check(out.slice(0, 3).every((o) => o.ok?.content?.[0]?.text === `Echo: ${secret}`),
      "http rate_limit=3/minute: calls 1-3 answered", show(out.slice(0, 3)));
    const e = out[3].err;
    check(e instanceof McpError && e.code === RATE_DENIED_CODE && e.data?.code === "rate_limit_exceeded",
      `http rate_limit=3/minute: call 4 refused with McpError ${RATE_DENIED_CODE} rate_limit_exceeded`,
      show(out[3]));

    // Issue 20 item 3 over HTTP: a task is a call until it ends; under
    // max_tool_call_duration=1s the 4 s research task fails to the SDK with
    // the timeout denial at the deadline.
    const tk = await connectHttp(`http://127.0.0.1:${await tasked.ready}/mcp`);
    await tk.client.listTools();
    const t0 = Date.now();
    const seen = [];
    try {
      for await (const m of tk.client.experimental.tasks.callToolStream(
        { name: "simulate-research-query", arguments: { topic: "x" } }, undefined, { timeout: 20000 }))
        seen.push(m);
    } catch (err) {
      seen.push({ type: "thrown", error: err });
    }
    const ms = Date.now() - t0;
    await tk.client.close();
    const last = seen[seen.length - 1];
    check(seen.some((m) => m.type === "taskCreated") && !seen.some((m) => m.type === "result") &&
      /timeout/.test(`${last?.error?.message} ${JSON.stringify(last?.error?.data ?? {})}`) && ms < 3500,
      `http task: failed with the timeout denial at the deadline (${ms} ms)`, show(seen));
  } catch (e) {
    e.message += `\n--- serve --http stderr ---\n${serve.stderrText()}\n--- rate-limited ---\n${limited.stderrText()}`;
    throw e;
  } finally {
    await Promise.all([serve.stop(), limited.stop(), tasked.stop()]);
  }
}

// An evicted session, as README ("Sessions and their limits") says: at
// max_instances an initialize ends the caller's session idle longest; the
// SDK (1.32.2) then fails the next call with "Session not found" (404) and
// does not start a new session itself; what README tells a client to do
// (a new transport, initialize, retry) works.
async function evictedSession(toolgate, tmp) {
  const serve = startServeHttp(toolgate, ["--audit", join(tmp, "evict.jsonl"), "--limit", "max_instances=1"]);
  try {
    const url = `http://127.0.0.1:${await serve.ready}/mcp`;
    let a = await connectHttp(url);
    const firstId = a.transport.sessionId;
    await a.client.listTools();
    await new Promise((ok) => setTimeout(ok, 1300)); // idle past the eviction's second
    const b = await connectHttp(url); // takes a's instance
    let failed = null;
    try {
      await a.client.callTool({ name: "echo", arguments: { message: "x" } }, undefined, { timeout: 5000 });
    } catch (e) {
      failed = e;
    }
    check(failed !== null && /Session not found|404/.test(String(failed?.message)),
      "http eviction: the evicted client's next call fails with 404 (Session not found)", show(String(failed)));
    check(a.transport.sessionId === firstId,
      "http eviction: the SDK keeps the dead session id (it starts no new session itself)",
      `${firstId} -> ${a.transport.sessionId}`);
    // README's recipe: drop the session, connect anew (initialize), retry.
    // b's instance stops after its DELETE; until then max_instances=1
    // refuses the new initialize (-32061), so connect is retried.
    await b.transport.terminateSession();
    await b.client.close();
    await a.client.close();
    for (let tries = 0; ; tries++) {
      try {
        a = await connectHttp(url);
        break;
      } catch (e) {
        if (tries >= 40 || !(e instanceof McpError)) throw e;
        await new Promise((ok) => setTimeout(ok, 250));
      }
    }
    const again = await a.client.callTool({ name: "echo", arguments: { message: secret } }, undefined,
      { timeout: CALL_TIMEOUT_MS });
    check(a.transport.sessionId !== firstId && again.content?.[0]?.text === `Echo: ${secret}`,
      "http eviction: a new transport and initialize give a new session that answers", show(again));
    await a.client.close();
  } catch (e) {
    e.message += `\n--- serve --http (eviction) stderr ---\n${serve.stderrText()}`;
    throw e;
  } finally {
    await serve.stop();
  }
}

// A CA and a certificate for 127.0.0.1 signed by it (openssl CLI).
function makeCerts(tmp) {
  const f = (n) => join(tmp, n);
  const ossl = (...args) => execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"] });
  ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
    "-keyout", f("ca.key"), "-out", f("ca.pem"), "-days", "2", "-subj", "/CN=toolgate peer test CA");
  ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
    "-keyout", f("key.pem"), "-out", f("cert.csr"), "-subj", "/CN=127.0.0.1");
  writeFileSync(f("ext.cnf"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n");
  ossl("x509", "-req", "-in", f("cert.csr"), "-CA", f("ca.pem"), "-CAkey", f("ca.key"),
    "-CAcreateserial", "-out", f("cert.pem"), "-days", "2", "-extfile", f("ext.cnf"));
  return { ca: f("ca.pem"), cert: f("cert.pem"), key: f("key.pem") };
}

// This script as a child: connect to <url> trusting <ca>; prints the tool
// names and the echo result as JSON.
function runTlsClient(url, ca) {
  return new Promise((ok, fail) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), "--tls-client", url], {
      env: { ...process.env, NODE_EXTRA_CA_CERTS: ca },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (c) => (out += c));
    child.stderr.on("data", (c) => (err += c));
    const timer = setTimeout(() => child.kill("SIGKILL"), CONNECT_TIMEOUT_MS);
    child.once("exit", (code) => {
      clearTimeout(timer);
      if (code === 0) ok(JSON.parse(out));
      else fail(new Error(`TLS client exited ${code}:\n${out}${err}`));
    });
  });
}

async function tls(toolgate, d, tmp) {
  const c = makeCerts(tmp);
  const serve = startServeHttp(toolgate, ["--audit", join(tmp, "tls.jsonl"), "--tls-cert", c.cert, "--tls-key", c.key]);
  try {
    const url = `https://127.0.0.1:${await serve.ready}/mcp`;
    const got = await runTlsClient(url, c.ca);
    check(isDeepStrictEqual(got.tools, d.tools.map((t) => t.name)),
      "https: tools/list identical direct and over TLS (CA trusted by NODE_EXTRA_CA_CERTS)",
      show(got.tools));
    check(isDeepStrictEqual(got.echo, d.echo), "https: echo identical", show(got.echo));
    // Without the CA the client must refuse the certificate.
    let refused = null;
    try {
      await fetch(url, { method: "POST", body: "{}" });
    } catch (e) {
      refused = e;
    }
    check(refused !== null, "https: a client that does not trust the CA is refused");
  } catch (e) {
    e.message += `\n--- serve --http (TLS) stderr ---\n${serve.stderrText()}`;
    throw e;
  } finally {
    await serve.stop();
  }
}

async function tlsClientMain(url) {
  const { client } = await connectHttp(url);
  const tools = byName((await client.listTools()).tools).map((t) => t.name);
  const echo = await client.callTool({ name: "echo", arguments: { message: secret } });
  await client.close();
  // The parent compares with its own secret: send the echo back with ours
  // replaced by a marker it knows.
  echo.content[0].text = echo.content[0].text.replace(secret, "SECRET");
  console.log(JSON.stringify({ tools, echo }));
}

if (process.argv[2] === "--tls-client") {
  await tlsClientMain(process.argv[3]);
  process.exit(0);
}

const toolgate = toolgateArg("peer_http.mjs");
const tmp = mkdtempSync(join(tmpdir(), "tg-peer-http-"));
try {
  const d = await direct();
  await plainHttp(toolgate, d, tmp);
  await evictedSession(toolgate, tmp);
  const audit = readFileSync(join(tmp, "http.jsonl"), "utf8");
  check(audit.includes('"event":"call.completed"'), "http: audit has call.completed events");
  check(!audit.includes(secret) && !audit.includes(sampled),
    "http: audit never contains tool arguments, results or sampled text");
  d.echo.content[0].text = d.echo.content[0].text.replace(secret, "SECRET");
  await tls(toolgate, d, tmp);
} catch (e) {
  console.log(`FAIL ${e.stack ?? e}`);
  failures.push("exception");
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
console.log(`peer_http: ${passCount()} passed, ${failures.length} failed`);
process.exit(failures.length ? 1 : 0);

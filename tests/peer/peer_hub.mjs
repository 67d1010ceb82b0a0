// Real-peer test of the MCP hub (issue 22, "one endpoint, many agents"):
// the official SDK client against ONE toolgate endpoint aggregating the
// reference server-everything (id "ev"), the reference server-filesystem
// rooted in a temp dir (id "fs") and toolgate's fixture agent twice (id
// "fx" with "restart": {"policy": "no"}, id "fy" restarted after 1.5 s),
// over stdio (`toolgate wrap --config FILE`)
// and over Streamable HTTP (`toolgate serve --config FILE`, an http
// listener naming "agents"), each compared with the same client on each
// server directly.
//
// What it proves, per transport:
// - the merged tools/list is each agent's own list under "<id>__", in
//   config order, tool for tool as the server lists it (minus the tool the
//   policy denies);
// - a call to each agent answers what the server answers directly;
// - progress notifications of a long-running tool reach the caller;
// - sampling and elicitation requests of server-everything reach the
//   client and its answers get back to the server (the tool result holds
//   them, as directly);
// - the policy (deny an everything tool by glob) hides the tool and refuses
//   its call with -32069 tool_not_allowed;
// - a cancel (AbortSignal) reaches only the agent holding the call: the
//   fixture logs it under the id it was called with, and the two Node
//   servers, each behind a transparent tap (tap.mjs) that logs every line
//   sent to it, never get a notifications/cancelled;
// - the fixture crashing: that call fails with -32064 agent_unavailable,
//   the others keep answering, and tools/list loses the fixture's tools and
//   names it in _meta["io.toolgate/unavailable"]; the second fixture
//   crashing and restarted: the list loses and then regains its tools.
//
// Usage: node peer_hub.mjs /path/to/toolgate (the fixture agent is
// agents/tg_fixture_agent next to it). Exit 0 when every check holds; 1
// with one line per failed check otherwise.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema, ElicitRequestSchema, McpError,
} from "@modelcontextprotocol/sdk/types.js";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";

import {
  check, CONNECT_TIMEOUT_MS, failures, passCount, serverCmd, show, toolgateArg, withTimeout,
} from "./common.mjs";

const CALL_TIMEOUT_MS = 15000;
const POLICY_DENIED_CODE = -32069;
const UNAVAILABLE_CODE = -32064;
const DENIED_TOOL = "get-tiny-image"; // denied by the glob "get-tiny-*" on agent ev
const AGENTS = ["ev", "fs", "fx", "fy"]; // config order
const RESTART_BACKOFF_MS = 1500; // fy's first restart delay

const toolgate = toolgateArg("peer_hub.mjs");
const fixture = join(dirname(toolgate), "agents", "tg_fixture_agent");
if (!existsSync(fixture)) {
  console.error(`peer_hub.mjs: fixture agent not built: ${fixture}`);
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
const tap = join(here, "tap.mjs");

// server-filesystem's entry, from its package.json "bin" (as common.mjs does
// for server-everything).
const require = createRequire(import.meta.url);
const fsPkgPath = require.resolve("@modelcontextprotocol/server-filesystem/package.json");
const fsPkg = JSON.parse(readFileSync(fsPkgPath, "utf8"));
const fsBin = typeof fsPkg.bin === "string" ? fsPkg.bin : Object.values(fsPkg.bin ?? {})[0];
const fsEntry = join(dirname(fsPkgPath), fsBin ?? "dist/index.js");

const secret = `hub-secret-${randomBytes(8).toString("hex")}`;
const sampled = `sampled-${secret}`;
const elicitedName = `elicited-${secret}`;
const fileText = `file of the hub test ${secret}\nsecond line\n`;

const tmp = mkdtempSync(join(tmpdir(), "tg-peer-hub-"));
const root = join(tmp, "root");
mkdirSync(root);
const filePath = join(root, "note.txt");
writeFileSync(filePath, fileText);

// A client that can be sampled and elicited, with fixed answers, so a tool
// result is the same however the server is reached. No roots capability:
// server-filesystem would replace its directory with the client's roots.
function newClient(seen) {
  const client = new Client(
    { name: "toolgate-peer-hub", version: "1.0.0" },
    { capabilities: { sampling: {}, elicitation: {} } }
  );
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    seen?.push({ method: req.method, params: req.params });
    return { model: "peer-test", role: "assistant", content: { type: "text", text: sampled } };
  });
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    seen?.push({ method: req.method, params: req.params });
    return { action: "accept", content: { name: elicitedName, check: true } };
  });
  return client;
}

// Every page of tools/list; the first page's _meta.
async function listAll(client) {
  const tools = [];
  let meta;
  let cursor;
  for (let page = 0; page < 50; page++) {
    const r = await client.listTools(cursor ? { cursor } : undefined, { timeout: CALL_TIMEOUT_MS });
    if (page === 0) meta = r._meta;
    tools.push(...r.tools);
    cursor = r.nextCursor;
    if (!cursor) break;
  }
  return { tools, meta };
}

const call = (client, name, args, opts = {}) =>
  client.callTool({ name, arguments: args }, undefined, { timeout: CALL_TIMEOUT_MS, ...opts });

async function failureOf(promise) {
  try {
    return { ok: await promise };
  } catch (e) {
    return { err: e };
  }
}

// One server directly over stdio: its tool list and <fn>'s results.
async function direct(label, argv, fn) {
  const transport = new StdioClientTransport({ command: argv[0], args: argv.slice(1), stderr: "pipe" });
  let stderr = "";
  transport.stderr?.on("data", (c) => {
    if (stderr.length < 16384) stderr += c.toString();
  });
  const seen = [];
  const client = newClient(seen);
  try {
    await withTimeout(client.connect(transport), CONNECT_TIMEOUT_MS, `direct ${label}: initialize`);
    const { tools } = await listAll(client);
    return { tools, seen, ...(await fn(client, seen)) };
  } catch (e) {
    e.message += `\n--- direct ${label} stderr ---\n${stderr}`;
    throw e;
  } finally {
    await client.close();
  }
}

// What is compared between a server directly and through the hub.
const evCalls = async (client, prefix = "") => {
  const echo = await call(client, `${prefix}echo`, { message: secret });
  const sum = await call(client, `${prefix}get-sum`, { a: 19, b: 23 });
  const order = [];
  const long = await call(client, `${prefix}trigger-long-running-operation`, { duration: 1, steps: 2 },
    { onprogress: (p) => order.push(`progress ${p.progress}/${p.total}`) });
  order.push("result");
  const sampling = await call(client, `${prefix}trigger-sampling-request`,
    { prompt: "say something", maxTokens: 16 });
  const elicitation = await call(client, `${prefix}trigger-elicitation-request`, {});
  return { echo, sum, long, order, sampling, elicitation };
};
const fsCalls = async (client, prefix = "") => ({
  read: await call(client, `${prefix}read_text_file`, { path: filePath }),
});
const fxCalls = async (client, prefix = "") => ({
  echo: await call(client, `${prefix}echo`, { text: secret }),
});

// The hub's config: the two Node servers behind taps logging what they are
// sent, the fixture with its own log, a policy denying one everything tool.
function hubConfig(tag, router) {
  const logs = {
    ev: join(tmp, `${tag}-ev.in`),
    fs: join(tmp, `${tag}-fs.in`),
    fx: join(tmp, `${tag}-fx.log`),
    fy: join(tmp, `${tag}-fy.log`),
  };
  for (const p of Object.values(logs)) writeFileSync(p, "");
  const env = { pass: ["PATH", "HOME"] };
  const config = {
    ...(router ? { router } : {}),
    audit: { path: join(tmp, `${tag}.audit.jsonl`) },
    agents: [
      { id: "ev", command: [process.execPath, tap, logs.ev, "--", ...serverCmd], env },
      { id: "fs", command: [process.execPath, tap, logs.fs, "--", process.execPath, fsEntry, root], env },
      { id: "fx", command: [fixture, "--log", logs.fx], restart: { policy: "no" } },
      {
        id: "fy", command: [fixture, "--log", logs.fy],
        restart: { policy: "on-failure", backoff: `${RESTART_BACKOFF_MS}ms` },
      },
    ],
    policy: {
      default: "allow",
      rules: [{ effect: "deny", agents: ["ev"], tools: ["get-tiny-*"] }],
    },
  };
  const path = join(tmp, `${tag}.json`);
  writeFileSync(path, JSON.stringify(config, null, 1));
  return { path, logs };
}

const readText = (p) => (existsSync(p) ? readFileSync(p, "utf8") : "");
const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));
async function waitFor(pred, ms) {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) return false;
    await sleep(25);
  }
  return true;
}

// The first difference between two tool lists, for a failure message.
function firstDiff(want, got) {
  for (let i = 0; i < Math.max(want.length, got.length); i++) {
    if (!isDeepStrictEqual(want[i], got[i]))
      return `at ${i}: want ${show(want[i])}\n  got ${show(got[i])}`;
  }
  return "none";
}

const text = (r) => JSON.stringify(r?.content ?? r);
const isDenial = (e, code, name) => e instanceof McpError && e.code === code && e.data?.code === name;

// Every check of the issue through one hub session; <d> holds the direct
// results, <logs> the agents' logs. The crash comes last (restart "no").
async function exercise(label, client, seen, d, logs) {
  // The merged list: each agent's own list (minus the denied tool) under
  // its prefix, in config order, each tool as the server lists it.
  const { tools } = await listAll(client);
  const want = [];
  for (const id of AGENTS)
    for (const t of d[id].tools)
      if (!(id === "ev" && t.name === DENIED_TOOL)) want.push({ ...t, name: `${id}__${t.name}` });
  check(d.ev.tools.some((t) => t.name === DENIED_TOOL) && d.fs.tools.length > 0 && d.fx.tools.length > 0,
    `${label}: each server lists tools directly (ev ${d.ev.tools.length}, fs ${d.fs.tools.length}, ` +
    `fx ${d.fx.tools.length}; ev has ${DENIED_TOOL})`);
  check(isDeepStrictEqual(tools.map((t) => t.name), want.map((t) => t.name)),
    `${label}: tools/list is ev__*, fs__*, fx__*, fy__* in config order, each agent's tools in its own order`,
    `want ${show(want.map((t) => t.name))}\ngot ${show(tools.map((t) => t.name))}`);
  check(isDeepStrictEqual(tools, want), `${label}: each listed tool is the server's own but for its name`,
    firstDiff(want, tools));

  // Calls to each agent: what the server answers directly.
  const ev = await evCalls(client, "ev__");
  const fs = await fsCalls(client, "fs__");
  const fx = await fxCalls(client, "fx__");
  check(ev.echo.content?.[0]?.text === `Echo: ${secret}` && isDeepStrictEqual(ev.echo, d.ev.echo),
    `${label}: ev__echo answers as server-everything's echo directly`, `direct ${show(d.ev.echo)} hub ${show(ev.echo)}`);
  check(/\b42\b/.test(text(ev.sum)) && isDeepStrictEqual(ev.sum, d.ev.sum),
    `${label}: ev__get-sum answers as directly (19 + 23 = 42)`, `direct ${show(d.ev.sum)} hub ${show(ev.sum)}`);
  check(text(fs.read).includes(secret) && isDeepStrictEqual(fs.read, d.fs.read),
    `${label}: fs__read_text_file reads the temp file as server-filesystem does directly`,
    `direct ${show(d.fs.read)} hub ${show(fs.read)}`);
  check(text(fx.echo).includes(secret) && isDeepStrictEqual(fx.echo, d.fx.echo),
    `${label}: fx__echo answers as the fixture directly`, `direct ${show(d.fx.echo)} hub ${show(fx.echo)}`);

  // Progress through the aggregate (see peer_http.mjs on why only the first
  // progress is sure to precede the result).
  check(ev.order[0] === "progress 1/2" && ev.order[ev.order.length - 1] === "result" &&
    d.ev.order[0] === "progress 1/2",
    `${label}: progress of ev__trigger-long-running-operation reaches the caller before the result`,
    `direct ${show(d.ev.order)} hub ${show(ev.order)}`);
  check(isDeepStrictEqual(ev.long, d.ev.long), `${label}: the long-running operation's result as directly`,
    `direct ${show(d.ev.long)} hub ${show(ev.long)}`);

  // Sampling and elicitation: the server's request reaches the client as it
  // does directly, and the client's answer gets back to the server.
  const strip = (s) => s.map((r) => ({ method: r.method, params: r.params }));
  check(isDeepStrictEqual(strip(seen), strip(d.ev.seen)),
    `${label}: the sampling and elicitation requests reach the client as directly`,
    `direct ${show(strip(d.ev.seen))}\nhub ${show(strip(seen))}`);
  check(text(ev.sampling).includes(sampled) && isDeepStrictEqual(ev.sampling, d.ev.sampling),
    `${label}: sampling round trip (ev__trigger-sampling-request's result holds the client's answer)`,
    `direct ${show(d.ev.sampling)} hub ${show(ev.sampling)}`);
  check(text(ev.elicitation).includes(elicitedName) && isDeepStrictEqual(ev.elicitation, d.ev.elicitation),
    `${label}: elicitation round trip (ev__trigger-elicitation-request's result holds the client's answer)`,
    `direct ${show(d.ev.elicitation)} hub ${show(ev.elicitation)}`);

  // The policy: the denied tool is neither listed nor callable.
  check(!tools.some((t) => t.name === `ev__${DENIED_TOOL}`), `${label}: policy: ev__${DENIED_TOOL} is not listed`);
  const denied = await failureOf(call(client, `ev__${DENIED_TOOL}`, {}));
  check(isDenial(denied.err, POLICY_DENIED_CODE, "tool_not_allowed"),
    `${label}: policy: calling ev__${DENIED_TOOL} fails with ${POLICY_DENIED_CODE} tool_not_allowed`,
    show(denied.ok ?? denied.err));
  check(!readText(logs.ev).includes(DENIED_TOOL), `${label}: policy: the denied call never reached server-everything`);

  // A cancel reaches only the agent holding the call.
  const ac = new AbortController();
  const t0 = Date.now();
  const sleeping = failureOf(call(client, "fx__sleep", { ms: 20000 }, { signal: ac.signal, timeout: 30000 }));
  const called = await waitFor(() => / sleep\n/.test(readText(logs.fx)), 5000);
  check(called, `${label}: cancel: fx__sleep reached the fixture`, readText(logs.fx));
  ac.abort("peer_hub cancel");
  const aborted = await sleeping;
  check(aborted.err !== undefined && Date.now() - t0 < 10000, `${label}: cancel: the aborted call ends at once`,
    show(aborted.ok ?? String(aborted.err)));
  const got = await waitFor(() => readText(logs.fx).includes("cancelled "), 5000);
  const fxLog = readText(logs.fx);
  const callId = /^call (\S+) sleep$/m.exec(fxLog)?.[1];
  const cancelIds = [...fxLog.matchAll(/^cancelled (\S+)$/gm)].map((m) => m[1]);
  check(got && cancelIds.length === 1 && cancelIds[0] === callId,
    `${label}: cancel: the fixture got one notifications/cancelled naming its own request id (${callId})`, fxLog);
  // The others still answer, and a cancel fanned out would be in their
  // taps by the time they answered.
  const after = await call(client, "ev__echo", { message: "after cancel" });
  const afterFs = await call(client, "fs__read_text_file", { path: filePath });
  await sleep(100);
  check(after.content?.[0]?.text === "Echo: after cancel" && text(afterFs).includes(secret),
    `${label}: cancel: ev and fs answer after it`, show([after, afterFs]));
  const fyLog = readText(logs.fy);
  check(/^initialized$/m.test(fyLog) && !fyLog.includes("cancelled"),
    `${label}: cancel: fy (the second fixture, its log) never saw a notifications/cancelled`, fyLog);
  for (const id of ["ev", "fs"]) {
    const sent = readText(logs[id]);
    check(sent.includes('"tools/call"') && !sent.includes("notifications/cancelled"),
      `${label}: cancel: ${id} (tap log of what it was sent) never saw a notifications/cancelled`,
      sent.split("\n").filter((l) => l.includes("cancel")).join("\n") || "(its tap logged no call)");
  }
  const fxEcho = await call(client, "fx__echo", { text: "after cancel" });
  check(text(fxEcho).includes("after cancel"), `${label}: cancel: the fixture answers after it`, show(fxEcho));

  // The fixture crashes (restart "no"): that call fails agent_unavailable,
  // the others answer, the list loses fx's tools and says so.
  const crash = await failureOf(call(client, "fx__crash", {}));
  check(isDenial(crash.err, UNAVAILABLE_CODE, "agent_unavailable"),
    `${label}: crash: fx__crash fails with ${UNAVAILABLE_CODE} agent_unavailable`, show(crash.ok ?? crash.err));
  const evAlive = await failureOf(call(client, "ev__echo", { message: "alive" }));
  const fsAlive = await failureOf(call(client, "fs__read_text_file", { path: filePath }));
  check(evAlive.ok?.content?.[0]?.text === "Echo: alive" && text(fsAlive.ok).includes(secret),
    `${label}: crash: ev and fs keep answering`, show([evAlive.ok ?? evAlive.err, fsAlive.ok ?? fsAlive.err]));
  const later = await listAll(client);
  const names = later.tools.map((t) => t.name);
  const withoutFx = want.filter((t) => !t.name.startsWith("fx__")).map((t) => t.name);
  check(isDeepStrictEqual(names, withoutFx),
    `${label}: crash: tools/list loses the fx__ tools and keeps ev's, fs's and fy's`, show(names));
  const down = later.meta?.["io.toolgate/unavailable"];
  check(Array.isArray(down) && down.includes("fx") && !down.some((id) => id !== "fx"),
    `${label}: crash: tools/list _meta["io.toolgate/unavailable"] names fx`, show(later.meta));
  const fxAgain = await failureOf(call(client, "fx__echo", { text: "x" }));
  check(isDenial(fxAgain.err, UNAVAILABLE_CODE, "agent_unavailable"),
    `${label}: crash: a later call of an fx__ tool fails with ${UNAVAILABLE_CODE} agent_unavailable`,
    show(fxAgain.ok ?? fxAgain.err));

  // fy crashes too, but is restarted (on-failure, after 1.5 s): the list
  // loses its tools meanwhile and then regains them, and it answers again.
  const starts = () => (readText(logs.fy).match(/^start /gm) ?? []).length;
  const startsBefore = starts();
  const t1 = Date.now();
  const crashY = await failureOf(call(client, "fy__crash", {}));
  check(isDenial(crashY.err, UNAVAILABLE_CODE, "agent_unavailable"),
    `${label}: restart: fy__crash fails with ${UNAVAILABLE_CODE} agent_unavailable`, show(crashY.ok ?? crashY.err));
  const gone = await listAll(client);
  const early = Date.now() - t1 < RESTART_BACKOFF_MS - 300; // still inside the backoff: fy is down
  check(!early || !gone.tools.some((t) => t.name.startsWith("fy__")),
    `${label}: restart: while fy restarts, tools/list lacks its tools (${Date.now() - t1} ms after the crash)`,
    show(gone.tools.map((t) => t.name)));
  let back;
  const end = Date.now() + RESTART_BACKOFF_MS + 8000;
  for (;;) {
    back = await listAll(client);
    if (back.tools.some((t) => t.name.startsWith("fy__")) || Date.now() > end) break;
    await sleep(200);
  }
  const withoutFxNames = back.tools.map((t) => t.name);
  check(isDeepStrictEqual(withoutFxNames, withoutFx),
    `${label}: restart: tools/list regains fy's tools once fy is restarted (${Date.now() - t1} ms after the crash)`,
    show(withoutFxNames));
  const fyEcho = await failureOf(call(client, "fy__echo", { text: "back" }));
  check(text(fyEcho.ok).includes("back"), `${label}: restart: fy__echo answers again`, show(fyEcho.ok ?? fyEcho.err));
  check(starts() === startsBefore + 1, `${label}: restart: fy was started anew, once`, readText(logs.fy));
}

// `toolgate serve --config <path>`; resolves to the HTTP listener's URL.
function startServe(path) {
  const child = spawn(toolgate, ["serve", "--config", path], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (c) => {
    if (stderr.length < 32768) stderr += c.toString();
  });
  const ready = new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error("serve did not start")), CONNECT_TIMEOUT_MS);
    child.stderr.on("data", () => {
      const url = /MCP Streamable HTTP on (http:\/\/\S+)/.exec(stderr);
      if (url && stderr.includes(" serve: serving ")) {
        clearTimeout(timer);
        ok(url[1]);
      }
    });
    child.once("exit", (code) => fail(new Error(`serve exited (${code})`)));
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((ok) => child.once("exit", ok));
      child.kill("SIGTERM");
      await withTimeout(gone, 10000, "serve: SIGTERM").catch(() => child.kill("SIGKILL"));
    }
  };
  return { ready, stop, stderrText: () => stderr };
}

async function overStdio(d) {
  const { path, logs } = hubConfig("wrap", null);
  const transport = new StdioClientTransport({
    command: toolgate,
    args: ["wrap", "--audit", join(tmp, "wrap.audit.jsonl"), "--config", path],
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (c) => {
    if (stderr.length < 32768) stderr += c.toString();
  });
  const seen = [];
  const client = newClient(seen);
  try {
    await withTimeout(client.connect(transport), CONNECT_TIMEOUT_MS, "wrap hub: initialize");
    check(client.getServerVersion()?.name === "toolgate", "stdio: initialize is answered by toolgate",
      show(client.getServerVersion()));
    await exercise("stdio", client, seen, d, logs);
  } catch (e) {
    e.message += `\n--- toolgate wrap stderr ---\n${stderr}`;
    throw e;
  } finally {
    await client.close();
  }
}

async function overHttp(d) {
  const { path, logs } = hubConfig("serve", {
    listen: [{ http: "127.0.0.1:0", agents: AGENTS }],
  });
  const serve = startServe(path);
  let client;
  try {
    const url = await serve.ready;
    const seen = [];
    client = newClient(seen);
    await withTimeout(client.connect(new StreamableHTTPClientTransport(new URL(url))), CONNECT_TIMEOUT_MS,
      `${url}: initialize`);
    check(client.getServerVersion()?.name === "toolgate", "http: initialize is answered by toolgate",
      show(client.getServerVersion()));
    await exercise("http", client, seen, d, logs);
  } catch (e) {
    e.message += `\n--- toolgate serve stderr ---\n${serve.stderrText()}`;
    throw e;
  } finally {
    await client?.close().catch(() => {});
    await serve.stop();
  }
}

const started = Date.now();
try {
  const [ev, fs, fx] = await Promise.all([
    direct("server-everything", serverCmd, (c) => evCalls(c)),
    direct("server-filesystem", [process.execPath, fsEntry, root], (c) => fsCalls(c)),
    direct("fixture", [fixture], (c) => fxCalls(c)),
  ]);
  const d = { ev, fs, fx, fy: fx };
  await overStdio(d);
  await overHttp(d);
  for (const tag of ["wrap", "serve"]) {
    const audit = readText(join(tmp, `${tag}.audit.jsonl`));
    check(!audit.includes(secret), `${tag}: audit never contains arguments, results, sampled or elicited text`);
  }
} catch (e) {
  console.log(`FAIL ${e.stack ?? e}`);
  failures.push("exception");
} finally {
  if (process.env.TG_PEER_KEEP) console.log(`peer_hub: kept ${tmp}`);
  else rmSync(tmp, { recursive: true, force: true });
}
console.log(`peer_hub: ${passCount()} passed, ${failures.length} failed (${((Date.now() - started) / 1000).toFixed(1)} s)`);
process.exit(failures.length ? 1 : 0);

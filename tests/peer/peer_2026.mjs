// Real-peer test of MCP revision 2026-07-28: the official TypeScript SDK 2.x
// client (@modelcontextprotocol/client, pinned to 2026-07-28, so it opens
// with server/discover and never falls back to initialize) against toolgate.
//
// Groups:
//   stdio   `toolgate wrap -- node server26.mjs` (a 2026 server on the 2.x
//           server package), compared with the same client on the server
//           directly: discover, tools/list (an x-mcp-header kept), echo,
//           progress, a multi round-trip call (input_required, the client's
//           elicitation, the retry with inputResponses and requestState),
//           a resource and a prompt; then toolgate's own denials under
//           --limit: timeout, concurrency, rate.
//   bridge  `toolgate wrap -- <server-everything>` (a 2025-era server, SDK
//           1.x): a 2026 client needs toolgate to answer server/discover
//           and translate. toolgate initializes the old server itself and
//           answers server/discover from its InitializeResult
//           (router/dialect/mcp/session_b26.c); runs by default.
//   http    `toolgate serve --http -- node server26.mjs` with the 2.x
//           Streamable HTTP client pinned to 2026, compared with the same
//           client on `node server26.mjs --http` directly. EXPECTED TO FAIL
//           until toolgate's HTTP front speaks 2026-07-28.
//
// By default only the groups that pass today run (stdio); PEER26_ALL=1 or
// --all runs every group, PEER26_GROUPS=bridge,http (or --groups=...) the
// ones named. A failing check prints what toolgate answered (the JSON-RPC
// exchange on stdio, the HTTP status and body over HTTP).
//
// Usage: node peer_2026.mjs [--all | --groups=a,b] /path/to/toolgate
// Exit 0 when every check of the groups run holds; 1 otherwise.

import {
  Client, ProtocolError, StreamableHTTPClientTransport,
} from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";

import {
  byName, check, CONNECT_TIMEOUT_MS, failures, passCount, RATE_DENIED_CODE, serverCmd, show,
  withTimeout,
} from "./common.mjs";

const VERSION = "2026-07-28";
const CALL_TIMEOUT_MS = 15000;
const CONCURRENCY_DENIED_CODE = -32061;
const TIMEOUT_DENIED_CODE = -32062;

const GROUPS = [
  { id: "stdio", title: "a. stdio: toolgate wrap -- server26 (2026 server)", today: true },
  { id: "bridge", title: "b. stdio bridge: toolgate wrap -- server-everything (2025 server)", today: true },
  { id: "http", title: "c. HTTP: toolgate serve --http -- server26", today: false },
];

// Arguments: flags anywhere, the toolgate binary the one non-flag.
const args = process.argv.slice(2);
const flagAll = args.includes("--all") || /^(1|true|yes)$/i.test(process.env.PEER26_ALL ?? "");
const named = (args.find((a) => a.startsWith("--groups="))?.slice(9) ?? process.env.PEER26_GROUPS ?? "")
  .split(",").filter(Boolean);
for (const g of named) {
  if (!GROUPS.some((x) => x.id === g)) {
    console.error(`peer_2026.mjs: unknown group ${g} (groups: ${GROUPS.map((x) => x.id).join(", ")})`);
    process.exit(2);
  }
}
const toolgateArg = args.find((a) => !a.startsWith("--")) ?? process.env.TOOLGATE;
if (!toolgateArg) {
  console.error("usage: node peer_2026.mjs [--all | --groups=stdio,bridge,http] /path/to/toolgate");
  process.exit(2);
}
const toolgate = resolve(toolgateArg);
if (!existsSync(toolgate)) {
  console.error(`peer_2026.mjs: toolgate binary not found: ${toolgate}`);
  process.exit(2);
}
const selected = GROUPS.filter((g) => (named.length ? named.includes(g.id) : flagAll || g.today));

const here = dirname(fileURLToPath(import.meta.url));
const server26 = [process.execPath, join(here, "server26.mjs")];
// The package's exports hide its package.json: read it from node_modules.
const pkgVersion = (name) => {
  try {
    return JSON.parse(readFileSync(join(here, "node_modules", name, "package.json"), "utf8")).version;
  } catch {
    return "?";
  }
};
const clientVersion = pkgVersion("@modelcontextprotocol/client");
const serverVersion = pkgVersion("@modelcontextprotocol/server");

const secret = `p26-secret-${randomBytes(8).toString("hex")}`;
const answer = `answer-${secret}`;
const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));
const text = (r) => r?.content?.[0]?.text;

// The JSON-RPC messages of one stdio session, both ways, for a failure
// report. A subclass of the SDK's stdio transport: the SDK then probes
// server/discover on the session's own process (the base class would
// probe on a throwaway sibling process), so one toolgate serves the whole
// session and the probe is in the log.
class TappedStdio extends StdioClientTransport {
  constructor(params, wire) {
    super(params);
    let inner;
    Object.defineProperty(this, "onmessage", {
      configurable: true,
      enumerable: true,
      get: () => inner && ((m, extra) => {
        wire.push({ in: m });
        inner(m, extra);
      }),
      set: (fn) => {
        inner = fn;
      },
    });
    this.wire = wire;
  }
  send(message, options) {
    this.wire.push({ out: message });
    return super.send(message, options);
  }
}

// What was said about the request of <method> (the last one): the request
// and the answer with its id, or that none came.
function exchange(wire, method) {
  const req = [...wire].reverse().find((w) => w.out?.method === method);
  if (!req) return `(no ${method} was sent)`;
  const ans = wire.find((w) => w.in && "id" in w.in && w.in.id === req.out.id && !w.in.method);
  return `sent ${JSON.stringify(req.out)}\n  answered ${ans ? JSON.stringify(ans.in) : "(nothing)"}`;
}
const tail = (wire, n = 6) => wire.slice(-n).map((w) => (w.in ? `<- ${JSON.stringify(w.in)}` : `-> ${JSON.stringify(w.out)}`)).join("\n  ");

// A 2.x client pinned to 2026-07-28 that answers elicitations with a fixed
// answer (so a tool result is the same however the server is reached).
function newClient(seen, mode = { pin: VERSION }, capabilities = { elicitation: {} }) {
  const client = new Client(
    { name: "toolgate-peer-2026", version: "1.0.0" },
    { capabilities, versionNegotiation: { mode } }
  );
  if (capabilities.elicitation) {
    client.setRequestHandler("elicitation/create", async (req) => {
      seen.push({ method: req.method, params: req.params });
      return { action: "accept", content: { answer } };
    });
  }
  return client;
}

// A session over stdio with <argv>: { client, wire, seen, stderrText,
// error } (error set, client closed, when connect failed).
async function stdioSession(label, argv, mode, capabilities) {
  const wire = [];
  const seen = [];
  const transport = new TappedStdio({ command: argv[0], args: argv.slice(1), stderr: "pipe" }, wire);
  let stderr = "";
  transport.stderr?.on("data", (c) => {
    if (stderr.length < 16384) stderr += c.toString();
  });
  const client = newClient(seen, mode, capabilities);
  try {
    await withTimeout(client.connect(transport), CONNECT_TIMEOUT_MS, `${label}: connect`);
  } catch (error) {
    await client.close().catch(() => {});
    return { client: null, wire, seen, stderrText: () => stderr, error };
  }
  return { client, wire, seen, stderrText: () => stderr };
}

async function failureOf(promise) {
  try {
    return { ok: await promise };
  } catch (e) {
    return { err: e };
  }
}
const errShow = (e) => (e instanceof Error ? `${e.constructor.name} ${e.code ?? ""} ${e.message} data=${JSON.stringify(e.data)}` : show(e));
const isDenial = (e, code, name) => e instanceof ProtocolError && e.code === code && e.data?.code === name;

// Everything compared between a server directly and behind toolgate.
async function exercise(client, seen) {
  const opts = { timeout: CALL_TIMEOUT_MS };
  const r = { era: client.getProtocolEra(), version: client.getNegotiatedProtocolVersion() };
  r.discover = client.getDiscoverResult();
  r.tools = byName((await client.listTools(undefined, opts)).tools);
  r.echo = await client.callTool({ name: "echo", arguments: { text: secret } }, opts);
  r.order = [];
  r.slow = await client.callTool({ name: "slow", arguments: { ms: 300, steps: 3 } },
    { ...opts, onprogress: (p) => r.order.push(`progress ${p.progress}/${p.total}`) });
  r.order.push("result");
  const before = seen.length;
  r.ask = await client.callTool({ name: "ask", arguments: { question: `why ${secret}?` } }, opts);
  r.elicited = seen.slice(before);
  r.route = await client.callTool({ name: "route", arguments: { region: "eu-west1", query: secret } }, opts);
  r.resources = (await client.listResources(undefined, opts)).resources;
  r.read = await client.readResource({ uri: "peer26://greeting" }, opts);
  r.prompts = (await client.listPrompts(undefined, opts)).prompts;
  r.prompt = await client.getPrompt({ name: "greet", arguments: { name: secret } }, opts);
  return r;
}

// The checks of exercise()'s results: <d> directly, <w> through toolgate
// (w.error: the session could not be opened; every check fails with it).
function compare(label, d, w, why) {
  // Without a session the reason is told once, at the connect check.
  const no = w.error ? "no session through toolgate (see the first failure of the group)\n  " : "";
  const same = (what, key, extra = true) =>
    check(!w.error && extra && isDeepStrictEqual(d[key], w[key]), `${label}: ${what} identical directly and through toolgate`,
      w.error ? no.trim() : `direct ${show(d[key])}\n  toolgate ${show(w[key])}`);
  check(!w.error && w.era === "modern" && w.version === VERSION,
    `${label}: the pinned client connects (server/discover, era modern, ${VERSION})`,
    w.error ? `no session through toolgate: ${why}` : `era ${w.era} version ${w.version}`);
  same("server/discover result", "discover", d.discover?.supportedVersions?.includes(VERSION));
  same("tools/list", "tools", d.tools.length === 4);
  const route = w.tools?.find((t) => t.name === "route");
  check(route?.inputSchema?.properties?.region?.["x-mcp-header"] === "Region",
    `${label}: tools/list keeps route's x-mcp-header "Region"`, w.error ? no.trim() : show(route));
  same("echo result", "echo", text(d.echo) === secret);
  check(!w.error && w.order?.[0] === "progress 1/3" && w.order[w.order.length - 1] === "result" &&
    d.order[0] === "progress 1/3",
    `${label}: slow's progress reaches the caller before its result`,
    w.error ? no.trim() : `direct ${show(d.order)} toolgate ${show(w.order)}`);
  same("slow result", "slow", text(d.slow) === "slept 300 ms");
  same("elicitation the client was asked for (ask, input_required)", "elicited", d.elicited.length === 1);
  same("ask result (the retry with the answer and requestState)", "ask",
    text(d.ask) === `why ${secret}? -> ${answer} (state ask-round-1)`);
  same("route result", "route", text(d.route) === `eu-west1: ${secret}`);
  same("resources/list", "resources", d.resources.length === 1);
  same("resources/read", "read", d.read.contents?.[0]?.text === "hello from server26");
  same("prompts/list", "prompts", d.prompts.length === 1);
  same("prompts/get", "prompt", d.prompt.messages?.[0]?.content?.text === `Please greet ${secret}.`);
}

// The multi round-trip on the wire of a stdio session: the server's
// input_required result reached the client, and the retry echoed the state.
function mrtrOnWire(label, wire) {
  const ir = wire.find((w) => w.in?.result?.resultType === "input_required");
  check(ir?.in?.result?.requestState === "ask-round-1" && ir.in.result.inputRequests?.answer?.method === "elicitation/create",
    `${label}: the input_required result (inputRequests, requestState) reaches the client as the server sent it`,
    ir ? JSON.stringify(ir.in) : `no input_required on the wire:\n  ${tail(wire, 10)}`);
  const retry = wire.find((w) => w.out?.method === "tools/call" && w.out.params?.inputResponses);
  const ans = retry && wire.find((w) => w.in && w.in.id === retry.out.id && !w.in.method);
  check(retry?.out?.params?.requestState === "ask-round-1" && ans?.in?.result?.resultType === "complete",
    `${label}: the retry (inputResponses, requestState echoed) is answered complete`,
    retry ? `sent ${JSON.stringify(retry.out)}\n  answered ${JSON.stringify(ans?.in)}` : "no retry was sent");
}

function readAudit(path) {
  return existsSync(path) ? readFileSync(path, "utf8") : "";
}

// --- group a: stdio --------------------------------------------------------

async function groupStdio(tmp) {
  const label = "stdio";
  const direct = await stdioSession("direct", server26);
  if (direct.error) throw new Error(`server26 directly: ${errShow(direct.error)}\n${direct.stderrText()}`);
  const d = await exercise(direct.client, direct.seen);
  await direct.client.close();

  const audit = join(tmp, "stdio.jsonl");
  const s = await stdioSession("wrap", [toolgate, "wrap", "--audit", audit, "--", ...server26]);
  let w;
  if (s.error) {
    w = { error: s.error };
  } else {
    try {
      w = await exercise(s.client, s.seen);
    } catch (e) {
      w = { error: e };
    }
    await s.client.close();
  }
  const why = w.error && `${errShow(w.error)}\n  ${exchange(s.wire, "server/discover")}\n  last: ${tail(s.wire)}\n  stderr: ${s.stderrText()}`;
  compare(label, d, w, why);
  mrtrOnWire(label, s.wire);
  const log = readAudit(audit);
  check(/"event":"call.completed"[^\n]*"tool":"ask"/.test(log) && !log.includes(secret),
    `${label}: audit has the calls and never their arguments or results`, log.slice(0, 2000));

  // toolgate's own answers under --limit.
  const limited = async (limits, fn) => {
    const argv = [toolgate, "wrap", ...limits.flatMap((l) => ["--limit", l]), "--", ...server26];
    const t = await stdioSession(`wrap ${limits.join(" ")}`, argv);
    if (t.error) return { error: `${errShow(t.error)}\n  ${exchange(t.wire, "server/discover")}\n  ${t.stderrText()}` };
    try {
      return await fn(t.client, t.wire);
    } catch (e) {
      return { error: `${errShow(e)}\n  last: ${tail(t.wire)}` };
    } finally {
      await t.client.close();
    }
  };

  // A call past max_tool_call_duration: the timeout denial, at the deadline;
  // the session serves the next call.
  const to = await limited(["max_tool_call_duration=1s"], async (client, wire) => {
    const t0 = Date.now();
    const slow = await failureOf(client.callTool({ name: "slow", arguments: { ms: 4000, steps: 4 } },
      { timeout: CALL_TIMEOUT_MS }));
    const ms = Date.now() - t0;
    const after = await failureOf(client.callTool({ name: "echo", arguments: { text: "after" } }, { timeout: CALL_TIMEOUT_MS }));
    return { slow, ms, after, last: exchange(wire, "tools/call") };
  });
  check(isDenial(to.slow?.err, TIMEOUT_DENIED_CODE, "timeout"),
    `${label}: slow past max_tool_call_duration=1s is refused with ${TIMEOUT_DENIED_CODE} timeout`,
    to.error ?? (to.slow.ok ? `answered ${show(to.slow.ok)}` : errShow(to.slow.err)));
  check(!to.error && to.ms < 3500, `${label}: the timeout denial comes at the deadline (${to.ms} ms), not after the call's 4 s`);
  check(text(to.after?.ok) === "after", `${label}: after the timeout the session serves the next call`,
    to.error ?? show(to.after?.ok ?? errShow(to.after?.err)));

  // One call at a time, none queued: a second call while slow runs is
  // refused; once slow is done, calls are served again.
  const cc = await limited(["max_concurrent_calls=1", "max_queued_calls=0"], async (client) => {
    let started;
    const first = new Promise((ok) => (started = ok));
    const slow = failureOf(client.callTool({ name: "slow", arguments: { ms: 1500, steps: 3 } },
      { timeout: CALL_TIMEOUT_MS, onprogress: () => started() }));
    await withTimeout(first, 5000, "slow's first progress");
    const second = await failureOf(client.callTool({ name: "echo", arguments: { text: "second" } }, { timeout: CALL_TIMEOUT_MS }));
    const done = await slow;
    const after = await failureOf(client.callTool({ name: "echo", arguments: { text: "after" } }, { timeout: CALL_TIMEOUT_MS }));
    return { second, done, after };
  });
  check(isDenial(cc.second?.err, CONCURRENCY_DENIED_CODE, "concurrency_limit_exceeded"),
    `${label}: a second call while one runs (max_concurrent_calls=1, max_queued_calls=0) is refused with ` +
    `${CONCURRENCY_DENIED_CODE} concurrency_limit_exceeded`,
    cc.error ?? (cc.second.ok ? `answered ${show(cc.second.ok)}` : errShow(cc.second.err)));
  check(text(cc.done?.ok) === "slept 1500 ms" && text(cc.after?.ok) === "after",
    `${label}: the running call completes and the next one is served`,
    cc.error ?? show([cc.done?.ok ?? errShow(cc.done?.err), cc.after?.ok ?? errShow(cc.after?.err)]));

  // 3/second is a burst of 3: five calls back to back, the fourth refused.
  const rl = await limited(["rate_limit=3/second"], async (client) => {
    const out = [];
    for (let i = 0; i < 5; i++)
      out.push(await failureOf(client.callTool({ name: "echo", arguments: { text: secret } }, { timeout: CALL_TIMEOUT_MS })));
    return { out };
  });
  check(!rl.error && rl.out.slice(0, 3).every((o) => isDeepStrictEqual(o.ok, d.echo)),
    `${label}: rate_limit=3/second: calls 1-3 answered as directly`,
    rl.error ?? show(rl.out.slice(0, 3).map((o) => o.ok ?? errShow(o.err))));
  const fourth = rl.out?.[3]?.err;
  check(isDenial(fourth, RATE_DENIED_CODE, "rate_limit_exceeded") && fourth.data.retry_after_ms > 0,
    `${label}: rate_limit=3/second: call 4 refused with ${RATE_DENIED_CODE} rate_limit_exceeded and retry_after_ms`,
    rl.error ?? (rl.out[3].ok ? `answered ${show(rl.out[3].ok)}` : errShow(fourth)));
}

// --- group b: a 2026 client, a 2025 server ---------------------------------

async function groupBridge() {
  const label = "bridge";
  // What server-everything answers a (2025) client directly: the baseline.
  // The client declares no capabilities, as toolgate's initialize of a 2025
  // server does (the bridge does not carry server-to-client requests yet,
  // so server-everything leaves out the tools that need them).
  const direct = await stdioSession("server-everything directly", serverCmd, "legacy", {});
  if (direct.error) throw new Error(`server-everything directly: ${errShow(direct.error)}\n${direct.stderrText()}`);
  const dTools = byName((await direct.client.listTools(undefined, { timeout: CALL_TIMEOUT_MS })).tools);
  const dEcho = await direct.client.callTool({ name: "echo", arguments: { message: secret } }, { timeout: CALL_TIMEOUT_MS });
  await direct.client.close();

  const s = await stdioSession("wrap server-everything", [toolgate, "wrap", "--", ...serverCmd]);
  const no = s.error ? "no session through toolgate (see the first failure of the group)" : "";
  check(!s.error && s.client.getProtocolEra() === "modern" &&
    s.client.getDiscoverResult()?.supportedVersions?.includes(VERSION),
    `${label}: the pinned client connects: toolgate answers server/discover offering ${VERSION}`,
    s.error
      ? `no session: ${errShow(s.error)}\n  toolgate's answer to the probe: ${exchange(s.wire, "server/discover")}\n  stderr: ${s.stderrText().trim()}`
      : `era ${s.client.getProtocolEra()} discover ${show(s.client.getDiscoverResult())}`);
  let tools;
  let echo;
  if (!s.error) {
    tools = await failureOf(s.client.listTools(undefined, { timeout: CALL_TIMEOUT_MS }));
    echo = await failureOf(s.client.callTool({ name: "echo", arguments: { message: secret } }, { timeout: CALL_TIMEOUT_MS }));
    await s.client.close();
  }
  const names = (l) => l?.map((t) => t.name);
  const got = tools?.ok && byName(tools.ok.tools);
  check(got && isDeepStrictEqual(names(got), names(dTools)) &&
    isDeepStrictEqual(got.map((t) => t.inputSchema), dTools.map((t) => t.inputSchema)),
    `${label}: tools/list lists server-everything's tools (${dTools.length}) as it does directly`,
    no || (tools.err ? `${errShow(tools.err)}\n  ${exchange(s.wire, "tools/list")}` : `direct ${show(names(dTools))}\n  toolgate ${show(names(got))}`));
  check(echo?.ok && text(echo.ok) === `Echo: ${secret}` && isDeepStrictEqual(echo.ok.content, dEcho.content),
    `${label}: echo answers as server-everything does directly`,
    no || (echo.err ? `${errShow(echo.err)}\n  ${exchange(s.wire, "tools/call")}` : `direct ${show(dEcho)}\n  toolgate ${show(echo.ok)}`));
}

// --- group c: HTTP ---------------------------------------------------------

// Every HTTP exchange of a client, for a failure report.
function tappedFetch(log) {
  return async (url, init) => {
    const res = await fetch(url, init);
    const entry = {
      method: init?.method ?? "GET",
      headers: Object.fromEntries(new Headers(init?.headers ?? {})),
      body: typeof init?.body === "string" ? init.body : undefined,
      status: res.status,
      type: res.headers.get("content-type"),
    };
    log.push(entry);
    // A JSON answer is read before the client gets it; an SSE stream as it
    // passes (the client reads the original).
    const body = res.clone().text().then((t) => (entry.answer = t), () => {});
    if (!/event-stream/.test(entry.type ?? "")) await body;
    return res;
  };
}
const httpLast = (log) => {
  const e = log[log.length - 1];
  if (!e) return "(no HTTP request was made)";
  const sent = { ...e.headers };
  delete sent.accept;
  return `${e.method} ${JSON.stringify(sent)} ${e.body ?? ""}\n  answered HTTP ${e.status} (${e.type}) ${e.answer ?? "(SSE stream)"}`;
};

// The multi round-trip over HTTP: the input_required answer and the retry.
function mrtrOnHttp(label, log, no) {
  const ir = log.find((e) => /"resultType":"input_required"/.test(e.answer ?? ""));
  check(!no && /"requestState":"ask-round-1"/.test(ir?.answer ?? ""),
    `${label}: the input_required result (inputRequests, requestState) reaches the client as the server sent it`,
    no || (ir ? ir.answer : "no input_required answer seen"));
  const retry = log.find((e) => /"inputResponses"/.test(e.body ?? ""));
  check(!no && /"requestState":"ask-round-1"/.test(retry?.body ?? "") && retry.status === 200 &&
    /"resultType":"complete"/.test(retry.answer ?? ""),
    `${label}: the retry (inputResponses, requestState echoed) is answered complete`,
    no || (retry ? `HTTP ${retry.status} ${retry.answer}` : "no retry was sent"));
}

async function httpSession(url) {
  const log = [];
  const seen = [];
  const client = newClient(seen);
  try {
    await withTimeout(client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: tappedFetch(log) })),
      CONNECT_TIMEOUT_MS, `${url}: connect`);
  } catch (error) {
    await client.close().catch(() => {});
    return { log, seen, error };
  }
  return { client, log, seen };
}

// A child writing its URL on stderr; resolves to the URL once <re> sees it.
function startChild(label, argv, re) {
  const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (c) => {
    if (stderr.length < 16384) stderr += c.toString();
  });
  const ready = new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`${label} did not start:\n${stderr}`)), CONNECT_TIMEOUT_MS);
    child.stderr.on("data", () => {
      const m = re(stderr);
      if (m) {
        clearTimeout(timer);
        ok(m);
      }
    });
    child.once("exit", (code) => fail(new Error(`${label} exited (${code}):\n${stderr}`)));
  });
  ready.catch(() => {});
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((ok) => child.once("exit", ok));
      child.kill("SIGTERM");
      await withTimeout(gone, 10000, `${label}: SIGTERM`).catch(() => child.kill("SIGKILL"));
    }
  };
  return { ready, stop, stderrText: () => stderr };
}

async function groupHttp(tmp) {
  const label = "http";
  const direct = startChild("server26 --http", [...server26, "--http", "127.0.0.1:0"],
    (s) => /^server26: (http:\/\/\S+)$/m.exec(s)?.[1]);
  const serve = startChild("toolgate serve --http",
    [toolgate, "serve", "--http", "127.0.0.1:0", "--audit", join(tmp, "http.jsonl"), "--", ...server26],
    (s) => (s.includes(" serve: serving ") ? /MCP Streamable HTTP on (http:\/\/\S+)/.exec(s)?.[1] : undefined));
  const limited = startChild("toolgate serve --http (rate)",
    [toolgate, "serve", "--http", "127.0.0.1:0", "--limit", "rate_limit=3/second", "--", ...server26],
    (s) => (s.includes(" serve: serving ") ? /MCP Streamable HTTP on (http:\/\/\S+)/.exec(s)?.[1] : undefined));
  try {
    const dUrl = await direct.ready;
    const ds = await httpSession(dUrl);
    if (ds.error) throw new Error(`server26 --http directly: ${errShow(ds.error)}\n  ${httpLast(ds.log)}`);
    const d = await exercise(ds.client, ds.seen);
    await ds.client.close();
    // The header a 2026 client mirrors from x-mcp-header (directly).
    const routed = ds.log.find((e) => /"name":"route"/.test(e.body ?? ""));
    check(routed?.headers?.["mcp-param-region"] === "eu-west1",
      `${label}: (directly) the client sends route's region as Mcp-Param-Region`, show(routed?.headers));

    const url = await serve.ready;
    const s = await httpSession(url);
    let w;
    if (s.error) {
      w = { error: s.error };
    } else {
      try {
        w = await exercise(s.client, s.seen);
      } catch (e) {
        w = { error: e };
      }
      await s.client.close().catch(() => {});
    }
    compare(label, d, w, w.error && `${errShow(w.error)}\n  ${httpLast(s.log)}\n  serve stderr: ${serve.stderrText().trim()}`);
    mrtrOnHttp(label, s.log, w.error && "no session through toolgate (see the first failure of the group)");

    // rate_limit=3/second: the fourth of five calls is refused, as the
    // JSON-RPC error in a 200 (README), on the 2026 wire too.
    const rUrl = await limited.ready;
    const r = await httpSession(rUrl);
    const out = [];
    if (!r.error) {
      for (let i = 0; i < 5; i++)
        out.push(await failureOf(r.client.callTool({ name: "echo", arguments: { text: secret } }, { timeout: CALL_TIMEOUT_MS })));
      await r.client.close().catch(() => {});
    }
    const fourth = out[3]?.err;
    check(!r.error && out.slice(0, 3).every((o) => isDeepStrictEqual(o.ok, d.echo)) &&
      isDenial(fourth, RATE_DENIED_CODE, "rate_limit_exceeded"),
      `${label}: rate_limit=3/second: calls 1-3 answered as directly, call 4 refused with ${RATE_DENIED_CODE} rate_limit_exceeded`,
      r.error ? `no session: ${errShow(r.error)}\n  ${httpLast(r.log)}`
        : `${show(out.map((o) => o.ok ?? errShow(o.err)))}\n  ${httpLast(r.log)}`);
  } finally {
    await Promise.all([direct.stop(), serve.stop(), limited.stop()]);
  }
}

// ---------------------------------------------------------------------------

const runners = { stdio: groupStdio, bridge: groupBridge, http: groupHttp };
const started = Date.now();
const tmp = mkdtempSync(join(tmpdir(), "tg-peer-2026-"));
const tally = [];
console.log(`peer_2026: MCP ${VERSION}, @modelcontextprotocol/client ${clientVersion}, server ${serverVersion}; groups ${selected.map((g) => g.id).join(", ")}` +
  (selected.length < GROUPS.length ? ` (PEER26_ALL=1 or --all runs ${GROUPS.filter((g) => !selected.includes(g)).map((g) => g.id).join(", ")} too)` : ""));
try {
  for (const g of selected) {
    console.log(`# ${g.title}${g.today ? "" : " (expected to fail today)"}`);
    const p0 = passCount();
    const f0 = failures.length;
    const t0 = Date.now();
    try {
      await runners[g.id](tmp);
    } catch (e) {
      check(false, `${g.id}: exception`, e.stack ?? String(e));
    }
    tally.push({ g, passed: passCount() - p0, failed: failures.length - f0, s: (Date.now() - t0) / 1000 });
  }
} finally {
  if (process.env.TG_PEER_KEEP) console.log(`peer_2026: kept ${tmp}`);
  else rmSync(tmp, { recursive: true, force: true });
}
for (const t of tally)
  console.log(`peer_2026: group ${t.g.id}: ${t.passed} passed, ${t.failed} failed (${t.s.toFixed(1)} s)` +
    (t.failed && !t.g.today ? " (expected today)" : ""));
console.log(`peer_2026: ${passCount()} passed, ${failures.length} failed (${((Date.now() - started) / 1000).toFixed(1)} s)`);
process.exit(failures.length ? 1 : 0);

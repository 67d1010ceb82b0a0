// Real-peer test: the official MCP SDK client against the reference
// server-everything, once directly, once through `toolgate wrap`, and once
// through `toolgate serve` (the client on a Unix socket).
//
// What it proves: toolgate is a drop-in for a real client and a real server
// (same tool list, same results), its rate denial reaches the SDK as an
// McpError the client can act on, and its audit trail never holds tool
// arguments or results.
//
// Usage: node peer_test.mjs /path/to/toolgate
// Exit 0 when every check holds; 1 with one line per failed check otherwise.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect as netConnect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";

import {
  byName, check, CONNECT_TIMEOUT_MS, failures, passCount, RATE_DENIED_CODE, serverCmd, show,
  toolgateArg, withTimeout,
} from "./common.mjs";

const toolgate = toolgateArg("peer_test.mjs");

async function connect(label, argv) {
  const transport = new StdioClientTransport({
    command: argv[0],
    args: argv.slice(1),
    stderr: "pipe",
  });
  // Keep the peer's stderr for the failure report, bounded so a chatty
  // server cannot grow it without limit.
  let stderr = "";
  transport.stderr?.on("data", (chunk) => {
    if (stderr.length < 16384) stderr += chunk.toString();
  });
  const client = new Client({ name: "toolgate-peer-test", version: "1.0.0" });
  try {
    await withTimeout(client.connect(transport), CONNECT_TIMEOUT_MS, `${label}: initialize`);
  } catch (e) {
    throw new Error(`${e.message}\n--- ${label} stderr ---\n${stderr}`);
  }
  return { client, stderrText: () => stderr };
}

// The SDK's own framing (ReadBuffer, serializeMessage) over a Unix socket:
// how an MCP client reaches `toolgate serve`.
class UnixSocketTransport {
  constructor(path) {
    this.path = path;
    this.buf = new ReadBuffer();
  }
  start() {
    return new Promise((resolveStart, rejectStart) => {
      this.sock = netConnect(this.path);
      this.sock.once("connect", () => resolveStart());
      this.sock.once("error", (e) => {
        rejectStart(e);
        this.onerror?.(e);
      });
      this.sock.on("data", (chunk) => {
        this.buf.append(chunk);
        for (;;) {
          let msg;
          try {
            msg = this.buf.readMessage();
          } catch (e) {
            this.onerror?.(e);
            continue;
          }
          if (msg === null) break;
          this.onmessage?.(msg);
        }
      });
      this.sock.on("close", () => this.onclose?.());
    });
  }
  send(message) {
    return new Promise((ok) => {
      if (this.sock.write(serializeMessage(message))) ok();
      else this.sock.once("drain", ok);
    });
  }
  async close() {
    this.sock?.end();
    this.buf.clear();
  }
}

async function socketSession(label, path, fn, stderrText) {
  const client = new Client({ name: "toolgate-peer-test", version: "1.0.0" });
  try {
    await withTimeout(client.connect(new UnixSocketTransport(path)), CONNECT_TIMEOUT_MS,
      `${label}: initialize`);
    return await fn(client);
  } catch (e) {
    e.message += `\n--- toolgate serve stderr ---\n${stderrText()}`;
    throw e;
  } finally {
    await client.close();
  }
}

// `toolgate serve` with <config>; resolves once it listens.
function startServe(config, cfgPath) {
  writeFileSync(cfgPath, JSON.stringify(config, null, 1));
  const child = spawn(toolgate, ["serve", "--config", cfgPath], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (chunk) => {
    if (stderr.length < 16384) stderr += chunk.toString();
  });
  const ready = new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`serve did not start:\n${stderr}`)), CONNECT_TIMEOUT_MS);
    child.stderr.on("data", () => {
      if (stderr.includes(" serve: serving ")) {
        clearTimeout(timer);
        ok();
      }
    });
    child.once("exit", (code) => fail(new Error(`serve exited (${code}):\n${stderr}`)));
  });
  return { child, ready, stderrText: () => stderr };
}

async function session(label, argv, fn) {
  const { client, stderrText } = await connect(label, argv);
  try {
    return await fn(client);
  } catch (e) {
    e.message += `\n--- ${label} stderr ---\n${stderrText()}`;
    throw e;
  } finally {
    await client.close();
  }
}

const secret = `peer-secret-${randomBytes(8).toString("hex")}`;

async function exercise(client) {
  const tools = byName((await client.listTools()).tools);
  const echo = await client.callTool({ name: "echo", arguments: { message: secret } });
  // server-everything renamed `add` to `get-sum`; accept either.
  const sumTool = tools.find((t) => t.name === "get-sum" || t.name === "add");
  const sum = sumTool
    ? await client.callTool({ name: sumTool.name, arguments: { a: 19, b: 23 } })
    : null;
  return { tools, echo, sum, sumName: sumTool?.name };
}

function readAudit(path) {
  if (!existsSync(path)) return { text: "", events: [] };
  const text = readFileSync(path, "utf8");
  const events = [];
  for (const line of text.split("\n")) {
    if (!line) continue;
    try {
      events.push(JSON.parse(line));
    } catch {
      events.push({ unparsable: line.slice(0, 80) });
    }
  }
  return { text, events };
}

async function main() {
  const tmp = mkdtempSync(join(tmpdir(), "tg-peer-"));
  try {
    const auditA = join(tmp, "wrap.jsonl");
    const auditB = join(tmp, "rate.jsonl");

    const direct = await session("direct", serverCmd, exercise);
    const wrapped = await session(
      "wrapped",
      [toolgate, "wrap", "--audit", auditA, "--", ...serverCmd],
      exercise
    );

    check(direct.tools.length > 0, `direct tools/list returns tools (${direct.tools.length})`);
    check(
      isDeepStrictEqual(direct.tools, wrapped.tools),
      "tools/list identical direct and through toolgate",
      `direct ${show(direct.tools.map((t) => t.name))} wrapped ${show(wrapped.tools.map((t) => t.name))}`
    );
    check(
      direct.echo.content?.[0]?.text === `Echo: ${secret}`,
      "direct echo answers the message",
      show(direct.echo)
    );
    check(
      isDeepStrictEqual(direct.echo, wrapped.echo),
      "echo result identical direct and through toolgate",
      `direct ${show(direct.echo)} wrapped ${show(wrapped.echo)}`
    );
    check(direct.sumName !== undefined, "server offers get-sum/add");
    check(
      isDeepStrictEqual(direct.sum, wrapped.sum) && /\b42\b/.test(direct.sum?.content?.[0]?.text ?? ""),
      `${direct.sumName} result identical and correct (19 + 23 = 42)`,
      `direct ${show(direct.sum)} wrapped ${show(wrapped.sum)}`
    );

    // 3/second is a burst of 3 (GCRA): five calls made back to back, far
    // inside 333 ms, see the fourth refused.
    const outcomes = await session(
      "rate-limited",
      [toolgate, "wrap", "--audit", auditB, "--limit", "rate_limit=3/second", "--", ...serverCmd],
      async (client) => {
        const out = [];
        for (let i = 0; i < 5; i++) {
          try {
            out.push({ ok: await client.callTool({ name: "echo", arguments: { message: secret } }) });
          } catch (e) {
            out.push({ err: e });
          }
        }
        return out;
      }
    );
    const passed = outcomes.filter((o) => o.ok).length;
    check(
      outcomes.slice(0, 3).every((o) => o.ok?.content?.[0]?.text === `Echo: ${secret}`),
      "rate_limit=3/second: calls 1-3 answered by the server",
      show(outcomes.slice(0, 3).map((o) => o.ok ?? String(o.err)))
    );
    const fourth = outcomes[3].err;
    check(
      fourth instanceof McpError && fourth.code === RATE_DENIED_CODE,
      `rate_limit=3/second: call 4 refused with McpError ${RATE_DENIED_CODE}`,
      show(outcomes[3].ok ?? fourth)
    );
    check(
      fourth?.data?.code === "rate_limit_exceeded",
      "denial data.code is rate_limit_exceeded",
      show(fourth?.data)
    );
    check(
      Number.isInteger(fourth?.data?.retry_after_ms) && fourth.data.retry_after_ms > 0 &&
        fourth.data.retry_after_ms <= 1000,
      "denial data.retry_after_ms is in (0, 1000]",
      show(fourth?.data?.retry_after_ms)
    );
    check(passed === 3, `exactly 3 of 5 calls admitted (got ${passed})`);

    // Issue 20 item 1: the SDK writes "id" last, after the arguments, so an
    // over-cap request's id comes past max_frame_bytes. toolgate reads it
    // as the frame streams past and answers frame_too_large with it: the
    // SDK rejects the call at once instead of waiting for its own timeout.
    const over = await session(
      "over-cap",
      [toolgate, "wrap", "--limit", "max_frame_bytes=64Ki", "--", ...serverCmd],
      async (client) => {
        const t0 = Date.now();
        let err = null;
        try {
          await client.callTool({ name: "echo", arguments: { message: "x".repeat(70 * 1024) } },
            undefined, { timeout: 20000 });
        } catch (e) {
          err = e;
        }
        const ms = Date.now() - t0;
        // the session goes on: the next call is served
        const after = await client.callTool({ name: "echo", arguments: { message: "after" } });
        return { err, ms, after };
      }
    );
    check(
      over.err instanceof McpError && over.err.data?.code === "frame_too_large",
      "SDK call over max_frame_bytes (id written last) is refused frame_too_large",
      show(over.err)
    );
    check(over.ms < 10000, `the over-cap refusal reached the SDK call at once (${over.ms} ms)`);
    check(over.after?.content?.[0]?.text === "Echo: after", "the session serves the next call",
      show(over.after));

    // Issue 20 item 3: a task-augmented call (MCP 2025-11-25 tasks, the
    // SDK's experimental callToolStream) is a call until its task ends. Under
    // max_tool_call_duration=1s, server-everything's 4 s research task is
    // cancelled at the deadline and fails to the SDK with the timeout
    // denial; with room, it completes and audit has its real duration.
    const research = async (limit, auditPath) => session(
      `task ${limit}`,
      [toolgate, "wrap", "--audit", auditPath, "--limit", `max_tool_call_duration=${limit}`, "--",
        ...serverCmd],
      async (client) => {
        await client.listTools(); // the SDK learns which tools take tasks
        const t0 = Date.now();
        const seen = [];
        try {
          const stream = client.experimental.tasks.callToolStream(
            { name: "simulate-research-query", arguments: { topic: secret } }, undefined,
            { timeout: 20000 });
          for await (const m of stream) seen.push(m);
        } catch (e) {
          seen.push({ type: "thrown", error: e });
        }
        return { seen, ms: Date.now() - t0 };
      }
    );
    const auditT1 = join(tmp, "task-1s.jsonl");
    const cut = await research("1s", auditT1);
    const last = cut.seen[cut.seen.length - 1];
    check(cut.seen.some((m) => m.type === "taskCreated"), "task: created through toolgate",
      show(cut.seen.map((m) => m.type)));
    check(!cut.seen.some((m) => m.type === "result"),
      "task: no result past max_tool_call_duration=1s", show(cut.seen.map((m) => m.type)));
    check((last?.type === "error" || last?.type === "thrown") &&
      /timeout/.test(`${last?.error?.message} ${JSON.stringify(last?.error?.data ?? {})}`),
      "task: failed to the SDK with the timeout denial", show(last));
    check(cut.ms < 3500, `task: failed at the deadline (${cut.ms} ms), not after the task's 4 s`);
    const t1 = readAudit(auditT1);
    check(t1.events.some((e) => e.event === "call.timeout" && e.tool === "simulate-research-query"),
      "task: audit ends the call with call.timeout", show(t1.events.map((e) => e.event)));
    check(!t1.text.includes(secret), "task: audit never contains the arguments");
    const auditT2 = join(tmp, "task-10s.jsonl");
    const full = await research("10s", auditT2);
    check(full.seen.some((m) => m.type === "result"), "task: completes within its deadline",
      show(full.seen.map((m) => m.type)));
    const t2 = readAudit(auditT2);
    const done = t2.events.find((e) => e.event === "call.completed" && e.tool === "simulate-research-query");
    check(done?.duration_ms >= 3500, `task: audit's duration is the task's (${done?.duration_ms} ms)`,
      show(done));

    // Issue 20 item 2, through the SDK's own stdio transport: a request whose
    // method is of the wrong type is answered -32600 with its id (JSON-RPC's
    // null id is for an id that could not be read), so the client is not
    // left waiting.
    {
      const transport = new StdioClientTransport({
        command: toolgate, args: ["wrap", "--", ...serverCmd], stderr: "pipe" });
      const answer = new Promise((ok) => {
        transport.onmessage = (m) => { if (m.id === 9) ok(m); };
      });
      await transport.start();
      await transport.send({ jsonrpc: "2.0", id: 9, method: 5 });
      const m = await withTimeout(answer, 10000, "answer to a method of the wrong type");
      await transport.close();
      check(m.error?.code === -32600 && m.id === 9,
        "a request with a method of the wrong type is answered -32600 with its id", show(m));
    }

    // The same server behind `toolgate serve`: one socket without limits,
    // one with 3/minute shared by every connection to it.
    const auditC = join(tmp, "serve.jsonl");
    const agent = (id, limits) => ({
      id,
      command: serverCmd,
      env: { pass: ["PATH", "HOME"] },
      ...(limits ? { execution_limits: limits } : {}),
    });
    const serve = startServe(
      {
        router: {
          listen: [
            { unix: join(tmp, "ev.sock"), agent: "ev" },
            { unix: join(tmp, "rl.sock"), agent: "rl" },
          ],
        },
        audit: { path: auditC },
        agents: [agent("ev"), agent("rl", { rate_limit: "3/minute" })],
      },
      join(tmp, "serve.json")
    );
    try {
      await serve.ready;
      const served = await socketSession("served", join(tmp, "ev.sock"), exercise, serve.stderrText);
      check(
        isDeepStrictEqual(direct.tools, served.tools),
        "tools/list identical direct and through toolgate serve",
        `served ${show(served.tools.map((t) => t.name))}`
      );
      check(
        isDeepStrictEqual(direct.echo, served.echo) && isDeepStrictEqual(direct.sum, served.sum),
        "echo and sum results identical direct and through toolgate serve",
        `served ${show([served.echo, served.sum])}`
      );
      // Two connections, two instances, one agent rate: 2 + 2 calls against
      // 3/minute see exactly one refusal.
      const twoConns = await Promise.all(
        [0, 1].map((k) =>
          socketSession(`rate-limited serve ${k}`, join(tmp, "rl.sock"), async (client) => {
            const out = [];
            for (let i = 0; i < 2; i++) {
              try {
                out.push({ ok: await client.callTool({ name: "echo", arguments: { message: secret } }) });
              } catch (e) {
                out.push({ err: e });
              }
            }
            return out;
          }, serve.stderrText)
        )
      );
      const all = twoConns.flat();
      check(all.filter((o) => o.ok).length === 3,
        `serve: 3/minute across two connections admits exactly 3 of 4 (got ${all.filter((o) => o.ok).length})`);
      const refused = all.find((o) => o.err);
      check(
        refused?.err instanceof McpError && refused.err.code === RATE_DENIED_CODE &&
          refused.err.data?.code === "rate_limit_exceeded",
        "serve: the refusal reaches the SDK as McpError rate_limit_exceeded",
        show(refused?.err)
      );
    } finally {
      serve.child.kill("SIGTERM");
      await new Promise((ok) => (serve.child.exitCode !== null ? ok() : serve.child.once("exit", ok)));
    }
    const c = readAudit(auditC);
    check(
      c.events.some((e) => e.event === "call.completed" && e.agent === "ev"),
      "serve: audit has call.completed events",
      show(c.events.map((e) => e.event))
    );
    check(!c.text.includes(secret), "serve: audit never contains tool arguments or results");

    // toolgate exits when the client closes its stdin; by then the audit
    // sink has flushed.
    const a = readAudit(auditA);
    const b = readAudit(auditB);
    check(a.events.length > 0, `audit file written (${auditA}, ${a.events.length} events)`);
    check(
      [...a.events, ...b.events].every((e) => e.unparsable === undefined),
      "every audit line is JSON",
      show([...a.events, ...b.events].find((e) => e.unparsable !== undefined))
    );
    check(
      a.events.some((e) => e.event === "call.completed"),
      "audit has call.completed events",
      show(a.events.map((e) => e.event))
    );
    check(
      b.events.filter((e) => e.event === "call.denied").length === 2,
      "audit has the 2 call.denied events of the rate test",
      show(b.events.map((e) => e.event))
    );
    check(
      !a.text.includes(secret) && !b.text.includes(secret),
      "audit never contains tool arguments or results"
    );
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

try {
  await main();
} catch (e) {
  console.log(`FAIL ${e.stack ?? e}`);
  failures.push("exception");
}
console.log(`peer_test: ${passCount()} passed, ${failures.length} failed`);
process.exit(failures.length ? 1 : 0);

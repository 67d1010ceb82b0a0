// A small MCP server of revision 2026-07-28 on the official TypeScript SDK
// 2.x (@modelcontextprotocol/server), for peer_2026.mjs.
//
// `node server26.mjs` serves stdio through the SDK's serveStdio: a client
// opening with server/discover gets the 2026-07-28 era, one opening with
// initialize the 2025 era (the same tools; the SDK's legacy shim turns an
// input_required return into a real elicitation/create request there).
// `node server26.mjs --http 127.0.0.1:0` serves MCP over HTTP at /mcp through
// createMcpHandler (a web-standard fetch handler; node:http is adapted here
// by hand, since @modelcontextprotocol/node is not installed) and prints
// "server26: http://HOST:PORT/mcp" on stderr once it listens.
//
// Tools:
//   echo  {text}            answers its text
//   slow  {ms, steps?}      waits ms (in steps); sends notifications/progress
//                           after each step when the call has a progressToken
//   ask   {question}        needs input from the client: returns an
//                           input_required result (MRTR) with one form
//                           elicitation "answer" and a requestState, and on
//                           the retry that carries the accepted answer (and
//                           echoes the state) answers "<question> -> <answer>"
//   route {region, query}   region is mirrored into the Mcp-Param-Region
//                           header on Streamable HTTP (x-mcp-header); answers
//                           "<region>: <query>"
// Resource: peer26://greeting (text/plain). Prompt: greet {name}.
import { createServer } from "node:http";
import { Readable } from "node:stream";
import {
  acceptedContent, createMcpHandler, fromJsonSchema, inputRequired, McpServer,
} from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";

export const GREETING = "hello from server26";
const ANSWER_SCHEMA = {
  type: "object",
  properties: { answer: { type: "string", description: "the answer" } },
  required: ["answer"],
};

const text = (t) => ({ content: [{ type: "text", text: t }] });
const sleep = (ms, signal) =>
  new Promise((ok, fail) => {
    const timer = setTimeout(ok, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      fail(signal.reason ?? new Error("cancelled"));
    }, { once: true });
  });

function newServer() {
  const server = new McpServer(
    { name: "toolgate-peer-server26", version: "1.0.0" },
    { capabilities: { tools: {}, resources: {}, prompts: {} } }
  );

  server.registerTool("echo", {
    description: "Answers its text",
    inputSchema: fromJsonSchema({
      type: "object", properties: { text: { type: "string" } }, required: ["text"],
    }),
  }, async ({ text: t }) => text(t));

  server.registerTool("slow", {
    description: "Waits ms milliseconds in steps, with progress when asked for",
    inputSchema: fromJsonSchema({
      type: "object",
      properties: { ms: { type: "integer", minimum: 0 }, steps: { type: "integer", minimum: 1 } },
      required: ["ms"],
    }),
  }, async ({ ms, steps = 2 }, ctx) => {
    const token = ctx.mcpReq._meta?.progressToken;
    for (let i = 1; i <= steps; i++) {
      await sleep(ms / steps, ctx.mcpReq.signal);
      if (token !== undefined) {
        await ctx.mcpReq.notify({
          method: "notifications/progress",
          params: { progressToken: token, progress: i, total: steps, message: `step ${i}/${steps}` },
        });
      }
    }
    return text(`slept ${ms} ms`);
  });

  // Multi round-trip (basic/patterns/mrtr): the first round returns
  // input_required; the client fulfils the embedded elicitation and retries
  // with inputResponses and the requestState echoed.
  server.registerTool("ask", {
    description: "Asks the client a question (input_required) and answers with its answer",
    inputSchema: fromJsonSchema({
      type: "object", properties: { question: { type: "string" } }, required: ["question"],
    }),
  }, async ({ question }, ctx) => {
    const got = acceptedContent(ctx.mcpReq.inputResponses, "answer");
    const state = ctx.mcpReq.requestState();
    if (typeof got?.answer === "string") {
      // The state is not trusted (it went through the client): it only
      // says which round this is, and the answer must name it.
      return text(`${question} -> ${got.answer} (state ${state ?? "none"})`);
    }
    return inputRequired({
      inputRequests: {
        answer: inputRequired.elicit({ message: question, requestedSchema: ANSWER_SCHEMA }),
      },
      requestState: "ask-round-1",
    });
  });

  server.registerTool("route", {
    description: "Answers region: query; region is mirrored into the Mcp-Param-Region header",
    inputSchema: fromJsonSchema({
      type: "object",
      properties: {
        region: { type: "string", description: "where to run", "x-mcp-header": "Region" },
        query: { type: "string" },
      },
      required: ["region", "query"],
    }),
  }, async ({ region, query }) => text(`${region}: ${query}`));

  server.registerResource("greeting", "peer26://greeting",
    { title: "Greeting", mimeType: "text/plain" },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: "text/plain", text: GREETING }] }));

  server.registerPrompt("greet", {
    description: "Greets someone",
    argsSchema: fromJsonSchema({
      type: "object", properties: { name: { type: "string" } }, required: ["name"],
    }),
  }, ({ name }) => ({
    messages: [{ role: "user", content: { type: "text", text: `Please greet ${name}.` } }],
  }));

  return server;
}

// node:http request -> web Request, web Response -> node:http response.
function serveHttp(listen) {
  const handler = createMcpHandler(() => newServer(), {
    onerror: (e) => process.stderr.write(`server26: ${e.message}\n`),
  });
  const [host, port] = listen.split(/:(?=\d+$)/);
  const http = createServer(async (req, res) => {
    try {
      const url = new URL(req.url, `http://${req.headers.host ?? host}`);
      if (url.pathname !== "/mcp") {
        res.writeHead(404).end();
        return;
      }
      const ac = new AbortController();
      res.on("close", () => ac.abort());
      const hasBody = req.method !== "GET" && req.method !== "HEAD";
      const request = new Request(url, {
        method: req.method,
        headers: Object.entries(req.headers).flatMap(([k, v]) =>
          (Array.isArray(v) ? v : [v]).map((x) => [k, x])),
        body: hasBody ? Readable.toWeb(req) : undefined,
        duplex: hasBody ? "half" : undefined,
        signal: ac.signal,
      });
      const response = await handler.fetch(request);
      res.writeHead(response.status, [...response.headers].flat());
      if (!response.body) {
        res.end();
        return;
      }
      for await (const chunk of response.body) res.write(chunk);
      res.end();
    } catch (e) {
      process.stderr.write(`server26: ${e.stack ?? e}\n`);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    }
  });
  http.listen(Number(port), host, () => {
    const a = http.address();
    process.stderr.write(`server26: http://${a.address}:${a.port}/mcp\n`);
  });
  const stop = () => {
    handler.close().finally(() => http.close(() => process.exit(0)));
    http.closeAllConnections();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

const at = process.argv.indexOf("--http");
if (at >= 0) serveHttp(process.argv[at + 1] ?? "127.0.0.1:0");
else serveStdio(() => newServer(), { onerror: (e) => process.stderr.write(`server26: ${e.message}\n`) });

// A transparent tap in front of an MCP server on stdio, for peer_hub.mjs:
// `node tap.mjs LOG -- CMD ARGS` runs CMD with its stdin, stdout and stderr
// passed through unchanged, and appends every line that reaches CMD's stdin
// to LOG as it passes. The hub test reads LOG to see what an agent was sent
// (a cancel meant for another agent must never be in it).
// SIGTERM and SIGINT are passed on; the tap exits as CMD does.
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";

const [log, dashes, cmd, ...args] = process.argv.slice(2);
if (!log || dashes !== "--" || !cmd) {
  console.error("usage: node tap.mjs LOG -- CMD ARGS");
  process.exit(2);
}
const child = spawn(cmd, args, { stdio: ["pipe", "inherit", "inherit"] });
let pending = "";
process.stdin.on("data", (chunk) => {
  child.stdin.write(chunk);
  pending += chunk.toString("utf8");
  const cut = pending.lastIndexOf("\n");
  if (cut >= 0) {
    appendFileSync(log, pending.slice(0, cut + 1));
    pending = pending.slice(cut + 1);
  }
});
process.stdin.on("end", () => {
  if (pending) appendFileSync(log, `${pending}\n`);
  child.stdin.end();
});
child.stdin.on("error", () => {}); // the server gone: its exit ends the tap
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => child.kill(sig));
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 + 15 : 1)));

// What the real-peer tests share: the reference server's command, the check
// log, a deadline on a promise, tool lists in a stable order.
import { createRequire } from "node:module";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { inspect } from "node:util";

export const RATE_DENIED_CODE = -32060;
export const CONNECT_TIMEOUT_MS = 20000;

// Resolve the server's entry from its package.json "bin", so a package
// update that moves the file is noticed here rather than as a spawn error.
const require = createRequire(import.meta.url);
const serverPkgPath = require.resolve("@modelcontextprotocol/server-everything/package.json");
const serverPkg = JSON.parse(readFileSync(serverPkgPath, "utf8"));
const serverBin =
  typeof serverPkg.bin === "string" ? serverPkg.bin : Object.values(serverPkg.bin ?? {})[0];
const serverEntry = join(dirname(serverPkgPath), serverBin ?? "dist/index.js");
export const serverCmd = [process.execPath, serverEntry, "stdio"];

export const failures = [];
let passes = 0;
export function check(ok, what, detail) {
  if (ok) {
    passes++;
    console.log(`ok   ${what}`);
  } else {
    console.log(`FAIL ${what}${detail ? `: ${detail}` : ""}`);
    failures.push(what);
  }
}
export const passCount = () => passes;
export const show = (v) => inspect(v, { depth: 6, breakLength: 120 });

export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// The tool lists compared: everything a client sees, sorted by name so the
// check does not depend on the server's registration order.
export const byName = (tools) => [...tools].sort((a, b) => a.name.localeCompare(b.name));

// The toolgate binary named on the command line (or $TOOLGATE); exits 2
// with a usage line when there is none.
export function toolgateArg(script) {
  const arg = process.argv[2] ?? process.env.TOOLGATE;
  const path = resolve(arg ?? "");
  if (!arg) {
    console.error(`usage: node ${script} /path/to/toolgate`);
    process.exit(2);
  }
  if (!existsSync(path)) {
    console.error(`${script}: toolgate binary not found: ${path}`);
    process.exit(2);
  }
  return path;
}

// Build the web UI into api/static/ (or --out DIR): one minified script,
// one stylesheet, the page, and THIRD_PARTY_LICENSES.txt with the license
// of every npm package that ends up in the bundle. The output depends only
// on the sources and the locked package versions, so tests can rebuild it
// and compare it with the committed copy.
import * as esbuild from "esbuild";
import { copyFile, mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const outArg = process.argv.indexOf("--out");
const OUT = resolve(outArg > 0 ? process.argv[outArg + 1] : join(HERE, "..", "api", "static"));

// Code bundled inside a package's own dist file, whose license text lives in
// another package: cytoscape-dagre's dist carries dagre and graphlib.
const EMBEDDED = { "cytoscape-dagre": ["@dagrejs/dagre", "@dagrejs/graphlib"] };

const result = await esbuild.build({
  entryPoints: { app: join(HERE, "src", "main.js") },
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2020"],
  outdir: OUT,
  loader: { ".grass": "text" },
  legalComments: "none", // the licenses are in THIRD_PARTY_LICENSES.txt instead
  charset: "utf8",
  metafile: true,
  logLevel: "warning",
});

function packageOf(path) {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(path);
  return m ? m[1] : null;
}

const used = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const pkg = packageOf(input);
  if (pkg) {
    used.add(pkg);
    for (const extra of EMBEDDED[pkg] || []) used.add(extra);
  }
}
const parts = ["Third-party software bundled in app.js and app.css (tracegraph web UI).\n"];
for (const pkg of [...used].sort()) {
  const dir = join(HERE, "node_modules", pkg);
  const meta = JSON.parse(await readFile(join(dir, "package.json"), "utf8"));
  let text = null;
  for (const name of ["LICENSE", "LICENSE.md", "LICENSE.txt", "license"]) {
    try {
      text = await readFile(join(dir, name), "utf8");
      break;
    } catch {
      /* next */
    }
  }
  if (!text) throw new Error(`${pkg}: no license file`);
  const embedded = Object.entries(EMBEDDED).find(([, v]) => v.includes(pkg));
  parts.push(
    `${"=".repeat(72)}\n${pkg} ${meta.version} (${meta.license})` +
      (embedded ? `: its license text; a copy of it is bundled inside ${embedded[0]}'s dist file` : "") +
      `\n${"=".repeat(72)}\n${text.trim()}\n`,
  );
}
await mkdir(OUT, { recursive: true });
await writeFile(join(OUT, "THIRD_PARTY_LICENSES.txt"), parts.join("\n"));
await copyFile(join(HERE, "src", "index.html"), join(OUT, "index.html"));
console.log(`built ${OUT}: ${[...used].sort().join(", ")}`);

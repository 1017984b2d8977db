#!/usr/bin/env node
// Lint .cypher files with Neo4j's official Cypher linter
// (@neo4j-cypher/language-support, `lintCypherQuery`) as Cypher 5, offline.
//
// Usage: node tests/cypherlint/lint.mjs FILE.cypher [FILE.cypher ...]
//
// Prints exactly one JSON object on stdout:
//   {"files": [{"path": ..., "diagnostics": [
//       {"severity": "error"|"warning"|"information"|"hint",
//        "message": ..., "line": N, "column": N}]}]}
// line and column are 1-based (the library's LSP positions are 0-based).
// Exits 0 even when there are diagnostics; the Python test decides what fails.
// Exits 2 only on a usage/setup problem (e.g. the library is not installed).
//
// How the linter is configured (see dist/.../syntaxValidation/syntaxValidation.d.ts
// and dbSchema.d.ts in node_modules/@neo4j-cypher/language-support):
//   lintCypherQuery(query: string, dbSchema: DbSchema, options?) -> {diagnostics, symbolTables}
//   * Cypher version: dbSchema.defaultLanguage ('CYPHER 5' | 'CYPHER 25'). A
//     `CYPHER 25` prefix written in a statement itself would override it.
//   * No database: the schema below has no labels/relationshipTypes/propertyKeys/
//     functions/procedures, and the library only runs those existence checks
//     when the corresponding key is present, so unknown labels, properties,
//     functions and procedures are NOT reported.  Do not add `graphSchema`:
//     that code path needs Node >= 22 (Set.prototype.union, iterator helpers).
//   * Parameters: every `$param` not listed in dbSchema.parameters is reported
//     as an *error* ("Parameter $x is not defined."). Parameters are bound at
//     run time, so those diagnostics are dropped with the library's own
//     `isNotParamError` filter. Malformed parameter syntax is still a syntax error.
//   * Comments (`//`, `/* */`) are part of the grammar; the full file text is
//     linted so reported lines match the file.
import { readFileSync } from 'node:fs';

const SEVERITY = { 1: 'error', 2: 'warning', 3: 'information', 4: 'hint' };

const DB_SCHEMA = Object.freeze({ defaultLanguage: 'CYPHER 5' });

// Anything the library (or its compiled-from-Java semantic analysis) logs must
// not end up in the JSON on stdout.
const toStderr = (...args) => process.stderr.write(args.map(String).join(' ') + '\n');
console.log = toStderr;
console.info = toStderr;
console.debug = toStderr;

let lib;
try {
  lib = await import('@neo4j-cypher/language-support');
} catch (err) {
  process.stderr.write(
    `cypherlint: cannot load @neo4j-cypher/language-support (${err.message}).\n` +
      'Run: npm ci --prefix tests/cypherlint\n',
  );
  process.exit(2);
}
const { lintCypherQuery, isNotParamError } = lib;

function lintFile(path) {
  let text;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return [{ severity: 'error', message: `cannot read file: ${err.message}`, line: 0, column: 0 }];
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // BOM

  let diagnostics;
  try {
    ({ diagnostics } = lintCypherQuery(text, DB_SCHEMA));
  } catch (err) {
    return [{ severity: 'error', message: `linter crashed: ${err?.stack ?? err}`, line: 0, column: 0 }];
  }
  return diagnostics.filter(isNotParamError).map((d) => ({
    severity: SEVERITY[d.severity] ?? String(d.severity ?? 'error'),
    message: d.message,
    line: d.range.start.line + 1,
    column: d.range.start.character + 1,
  }));
}

const files = process.argv.slice(2).map((path) => ({ path, diagnostics: lintFile(path) }));
process.stdout.write(JSON.stringify({ files }) + '\n');
process.exitCode = 0;

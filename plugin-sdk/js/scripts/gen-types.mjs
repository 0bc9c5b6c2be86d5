// Regenerates src/wit/*.d.ts from the WIT with jco's guest-types generator.
// usage: node scripts/gen-types.mjs NODE_MODULES WIT_DIR OUT_DIR [--check]
//
// jco 1.35's CLI (`jco guest-types`) cannot read any WIT path: its bundled
// @bytecodealliance/preview2-shim 0.26 no longer preopens the filesystem by default, so the
// generator (a WASI component) sees no files. We call the same generator with `/` preopened.
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [nodeModules, witDir, outDir, flag] = process.argv.slice(2);
const transpile = join(nodeModules, '@bytecodealliance/jco-transpile');
const shim = join(transpile, 'node_modules/@bytecodealliance/preview2-shim/dist/nodejs/filesystem.js');
const { _setPreopens } = await import(pathToFileURL(shim).href);
_setPreopens({ '/': '/' });
const { generateGuestTypes } = await import(pathToFileURL(join(transpile, 'dist/typegen.js')).href);
const files = await generateGuestTypes(resolve(witDir), { worldName: 'plugin' });
const header = '// Generated from plugin-sdk/wit/since_v0.3.0 by `plugin-sdk/js/build types` (jco guest-types). Do not edit.\n';
let stale = [];
for (const [name, bytes] of Object.entries(files)) {
  const text = header + new TextDecoder().decode(bytes);
  const path = join(outDir, name);
  if (flag === '--check') {
    const current = await readFile(path, 'utf8').catch(() => '');
    if (current !== text) stale.push(path);
  } else {
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, text);
  }
}
if (stale.length) {
  console.error(`generated WIT types are stale: ${stale.join(', ')}; run plugin-sdk/js/build types`);
  process.exit(1);
}

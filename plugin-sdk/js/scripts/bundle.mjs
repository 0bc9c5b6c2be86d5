// Bundling with esbuild, componentizing with componentize-js, for plugin-sdk/js/build.
//   node bundle.mjs component NODE_MODULES ENTRY.ts OUT.wasm [PLUGIN_DIR]
//   node bundle.mjs tests NODE_MODULES OUT_DIR TEST.ts...
// The component carries the bundle's source map (custom section `orca:source-map`, sources
// named relative to PLUGIN_DIR, the SDK's as `orca-plugin/…`), which orca reads to name the
// `.ts` line of an uncaught exception; test bundles carry theirs inline for node's
// --enable-source-maps.
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const JS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const WIT_DIR = resolve(JS_DIR, '../wit/since_v0.3.0');
const INTERFACE_VERSION = '0.3.0';
const [mode, nodeModules, ...args] = process.argv.slice(2);
const require = createRequire(join(nodeModules, 'noop.js'));
const esbuild = require('esbuild');

/** Resolves the SDK's module names; `entry` is the author's plugin for the component entry. */
function sdkResolver(entry) {
  return {
    name: 'orca-plugin',
    setup(build) {
      build.onResolve({ filter: /^orca-plugin$/ }, () => ({ path: join(JS_DIR, 'src/index.ts') }));
      build.onResolve({ filter: /^orca-plugin\/testing$/ }, () => ({ path: join(JS_DIR, 'src/testing.ts') }));
      build.onResolve({ filter: /^orca-plugin:entry$/ }, () =>
        entry ? { path: entry } : { errors: [{ text: 'no plugin entry' }] },
      );
      // The component's imports: only component.ts imports them; a test must not.
      build.onResolve({ filter: /^orca:/ }, (a) => ({ path: a.path, external: true }));
    },
  };
}

async function bundle(entryPoint, outfile, { entry, platform, sourcemap = false }) {
  await esbuild.build({
    entryPoints: [entryPoint],
    outfile,
    bundle: true,
    format: 'esm',
    platform,
    target: 'es2022',
    logLevel: 'warning',
    plugins: [sdkResolver(entry)],
    sourcemap,
    // Only positions are needed: the sources stay with the author.
    sourcesContent: false,
  });
}

/**
 * The source map esbuild wrote beside `outfile`, its sources renamed for the reader of an error:
 * the plugin's relative to `pluginDir` (`src/plugin.ts`), the SDK's as `orca-plugin/…`, any
 * other (a dependency) relative to `pluginDir` as well.
 */
async function componentSourceMap(outfile, pluginDir) {
  const map = JSON.parse(await readFile(`${outfile}.map`, 'utf8'));
  const sdk = join(JS_DIR, 'src');
  map.sources = map.sources.map((source) => {
    const path = resolve(dirname(outfile), map.sourceRoot ?? '', source);
    const name = path.startsWith(sdk + sep) ? `orca-plugin/${relative(sdk, path)}` : relative(pluginDir, path);
    return name.split(sep).join('/');
  });
  delete map.sourceRoot;
  map.file = basename(outfile);
  return JSON.stringify(map);
}

/** A component-level custom section `name` holding `data`, as the Rust SDK stamps it. */
function customSection(name, data) {
  const leb = (n) => {
    const out = [];
    do {
      let byte = n & 0x7f;
      n >>>= 7;
      if (n) byte |= 0x80;
      out.push(byte);
    } while (n);
    return out;
  };
  const nameBytes = new TextEncoder().encode(name);
  const body = [...leb(nameBytes.length), ...nameBytes, ...new TextEncoder().encode(data)];
  return Uint8Array.from([0, ...leb(body.length), ...body]);
}

if (mode === 'component') {
  const [entryArg, outArg, pluginDirArg] = args;
  const entry = resolve(entryArg);
  const out = resolve(outArg);
  const pluginDir = resolve(pluginDirArg ?? dirname(entryArg));
  const work = await mkdtemp(join(tmpdir(), 'orca-plugin-build-'));
  try {
    const started = Date.now();
    // 1. The plugin alone, run in Node: its default export must be a plugin; show its info.
    await bundle(entry, join(work, 'plugin.mjs'), { entry, platform: 'neutral' });
    const module = await import(pathToFileURL(join(work, 'plugin.mjs')).href);
    const plugin = module.default;
    if (!plugin || typeof plugin.info !== 'function') {
      throw new Error(`${entryArg}: the default export is not a plugin; export default definePlugin({...})`);
    }
    const info = plugin.info();
    console.error(`plugin ${info.name} ${info.version}, hooks: ${info.hooks.join(', ') || 'none'}`);
    // 2. The component entry with the plugin, as one ES module.
    const source = join(work, 'component.js');
    await bundle(join(JS_DIR, 'src/component.ts'), source, { entry, platform: 'neutral', sourcemap: 'external' });
    const sourceMap = await componentSourceMap(source, pluginDir);
    const bundled = Date.now();
    // 3. The component: no WASI at all (a pure component), only the orca:policy world.
    const { componentize } = await import(
      pathToFileURL(join(nodeModules, '@bytecodealliance/componentize-js/src/componentize.js')).href
    );
    const { component } = await componentize({
      sourcePath: source,
      witPath: WIT_DIR,
      worldName: 'plugin',
      disableFeatures: ['random', 'stdio', 'clocks', 'http', 'fetch-event'],
    });
    // 4. The interface version, read by the host before it picks bindings, and the source map.
    const sections = [
      customSection('orca:policy-version', INTERFACE_VERSION),
      customSection('orca:source-map', sourceMap),
    ];
    const bytes = new Uint8Array(component.length + sections.reduce((n, s) => n + s.length, 0));
    bytes.set(component, 0);
    let at = component.length;
    for (const section of sections) {
      bytes.set(section, at);
      at += section.length;
    }
    const tmp = `${out}.tmp`;
    await writeFile(tmp, bytes);
    await rename(tmp, out);
    console.error(
      `wrote ${outArg}: ${bytes.length} bytes, orca:policy@${INTERFACE_VERSION} (bundle ${bundled - started} ms, componentize ${Date.now() - bundled} ms)`,
    );
  } finally {
    await rm(work, { recursive: true, force: true });
  }
} else if (mode === 'tests') {
  const [outDir, ...tests] = args;
  let index = 0;
  for (const test of tests) {
    const out = join(outDir, `${index++}-${basename(test).replace(/\.ts$/, '.mjs')}`);
    await bundle(resolve(test), out, { platform: 'node', sourcemap: 'inline' });
    console.log(out);
  }
} else {
  console.error('usage: bundle.mjs component|tests NODE_MODULES ...');
  process.exit(2);
}

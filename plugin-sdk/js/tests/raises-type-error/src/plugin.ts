// raises-type-error-js: a plugin whose selectInstance throws a TypeError, for the SDK's own
// tests: tests/e2e/languages.rs builds it with `build` and checks that the pod's status and
// `orca plugin eval` say `TypeError: ...` at the line of src/plugin.ts marked `throws here`
// (the bundle's line mapped back through the source map), not a backtrace of the engine.
import { definePlugin, type Pod } from 'orca-plugin';

function instanceTypeFor(pod: Pod): string {
  const family = (pod as unknown as { family: () => string }).family;
  return family(); // throws here: TypeError
}

export default definePlugin({
  name: 'raises-type-error-js',
  version: '0.1.0',
  selectInstance: (pod) => [{ instanceType: instanceTypeFor(pod), reason: 'never reached' }],
});

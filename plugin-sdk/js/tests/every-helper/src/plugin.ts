// every-helper-js: a plugin that calls every helper `orca-plugin` exports (checks.ts), for the
// SDK's own tests: `build test` runs it in Node, tests/e2e/languages.rs builds it into a
// component with `build` and asks it through `orca plugin eval`, so a helper the component's
// engine cannot parse or runs differently fails the SDK's tests, not a user's first build.
//
// selectInstance runs every check: all passed, it answers the host's cheapest types that fit
// (the reason says how many checks passed); any failed, `failed` lists them. buildTags answers
// one tag of letters and digits beyond ASCII, which validateTag accepts and orca checks again.
import {
  PolicyError,
  definePlugin,
  hostCatalogue,
  memoryMibCeil,
  validateTag,
  vcpusCeil,
  type Tag,
} from 'orca-plugin';
import { checks, failures } from './checks.js';

export const NAME = 'every-helper-js';
/** The tag buildTags answers: letters and digits of five scripts, a fraction, a numeral. */
export const TAG: Tag = { key: 'orca-sdk/every-helper', value: 'Zürich ß Ж 中 ٣ Ⅻ ½ 𝐀 𝟘' };

export function checkEveryHelper(): string {
  const list = checks();
  const failed = failures(list);
  if (failed.length > 0) {
    throw PolicyError.failed(`${failed.length} of ${list.length} helper checks failed: ${failed.join('; ')}`);
  }
  return `every helper checked: ${list.length} checks of ${new Set(list.map((c) => c.helper)).size} helpers passed`;
}

export default definePlugin({
  name: NAME,
  version: '0.1.0',
  selectInstance: (pod) => {
    const reason = checkEveryHelper();
    const types = hostCatalogue.query({
      minVcpus: vcpusCeil(pod.requests),
      minMemoryMib: memoryMibCeil(pod.requests),
      minGpus: pod.requests.gpus,
      zones: pod.zones,
      limit: 3,
    });
    if (types.length === 0) throw PolicyError.noMatch('no type in the catalogue fits the pod');
    return types.map((t) => ({ instanceType: t.name, reason }));
  },
  buildTags: () => {
    const problem = validateTag(TAG.key, TAG.value);
    if (problem !== undefined) throw PolicyError.failed(problem);
    return [TAG];
  },
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as sdk from 'orca-plugin';
import { FixedCatalogue, installFakeHost, instanceType, pod } from 'orca-plugin/testing';
import { CALLED_BY_THE_COMPONENT_ENTRY, checks, failures } from './checks.js';
import plugin, { TAG, checkEveryHelper } from './plugin.js';

const catalogue = new FixedCatalogue([
  instanceType('c7i.large', 2, 4, 0, 'amd64', 0.0893),
  instanceType('m7i.large', 2, 8, 0, 'amd64', 0.1008),
  instanceType('m7i.xlarge', 4, 16, 0, 'amd64', 0.2016),
  instanceType('m7i.2xlarge', 8, 32, 0, 'amd64', 0.4032),
]);

test('the checks call every helper orca-plugin exports', () => {
  const checked = new Set([...checks().map((c) => c.helper), ...CALLED_BY_THE_COMPONENT_ENTRY]);
  const exported = Object.keys(sdk).sort();
  assert.deepEqual(exported.filter((name) => !checked.has(name)), [], 'exports no check calls');
  assert.deepEqual([...checked].filter((name) => !exported.includes(name)), [], 'checks of no export');
});

test('every check passes in Node', () => {
  const host = installFakeHost(catalogue);
  try {
    assert.deepEqual(failures(checks()), []);
    assert.deepEqual(host.logged, [{ level: 'debug', message: 'every-helper-js: the log helper writes this line' }]);
  } finally {
    host.uninstall();
  }
});

test('a check that fails is named with what it expected and what it got', () => {
  const failed = failures([
    { helper: 'divCeil', what: 'wrong on purpose', run: () => sdk.divCeil(7n, 2n), expected: 3n },
    { helper: 'validateTag', what: 'throws', run: () => { throw new TypeError('boom'); }, expected: undefined },
  ]);
  assert.deepEqual(failed, [
    'divCeil (wrong on purpose): expected "3n", got "4n"',
    'validateTag (throws): expected undefined, got an exception: TypeError: boom',
  ]);
});

test('the plugin answers the cheapest types that fit, its reason counting the checks', () => {
  const host = installFakeHost(catalogue);
  try {
    const reason = checkEveryHelper();
    assert.match(reason, /^every helper checked: \d+ checks of \d+ helpers passed$/);
    const candidates = plugin.selectInstance(pod({ requests: { cpuMillis: 3000n } }), '{}');
    assert.deepEqual(candidates, [
      { instanceType: 'm7i.xlarge', reason },
      { instanceType: 'm7i.2xlarge', reason },
    ]);
  } finally {
    host.uninstall();
  }
  assert.deepEqual(plugin.info().hooks, ['select-instance', 'build-tags']);
});

test('its tag is letters and digits beyond ASCII, which validateTag accepts', () => {
  const context = { nodeName: 'n', clusterName: 'c', instanceType: 'm7i.large', market: 'on-demand' as const };
  assert.deepEqual(plugin.buildTags(pod(), '{}', context), [TAG]);
  assert.ok([...TAG.value].some((c) => c.codePointAt(0)! > 0xffff), 'an astral character too');
});

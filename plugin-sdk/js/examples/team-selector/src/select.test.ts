import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FixedCatalogue, expectPolicyError, instanceType, pod } from 'orca-plugin/testing';
import plugin from './plugin.js';
import { INSTANCE_TYPE_ANNOTATION, parse, select } from './select.js';

const catalogue = new FixedCatalogue([
  instanceType('g5.xlarge', 4, 16, 1, 'amd64', 1.006),
  instanceType('g6.xlarge', 4, 16, 1, 'amd64', 0.805),
  instanceType('g6e.xlarge', 4, 32, 1, 'amd64', 1.861),
  instanceType('g5.48xlarge', 192, 768, 8, 'amd64', 16.288),
  instanceType('g6.48xlarge', 192, 768, 8, 'amd64', 13.35),
  instanceType('p5.48xlarge', 192, 2048, 8, 'amd64', 98.32),
  instanceType('c7g.large', 2, 4, 0, 'arm64', 0.0725),
  instanceType('m7g.large', 2, 8, 0, 'arm64', 0.0816),
  instanceType('m7g.xlarge', 4, 16, 0, 'arm64', 0.1632),
  instanceType('c7i.large', 2, 4, 0, 'amd64', 0.0893),
]);
const none = parse('{}');
const teamPod = (team: string, more: Parameters<typeof pod>[0] = {}) =>
  pod({ labels: [['team', team]], ...more });
const names = (candidates: { instanceType: string }[]) => candidates.map((c) => c.instanceType);

test('ml gets GPU types, g6 before g5 before g6e whatever the prices, never p5', () => {
  assert.deepEqual(names(select(teamPod('ml'), none, catalogue)), [
    'g6.xlarge', 'g6.48xlarge', 'g5.xlarge', 'g5.48xlarge', 'g6e.xlarge',
  ]);
  assert.deepEqual(names(select(teamPod('ml', { requests: { gpus: 8 } }), none, catalogue)), [
    'g6.48xlarge', 'g5.48xlarge',
  ]);
});

test('ml pods asking for more than 8 GPUs get no-match, and the limit is a setting', () => {
  const message = expectPolicyError('no-match', () =>
    select(teamPod('ml', { requests: { gpus: 16 } }), none, catalogue),
  );
  assert.match(message, /at most 8 GPUs; the pod asks for 16/);
  expectPolicyError('no-match', () =>
    select(teamPod('ml', { requests: { gpus: 8 } }), parse('{"mlMaxGpus": 4}'), catalogue),
  );
});

test('batch gets the cheapest arm64 types that fit', () => {
  assert.deepEqual(names(select(teamPod('batch'), none, catalogue)), ['c7g.large', 'm7g.large', 'm7g.xlarge']);
  const big = teamPod('batch', { requests: { cpuMillis: 2500n, memoryBytes: 6n << 30n } });
  assert.deepEqual(names(select(big, none, catalogue)), ['m7g.xlarge']);
  expectPolicyError('no-match', () =>
    select(teamPod('batch', { requests: { cpuMillis: 64_000n } }), none, catalogue),
  );
});

test('other teams, pods without a team and pods naming their type are declined', () => {
  assert.match(expectPolicyError('declined', () => select(teamPod('finance'), none, catalogue)), /"finance"/);
  assert.match(expectPolicyError('declined', () => select(pod(), none, catalogue)), /no team label/);
  const named = teamPod('ml', { annotations: [[INSTANCE_TYPE_ANNOTATION, 'm7i.large']] });
  assert.match(expectPolicyError('declined', () => select(named, none, catalogue)), /names its type/);
});

test("a team in the settings gets its types in its order; unknown types are dropped", () => {
  const settings = parse('{"teams": {"vision": ["g5.xlarge", "g6.xlarge", "z9.nothing"]}}');
  assert.deepEqual(names(select(teamPod('vision'), settings, catalogue)), ['g5.xlarge', 'g6.xlarge']);
  const message = expectPolicyError('no-match', () =>
    select(teamPod('vision', { requests: { gpus: 8 } }), settings, catalogue),
  );
  assert.match(message, /g5\.xlarge, g6\.xlarge, z9\.nothing/);
});

test('bad settings are invalid-settings', () => {
  for (const bad of ['{"team": {}}', 'not json', '[]', '{"teams": {"a": "g6.xlarge"}}', '{"mlMaxGpus": 0}']) {
    assert.match(expectPolicyError('invalid-settings', () => parse(bad)), /team-selector-js settings/, bad);
  }
  // Through the plugin's hook as orca calls it.
  expectPolicyError('invalid-settings', () => plugin.selectInstance(teamPod('ml'), '{"team": {}}'));
});

test('the plugin implements select-instance only; the other hooks are unsupported', () => {
  assert.deepEqual(plugin.info(), { name: 'team-selector-js', version: '0.1.0', hooks: ['select-instance'] });
  expectPolicyError('unsupported', () => plugin.chooseMarket(pod(), '{}', []));
});

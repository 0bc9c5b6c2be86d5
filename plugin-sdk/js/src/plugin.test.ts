import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PolicyError, definePlugin, exportPolicy, isPolicyError, parseSettings } from 'orca-plugin';
import { expectPolicyError, installFakeHost, FixedCatalogue, pod } from 'orca-plugin/testing';

test('errors carry the WIT policy-error variant in their own payload (jco: thrown payload = err)', () => {
  assert.deepEqual(PolicyError.declined('not mine').payload, { tag: 'declined', val: 'not mine' });
  assert.deepEqual(PolicyError.noMatch('16 GPUs').payload, { tag: 'no-match', val: '16 GPUs' });
  assert.deepEqual(PolicyError.invalidSettings('x').payload, { tag: 'invalid-settings', val: 'x' });
  assert.deepEqual(PolicyError.failed('x').payload, { tag: 'failed', val: 'x' });
  assert.deepEqual(PolicyError.unsupported().payload, { tag: 'unsupported' });
  const annotation = PolicyError.invalidAnnotation('orca.research/launch-type', 'cheap', 'spot or on-demand');
  assert.deepEqual(annotation.payload, {
    tag: 'invalid-annotation',
    val: { annotation: 'orca.research/launch-type', value: 'cheap', expected: 'spot or on-demand' },
  });
  assert.ok(Object.hasOwn(annotation, 'payload'));
  assert.ok(annotation instanceof Error && isPolicyError(annotation, 'invalid-annotation'));
  assert.equal(PolicyError.noMatch('16 GPUs').message, 'no-match: 16 GPUs');
});

test('hooks not implemented answer unsupported and are not listed', () => {
  const plugin = definePlugin({
    name: 'tags-only',
    version: '1.0.0',
    buildTags: (_pod, _settings, context) => [{ key: 'node', value: context.nodeName }],
  });
  assert.deepEqual(plugin.info().hooks, ['build-tags']);
  expectPolicyError('unsupported', () => plugin.selectInstance(pod(), '{}'));
  expectPolicyError('unsupported', () => plugin.chooseMarket(pod(), '{}', []));
  const context = { nodeName: 'n', clusterName: 'c', instanceType: 'm7i.large', market: 'spot' as const };
  assert.deepEqual(plugin.buildTags(pod(), '{}', context), [{ key: 'node', value: 'n' }]);
});

test('names, versions and hook lists orca would refuse are errors at definition', () => {
  assert.throws(() => definePlugin({ name: 'has space', version: '1' }), /1 to 63 printable ASCII/);
  assert.throws(() => definePlugin({ name: 'x'.repeat(64), version: '1' }), /1 to 63/);
  assert.throws(() => definePlugin({ name: 'x', version: '' }), /version/);
  assert.throws(() => definePlugin({ name: 'x', version: '1', hooks: ['choose-market'] }), /does not implement chooseMarket/);
});

test('the component export passes PolicyErrors on and logs other exceptions before trapping', () => {
  const exported = exportPolicy(
    definePlugin({
      name: 'p',
      version: '1',
      selectInstance(p) {
        if (p.name === 'bug') throw new TypeError('x is undefined');
        throw PolicyError.declined('not mine');
      },
    }),
  );
  const fake = installFakeHost(new FixedCatalogue([]));
  try {
    expectPolicyError('declined', () => exported.selectInstance(pod(), '{}'));
    assert.throws(() => exported.selectInstance(pod({ name: 'bug' }), '{}'), TypeError);
    assert.equal(fake.logged.length, 1);
    assert.match(fake.logged[0]!.message, /^select-instance: uncaught TypeError: x is undefined/);
  } finally {
    fake.uninstall();
  }
});

test('settings: empty is {}, anything but a JSON object is invalid-settings', () => {
  assert.deepEqual(parseSettings('p', ' '), {});
  assert.deepEqual(parseSettings('p', '{"a": 1}'), { a: 1 });
  assert.match(expectPolicyError('invalid-settings', () => parseSettings('p', '{')), /^p settings: /);
  expectPolicyError('invalid-settings', () => parseSettings('p', '[1]'));
});

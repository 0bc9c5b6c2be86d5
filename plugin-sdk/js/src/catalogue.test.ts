import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hostCatalogue, log } from 'orca-plugin';
import { FixedCatalogue, installFakeHost, instanceType, takeLog } from 'orca-plugin/testing';

const catalogue = new FixedCatalogue([
  instanceType('m7g.large', 2, 8, 0, 'arm64', 0.0816, { zones: ['us-west-2a'] }),
  instanceType('m7i.large', 2, 8, 0, 'amd64', 0.1008, { zones: ['us-west-2b'] }),
  instanceType('c7i.large', 2, 4, 0, 'amd64', 0.0893, { zones: [] }),
  instanceType('zz.unknown', 2, 8, 0, 'amd64', undefined),
  instanceType('aa.unknown', 2, 8, 0, 'amd64', undefined),
  instanceType('g6.xlarge', 4, 16, 1, 'amd64', 0.805),
  instanceType('p5.48xlarge', 192, 2048, 8, 'amd64', 98.32, { gpuModel: 'H100' }),
  instanceType('c7a.large', 2, 4, 0, 'amd64', 0.0893),
]);
const names = (q: Parameters<FixedCatalogue['query']>[0]) => catalogue.query(q).map((t) => t.name);

test('cheapest on-demand first, equal prices by name, unknown prices last by name', () => {
  assert.deepEqual(names({}), [
    'm7g.large', 'c7a.large', 'c7i.large', 'm7i.large', 'g6.xlarge', 'p5.48xlarge', 'aa.unknown', 'zz.unknown',
  ]);
  assert.deepEqual(names({ limit: 2 }), ['m7g.large', 'c7a.large']);
});

test('every non-empty filter applies, as the host applies it', () => {
  assert.deepEqual(names({ minGpus: 1 }), ['g6.xlarge', 'p5.48xlarge']);
  assert.deepEqual(names({ minVcpus: 4, minMemoryMib: 16 * 1024 }), ['g6.xlarge', 'p5.48xlarge']);
  assert.deepEqual(names({ minMemoryMib: 17n * 1024n }), ['p5.48xlarge']);
  assert.deepEqual(names({ architecture: 'arm64' }), ['m7g.large']);
  assert.deepEqual(names({ families: ['c7i', 'c7a'] }), ['c7a.large', 'c7i.large']);
  assert.deepEqual(names({ excludeFamilies: ['c7i', 'c7a', 'zz', 'aa'], minVcpus: 2, limit: 3 }), [
    'm7g.large', 'm7i.large', 'g6.xlarge',
  ]);
  assert.deepEqual(names({ names: ['p5.48xlarge', 'm7i.large', 'nope'] }), ['m7i.large', 'p5.48xlarge']);
});

test('a zone query keeps types offered there and types whose zones are unknown', () => {
  assert.deepEqual(names({ zones: ['us-west-2a'], families: ['m7g', 'm7i', 'c7i'] }), ['m7g.large', 'c7i.large']);
});

test('get is a query by one name', () => {
  assert.equal(catalogue.get('p5.48xlarge')?.gpuModel, 'H100');
  assert.equal(catalogue.get('nope'), undefined);
});

test('the host catalogue needs a host: a clear error in plain Node, a fake host in tests', () => {
  assert.throws(() => hostCatalogue.query({}), /no orca host here/);
  log('info', 'no host yet');
  assert.deepEqual(takeLog(), [{ level: 'info', message: 'no host yet' }]);
  const fake = installFakeHost(catalogue);
  try {
    assert.deepEqual(hostCatalogue.query({ architecture: 'arm64' }).map((t) => t.name), ['m7g.large']);
    assert.equal(hostCatalogue.get('g6.xlarge')?.gpus, 1);
    log('warn', 'through the host');
    assert.deepEqual(fake.logged, [{ level: 'warn', message: 'through the host' }]);
  } finally {
    fake.uninstall();
  }
});

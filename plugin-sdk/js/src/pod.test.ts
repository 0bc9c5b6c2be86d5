import assert from 'node:assert/strict';
import { test } from 'node:test';
import { annotation, divCeil, label, memoryMibCeil, nodeSelector, vcpusCeil } from 'orca-plugin';
import { pod, podWithAnnotations } from 'orca-plugin/testing';

test('label, annotation and node-selector lookups', () => {
  const p = pod({
    labels: [['team', 'ml']],
    annotations: [['orca.research/launch-type', 'spot']],
    nodeSelector: [['kubernetes.io/arch', 'arm64']],
  });
  assert.equal(label(p, 'team'), 'ml');
  assert.equal(label(p, 'missing'), undefined);
  assert.equal(annotation(p, 'orca.research/launch-type'), 'spot');
  assert.equal(nodeSelector(p, 'kubernetes.io/arch'), 'arm64');
  assert.equal(annotation(podWithAnnotations([['a', 'b']]), 'a'), 'b');
});

test('resources round up to whole vCPUs and MiB', () => {
  const p = pod({ requests: { cpuMillis: 1500n, memoryBytes: (1n << 20n) + 1n } });
  assert.equal(vcpusCeil(p.requests), 2);
  assert.equal(memoryMibCeil(p.requests), 2n);
  assert.equal(vcpusCeil(p.limits), 0);
  assert.equal(divCeil(2000n, 1000n), 2n);
  assert.equal(p.requests.gpus, 0);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { validateTag } from 'orca-plugin';

test("AWS's tag rules, with the Rust SDK's messages", () => {
  assert.equal(validateTag('team', 'ml-research'), undefined);
  assert.equal(validateTag('orca.research/pod-name', 'default/gpu-training'), undefined);
  assert.equal(validateTag('Projekt', 'Bäckerei 42 @ Zürich'), undefined);
  assert.equal(validateTag('', 'x'), 'tag key is empty');
  assert.equal(validateTag('aws:cloudformation', 'x'), 'tag key "aws:cloudformation" uses the reserved aws: prefix');
  assert.match(validateTag('AWS:x', 'x')!, /aws:/);
  assert.equal(validateTag('k'.repeat(129), 'x'), `tag key "${'k'.repeat(129)}" is longer than 128 characters`);
  assert.equal(validateTag('k'.repeat(128), 'x'), undefined);
  assert.equal(validateTag('k', 'v'.repeat(257)), 'value of tag "k" is longer than 256 characters');
  assert.equal(validateTag('k', 'é'.repeat(256)), undefined, 'characters, not bytes');
  assert.equal(
    validateTag('team', 'a;b'),
    `tag "team" contains ';'; allowed are letters, digits, spaces and _ . : / = + - @`,
  );
  assert.match(validateTag('team', "it's")!, /contains '\\''/);
  assert.match(validateTag('a"b', 'x')!, /^tag "a\\"b" contains '"'/);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ALPHANUMERIC, NON_PRINTABLE, UNICODE_VERSION } from './unicode.generated.js';

// The generated classes hold exactly the code points of the property escapes they replace
// (scripts/gen-unicode.mjs), compared on every code point with this Node's own escapes. Node's
// ICU has one Unicode version; the tables another only after one of them is upgraded, and then
// this test says so rather than comparing different versions.
const REPLACED: Array<[name: string, generated: RegExp, escapes: RegExp]> = [
  ['ALPHANUMERIC', ALPHANUMERIC, /^[\p{Alphabetic}\p{N}]$/u],
  ['NON_PRINTABLE', NON_PRINTABLE, /^[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cn}\p{Co}\p{Cs}]$/u],
];

const nodeUnicode = process.versions.unicode ?? 'unknown';
const sameVersion = UNICODE_VERSION.startsWith(`${nodeUnicode}.`) || UNICODE_VERSION === nodeUnicode;

test(
  'the generated classes match the property escapes on every code point',
  { skip: sameVersion ? false : `tables are Unicode ${UNICODE_VERSION}, this Node's ICU ${nodeUnicode}` },
  () => {
    for (const [name, generated, escapes] of REPLACED) {
      const differ: string[] = [];
      for (let cp = 0; cp <= 0x10ffff; cp++) {
        const c = String.fromCodePoint(cp);
        if (generated.test(c) !== escapes.test(c)) differ.push(`U+${cp.toString(16).toUpperCase()}`);
      }
      assert.deepEqual(differ.slice(0, 20), [], `${name} differs on ${differ.length} code points`);
    }
  },
);

test('the generated classes contain no property escape', () => {
  for (const [name, generated] of REPLACED) {
    assert.doesNotMatch(generated.source, /\\[pP]\{/, name);
    assert.ok(generated.unicode, `${name} keeps the u flag: astral code points are one character`);
  }
});

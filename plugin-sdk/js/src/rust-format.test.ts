import assert from 'node:assert/strict';
import { test } from 'node:test';
import { rustDebugChar, rustDebugStr } from './rust-format.js';

// Each character the SDK's messages quote, and how it is written: itself, a short escape, or
// `\u{hex}` for the classes the generated NON_PRINTABLE holds (Cc, Cf, Zl, Zp, Cn, Co, Cs). The
// rows beyond ASCII pin what the Unicode property escapes matched before the class was generated
// (issue 46: the component engine rejected them at build time).
const ROWS: Array<[what: string, char: string, written: string]> = [
  ['ASCII letter', 'a', 'a'],
  ['Latin-1 letter (Ll)', '\u00e9', '\u00e9'],
  ['CJK ideograph (Lo)', '\u4e2d', '\u4e2d'],
  ['Arabic-Indic digit (Nd)', '\u0663', '\u0663'],
  ['astral letter, mathematical bold A (Lu)', '\u{1d400}', '\u{1d400}'],
  ['emoji (So)', '\u{1f600}', '\u{1f600}'],
  ['no-break space (Zs): printable', '\u00a0', '\u00a0'],
  ['ideographic space (Zs): printable', '\u3000', '\u3000'],
  ['combining acute accent (Mn): printable', '\u0301', '\u0301'],
  ['tab', '\t', '\\t'],
  ['line feed', '\n', '\\n'],
  ['carriage return', '\r', '\\r'],
  ['NUL', '\0', '\\0'],
  ['backslash', '\\', '\\\\'],
  ['C0 control (Cc)', '\u0001', '\\u{1}'],
  ['escape (Cc)', '\u001b', '\\u{1b}'],
  ['delete (Cc)', '\u007f', '\\u{7f}'],
  ['next line, C1 control (Cc)', '\u0085', '\\u{85}'],
  ['soft hyphen (Cf)', '\u00ad', '\\u{ad}'],
  ['zero-width space (Cf)', '\u200b', '\\u{200b}'],
  ['zero-width joiner (Cf)', '\u200d', '\\u{200d}'],
  ['byte order mark (Cf)', '\ufeff', '\\u{feff}'],
  ['astral language tag (Cf)', '\u{e0001}', '\\u{e0001}'],
  ['line separator (Zl)', '\u2028', '\\u{2028}'],
  ['paragraph separator (Zp)', '\u2029', '\\u{2029}'],
  ['unassigned in Greek (Cn)', '\u0378', '\\u{378}'],
  ['noncharacter U+FFFF (Cn)', '\uffff', '\\u{ffff}'],
  ['last code point (Cn)', '\u{10ffff}', '\\u{10ffff}'],
  ['private use (Co)', '\ue000', '\\u{e000}'],
  ['astral private use (Co)', '\u{f0000}', '\\u{f0000}'],
  ['lone high surrogate (Cs)', '\ud800', '\\u{d800}'],
  ['lone low surrogate (Cs)', '\udfff', '\\u{dfff}'],
];

test("characters are written as Rust's {:?} writes them, beyond ASCII too", () => {
  for (const [what, char, written] of ROWS) {
    assert.equal(rustDebugStr(char), `"${written}"`, what);
    assert.equal(rustDebugChar(char), `'${written}'`, what);
  }
});

test('a str escapes its double quotes, a char its single quote', () => {
  assert.equal(rustDebugStr(`a"b'c`), `"a\\"b'c"`);
  assert.equal(rustDebugChar('"'), `'"'`);
  assert.equal(rustDebugChar("'"), `'\\''`);
  assert.equal(rustDebugStr('Z\u00fcrich\u200b\u{1f600}\u0085'), '"Z\u00fcrich\\u{200b}\u{1f600}\\u{85}"');
});

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

// Letters and digits of every script are allowed, as Rust's char::is_alphanumeric decides
// (Alphabetic or Numeric); the rows beyond ASCII pin what the Unicode property escapes matched
// before the class was generated (issue 46: the component engine rejected them at build time).
const ALLOWED: Array<[what: string, char: string]> = [
  ['Latin-1 letter (Ll)', '\u00e9'],
  ['sharp s (Ll)', '\u00df'],
  ['Cyrillic capital (Lu)', '\u0416'],
  ['Greek with tonos (Ll)', '\u03ac'],
  ['CJK ideograph (Lo)', '\u4e2d'],
  ['Arabic alef (Lo)', '\u0627'],
  ['Devanagari ha (Lo)', '\u0939'],
  ['feminine ordinal (Lo)', '\u00aa'],
  ['modifier small h (Lm)', '\u02b0'],
  ['Devanagari vowel sign aa (Mc, Other_Alphabetic)', '\u093e'],
  ['combining ypogegrammeni (Mn, Other_Alphabetic)', '\u0345'],
  ['circled capital A (So, Other_Alphabetic)', '\u24b6'],
  ['fullwidth capital A (Lu)', '\uff21'],
  ['Arabic-Indic digit three (Nd)', '\u0663'],
  ['Devanagari digit four (Nd)', '\u096a'],
  ['fullwidth digit zero (Nd)', '\uff10'],
  ['Roman numeral twelve (Nl)', '\u216b'],
  ['vulgar fraction one half (No)', '\u00bd'],
  ['superscript two (No)', '\u00b2'],
  ['circled digit one (No)', '\u2460'],
  ['astral mathematical bold A (Lu)', '\u{1d400}'],
  ['astral mathematical double-struck zero (Nd)', '\u{1d7d8}'],
  ['astral Gothic hwair (Nl)', '\u{10348}'],
  ['astral digit zero full stop (No)', '\u{1f100}'],
];

// Everything else is refused, quoted as Rust's {:?} of a char quotes it.
const REFUSED: Array<[what: string, char: string, quoted: string]> = [
  ['no-break space (Zs)', '\u00a0', "'\u00a0'"],
  ['em space (Zs)', '\u2003', "'\u2003'"],
  ['ideographic space (Zs)', '\u3000', "'\u3000'"],
  ['tab (Cc)', '\t', "'\\t'"],
  ['next line (Cc)', '\u0085', "'\\u{85}'"],
  ['zero-width space (Cf)', '\u200b', "'\\u{200b}'"],
  ['line separator (Zl)', '\u2028', "'\\u{2028}'"],
  ['combining acute accent (Mn, not Alphabetic)', '\u0301', "'\u0301'"],
  ['middle dot (Po)', '\u00b7', "'\u00b7'"],
  ['euro sign (Sc)', '\u20ac', "'\u20ac'"],
  ['emoji (So)', '\u{1f600}', "'\u{1f600}'"],
  ['unassigned (Cn)', '\u0378', "'\\u{378}'"],
  ['private use (Co)', '\ue000', "'\\u{e000}'"],
  ['lone surrogate (Cs)', '\ud800', "'\\u{d800}'"],
];

test('letters and digits of every script are allowed, in keys and values', () => {
  for (const [what, c] of ALLOWED) {
    assert.equal(validateTag(`k${c}`, `v${c}`), undefined, what);
  }
});

test('other characters are refused, named as the Rust SDK names them', () => {
  for (const [what, c, quoted] of REFUSED) {
    const expected = `tag "k" contains ${quoted}; allowed are letters, digits, spaces and _ . : / = + - @`;
    assert.equal(validateTag('k', `v${c}`), expected, what);
  }
  assert.equal(
    validateTag('k\u200b', 'v'),
    `tag "k\\u{200b}" contains '\\u{200b}'; allowed are letters, digits, spaces and _ . : / = + - @`,
  );
});

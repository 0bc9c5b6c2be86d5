import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Quantity, QuantityError } from 'orca-plugin';

const q = (text: string) => Quantity.parse(text);
const fails = (text: string, kind: QuantityError['kind']) =>
  assert.throws(() => q(text), (e: unknown) => e instanceof QuantityError && e.kind === kind, text);

test('cpu quantities convert to millicores', () => {
  assert.equal(q('250m').toMillisCeil(), 250n);
  assert.equal(q('2').toMillisCeil(), 2000n);
  assert.equal(q('0.5').toMillisCeil(), 500n);
  assert.equal(q('1e3').toMillisCeil(), 1_000_000n);
});

test('fractions round up, never to zero', () => {
  assert.equal(q('1n').toMillisCeil(), 1n);
  assert.equal(q('1500m').toUnitsCeil(), 2n);
  assert.equal(q('0').toMillisCeil(), 0n);
  assert.equal(q('-1500m').toUnitsCeil(), -1n);
});

test('binary and decimal memory suffixes are exact', () => {
  assert.equal(q('1Ki').toUnitsCeil(), 1024n);
  assert.equal(q('4Ti').toUnitsCeil(), 4n << 40n);
  assert.equal(q('1.5Gi').toUnitsCeil(), 3n << 29n);
  assert.equal(q('128M').toUnitsCeil(), 128_000_000n);
  assert.equal(q(' 2Gi ').toNumber(), 2 * 2 ** 30);
});

test('equal values written differently compare equal', () => {
  assert.ok(q('1000m').equals(q('1')));
  assert.ok(q('1k').equals(q('1000')));
  assert.equal(q('1.5Gi').toString(), '15e-1*2^30');
});

test('malformed quantities are rejected with the input named, as the Rust SDK words it', () => {
  fails('', 'empty');
  fails('Gi', 'no-digits');
  fails('1.2.3', 'no-digits');
  fails('4TB', 'unknown-suffix');
  fails('1e41', 'unknown-suffix');
  assert.throws(() => q(''), { message: 'quantity is empty' });
  assert.throws(() => q('Gi'), { message: 'quantity "Gi" has no digits before its suffix' });
  assert.throws(() => q('4TB'), {
    message:
      'quantity "4TB" has an unknown suffix; expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent like e3',
  });
});

test('huge values are errors, like i128 overflow in Rust', () => {
  fails('9'.repeat(60), 'too-large');
  assert.throws(() => q('1e40').toMillisCeil(), { name: 'QuantityError', message: 'quantity "1e40" is too large' });
  assert.equal(q('1e-40').toMillisCeil(), 1n);
  assert.equal(q('1Ei').toMillisCeil(), 1000n << 60n);
});

test('surrounding Unicode spaces are trimmed; other characters are quoted in messages', () => {
  // String.prototype.trim: White_Space of JavaScript (Zs, tab, line terminators, BOM).
  for (const space of ['\u00a0', '\u2003', '\u3000', '\u2028', '\ufeff']) {
    assert.equal(q(`${space}2Gi${space}`).toUnitsCeil(), 2n << 30n, `U+${space.codePointAt(0)!.toString(16)}`);
  }
  // Next line (Cc) is not trimmed: the quantity has no digits, and the message escapes it.
  assert.throws(() => q('\u00852'), { message: 'quantity "\\u{85}2" has no digits before its suffix' });
  assert.throws(() => q('1\u200bGi'), {
    message:
      'quantity "1\\u{200b}Gi" has an unknown suffix; expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent like e3',
  });
  assert.throws(() => q('\u0663'), { message: 'quantity "\u0663" has no digits before its suffix' });
});
